"""Values shared by several renderers: node placement, time-slicing config, RuntimeClass."""

from __future__ import annotations

from typing import Any

from gpushift._yamlout import Block
from gpushift.render._config import GpushiftConfig

#: Name of the Kustomization, HelmRelease and OCIRepository of each GPU-stack component.
GPU_OPERATOR = "gpu-operator"
DRA_DRIVER = "dra-driver-nvidia-gpu"
DEVICE_PLUGIN = "nvidia-device-plugin"
DCGM_EXPORTER = "dcgm-exporter"
#: The ResourceClaimTemplate every DRA consumer in a namespace shares.
CLAIM_TEMPLATE = "any-nvidia-gpu"
CLAIM_TEMPLATES_APP = "gpu-claim-templates"
#: Apps rendered once per namespace under one name: in a single Flux namespace their
#: Kustomizations take the namespace as a suffix (``gpu-claim-templates-media``).
LLMKUBE_MODELS = "llmkube-models"
PER_NAMESPACE_APPS = frozenset({CLAIM_TEMPLATES_APP, LLMKUBE_MODELS})
#: ConfigMap and key of the time-slicing config (gpu-operator's devicePlugin.config form).
TIME_SLICING_CONFIGMAP = "time-slicing-config"
TIME_SLICING_KEY = "any"
#: The extended resource the device plugin advertises (and DRA bridges).
GPU_RESOURCE = "nvidia.com/gpu"

# Each chart's default tolerations; a values list replaces the default, so keep them.
# Source: NVIDIA/gpu-operator deployments/gpu-operator/values.yaml (daemonsets.tolerations).
OPERATOR_DEFAULT_TOLERATIONS = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
# Source: kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/.../values.yaml.
DRA_DEFAULT_TOLERATIONS = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
# Source: NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin/values.yaml.
DEVICE_PLUGIN_DEFAULT_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
]


def tolerations(cfg: GpushiftConfig) -> list[dict[str, Any]]:
    """The configured GPU-node tolerations, as Kubernetes writes them."""
    return [t.as_dict() for t in cfg.cluster.gpu_nodes.tolerations]


def with_default_tolerations(
    cfg: GpushiftConfig, defaults: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A chart's default tolerations followed by the configured ones not already there."""
    out = [dict(t) for t in defaults]
    out.extend(t for t in tolerations(cfg) if t not in out)
    return out


def gpu_node_affinity(cfg: GpushiftConfig) -> dict[str, Any]:
    """Required node affinity on the GPU-node label (value ``"true"``)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": cfg.gpu_label, "operator": "In", "values": ["true"]}
                        ]
                    }
                ]
            }
        }
    }


def time_slicing_config(replicas: int) -> Block:
    """The device plugin's config file (api/config/v1) sharing each GPU ``replicas`` ways."""
    return Block(
        "version: v1\n"
        "sharing:\n"
        "  timeSlicing:\n"
        "    renameByDefault: false\n"
        "    resources:\n"
        f"      - name: {GPU_RESOURCE}\n"
        f"        replicas: {replicas}"
    )


def runtime_class(name: str) -> dict[str, Any]:
    """A RuntimeClass ``name`` with the containerd handler of the same name."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name},
        "handler": name,
    }


def split_image(image: str) -> tuple[str, str]:
    """``(repository, tag)`` of ``repo[:tag][@digest]``; the tag defaults to ``latest``."""
    digest = ""
    if "@" in image:
        image, digest = image.split("@", 1)
        digest = "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon + 1 :] + digest
    return image, "latest" + digest


def kustomization_ref(name: str, namespace: str, *, flux_namespace: str | None) -> tuple[str, str]:
    """``(name, namespace)`` of the Flux Kustomization of app ``name`` in ``namespace``.

    By default (``flux_namespace`` None) it lives in the app's own namespace under the app's
    name; with ``cluster.fluxNamespace`` every Kustomization lives there, and per-namespace apps
    are suffixed with their namespace so two namespaces' templates do not share one name.
    """
    if flux_namespace is None:
        return name, namespace
    return (f"{name}-{namespace}" if name in PER_NAMESPACE_APPS else name), flux_namespace
