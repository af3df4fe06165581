"""The embedded ``homelab`` example: a Talos/Flux cluster with three NVIDIA L4 nodes.

Modelled on the LukeEvansTech/talos-cluster GitOps repository: media apps on the bjw-s
app-template (GPU request, node affinity on ``nvidia.com/gpu.present``, a hostname topology
spread over ``gpu-workload: "true"`` pods) and one llmkube inference Deployment as llmkube
renders it (``limits: nvidia.com/gpu: 1`` only, the operator's GPU toleration, required
anti-affinity to other models, PriorityClass ``gpu-preemptible`` at -100).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gpushift._errors import InputError, UsageError
from gpushift._sharing import (
    Allocator,
    Sharing,
    consumable_shares,
    parse_sharing,
    sharing_problem,
    time_slicing_replicas,
)
from gpushift.engine._nvidia import GpuInfo, nvidia_device_classes, nvidia_resource_slice

NODES = ("k8s-1", "k8s-2", "k8s-3")
#: NVIDIA L4: 24 GB board, NVML reports 23034 MiB.
L4_MEMORY = 23034 * 2**20
MEDIA_NAMESPACE = "media"
AI_NAMESPACE = "ai"
CLAIM_TEMPLATE = "any-nvidia-gpu"

# (app, [(container, cpu, memory, memory limit, gpu)]) from the apps' HelmRelease values.
_MEDIA: tuple[tuple[str, tuple[tuple[str, str, str | None, str, bool], ...]], ...] = (
    ("jellyfin", (("app", "100m", "1Gi", "8Gi", True),)),
    ("plex", (("app", "2000m", "4Gi", "16Gi", True), ("logs", "10m", "10Mi", "64Mi", False))),
    ("tdarr", (("app", "100m", "512Mi", "2Gi", False), ("node", "500m", "512Mi", "4Gi", True))),
    ("pinchflat", (("app", "10m", None, "2Gi", True),)),
    ("dispatcharr", (("app", "50m", "1Gi", "3Gi", True),)),
    ("whisper", (("app", "500m", "2Gi", "6Gi", True),)),
)

MODEL = "llama-nvidia"


@dataclass(frozen=True, slots=True)
class Setup:
    """One way of sharing the cards: the allocator and its sharing mode."""

    allocator: Allocator
    sharing: Sharing

    @property
    def label(self) -> str:
        """A column title such as ``time-slicing 5`` or ``shares 5``."""
        if not self.allocator.is_dra:
            return (
                "exclusive (device plugin)"
                if self.sharing == "exclusive"
                else (f"time-slicing {self.sharing}")
            )
        if isinstance(self.sharing, int):
            return f"shares {self.sharing}"
        return self.sharing


#: The setups ``--compare`` puts side by side.
COMPARE = (
    Setup(Allocator.DEVICE_PLUGIN, 5),
    Setup(Allocator.DRA, 5),
    Setup(Allocator.DRA, "memory"),
    Setup(Allocator.DRA, "unlimited"),
)


def setup(*, allocator: str, sharing: str) -> Setup:
    """Validate an ``--allocator``/``--sharing`` pair. Raises UsageError for a bad one.

    The example's nodes run the device plugin or the DRA driver (gpu-operator deploys the
    same device plugin, so it is not a separate choice here).
    """
    if allocator not in (Allocator.DEVICE_PLUGIN, Allocator.DRA):
        raise UsageError(f"--allocator must be device-plugin or dra, not {allocator!r}")
    try:
        parsed = parse_sharing(sharing)
    except InputError as err:
        raise UsageError(err.message) from None
    chosen = Allocator(allocator)
    problem = sharing_problem(allocator=chosen, sharing=parsed)
    if problem is not None:
        raise UsageError(problem)
    return Setup(chosen, parsed)


def _node(*, name: str, s: Setup) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "talos",
        "extensions.talos.dev/nvidia-container-toolkit-production": "true",
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.count": "1",
        "nvidia.com/gpu.memory": "23034",
        "nvidia.com/gpu.product": "NVIDIA-L4",
    }
    allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "200Gi"}
    if not s.allocator.is_dra:
        replicas = time_slicing_replicas(s.sharing)
        allocatable["nvidia.com/gpu"] = str(replicas)
        if replicas > 1:
            labels["nvidia.com/gpu.replicas"] = str(replicas)
            labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
            labels["nvidia.com/gpu.product"] = "NVIDIA-L4-SHARED"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def _media(*, app: str, containers: Any, s: Setup) -> dict[str, Any]:
    specs = []
    for cname, cpu, mem, mem_limit, gpu in containers:
        requests: dict[str, Any] = {"cpu": cpu}
        if mem:
            requests["memory"] = mem
        limits: dict[str, Any] = {"memory": mem_limit}
        resources: dict[str, Any] = {"requests": requests, "limits": limits}
        if gpu and not s.allocator.is_dra:
            requests["nvidia.com/gpu"] = 1
            limits["nvidia.com/gpu"] = 1
        elif gpu:
            resources["claims"] = [{"name": "nvidia-gpu"}]
        specs.append({"name": cname, "image": f"ghcr.io/example/{app}", "resources": resources})
    labels = {"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app}
    pod_spec: dict[str, Any] = {
        "runtimeClassName": "nvidia",
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.present",
                                    "operator": "In",
                                    "values": ["true"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"gpu-workload": "true"}},
            }
        ],
        "containers": specs,
    }
    if s.allocator.is_dra:
        pod_spec["resourceClaims"] = [
            {"name": "nvidia-gpu", "resourceClaimTemplateName": CLAIM_TEMPLATE}
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app, "namespace": MEDIA_NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**labels, "gpu-workload": "true"}},
                "spec": pod_spec,
            },
        },
    }


def _model() -> dict[str, Any]:
    # llmkube internal/controller deployment_builder.go: GPU as a limit only, the operator's
    # toleration, Recreate strategy; InferenceService nodeSelector/affinity/podLabels as set.
    labels = {"app": MODEL, "inference.llmkube.dev/service": MODEL}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": MODEL, "namespace": AI_NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": {**labels, "llm-gpu-model": "true"}},
                "spec": {
                    "priorityClassName": "gpu-preemptible",
                    "runtimeClassName": "nvidia",
                    "nodeSelector": {"nvidia.com/gpu.present": "true"},
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {"matchLabels": {"llm-gpu-model": "true"}},
                                }
                            ]
                        }
                    },
                    "tolerations": [
                        {
                            "key": "nvidia.com/gpu",
                            "operator": "Equal",
                            "value": "present",
                            "effect": "NoSchedule",
                        }
                    ],
                    "containers": [
                        {
                            "name": "llama-server",
                            "image": "ghcr.io/ggml-org/llama.cpp:server-cuda",
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "20Gi"},
                                "limits": {"nvidia.com/gpu": 1},
                            },
                        }
                    ],
                },
            },
        },
    }


def burst(s: Setup, *, replicas: int) -> dict[str, Any]:
    """A default-priority transcode Deployment of ``replicas`` pods, one GPU slot each (the
    preemption probe of ``--compare``)."""
    obj = _media(app="transcode-burst", containers=(("app", "100m", "256Mi", "1Gi", True),), s=s)
    obj["spec"]["replicas"] = replicas
    return copy.deepcopy(obj)


def homelab(s: Setup) -> list[dict[str, Any]]:
    """Every object of the example under setup ``s`` (fresh copies on every call)."""
    objs: list[dict[str, Any]] = [_node(name=n, s=s) for n in NODES]
    if s.allocator.is_dra:
        sharing = consumable_shares(s.sharing)
        for i, n in enumerate(NODES):
            gpu = GpuInfo(
                minor=0,
                uuid=f"GPU-5c1f0e3a-7d2b-4e8f-9a6c-0b3d2e1f4a{i:02d}",
                product_name="NVIDIA L4",
                memory_bytes=L4_MEMORY,
                architecture="Ada Lovelace",
                cuda_compute_capability="8.9",
                pci_bus_id="0000:01:00.0",
            )
            objs.append(dict(nvidia_resource_slice(node_name=n, gpus=[gpu], sharing=sharing)))
        objs.extend(dict(c) for c in nvidia_device_classes())
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": CLAIM_TEMPLATE, "namespace": MEDIA_NAMESPACE},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "nvidia-gpu",
                                    "exactly": {"deviceClassName": "gpu.nvidia.com"},
                                }
                            ]
                        }
                    }
                },
            }
        )
    objs.append(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gpu-preemptible"},
            "value": -100,
            "globalDefault": False,
            "description": (
                "LLM inference that yields its GPU slice to default-priority transcodes."
            ),
        }
    )
    objs.extend(_media(app=app, containers=containers, s=s) for app, containers in _MEDIA)
    objs.append(_model())
    return copy.deepcopy(objs)
