"""Node objects as a kubelet registers them: labels, capacity, allocatable, conditions."""

from __future__ import annotations

import uuid

from gpushift import common
from gpushift.common import Obj
from gpushift_twin.apiserver import DEFAULT_KUBERNETES_VERSION
from gpushift_twin.cluster import _gfd
from gpushift_twin.cluster._inventory import NodeSpec

KUBELET_VERSION = f"v{DEFAULT_KUBERNETES_VERSION}"
#: Labels NFD and the GPU Operator put on a node with an NVIDIA PCI device
#: (NVIDIA/gpu-operator controllers/state_manager.go ``commonGPULabelKey``).
NFD_NVIDIA = "feature.node.kubernetes.io/pci-10de.present"
GPU_PRESENT = "nvidia.com/gpu.present"
#: The node labels the twin's own agents set: the kubelet's, NFD's NVIDIA PCI label, the GPU
#: Operator's ``gpu.present``, gpu-feature-discovery's (:mod:`._gfd`); the operator's
#: ``nvidia.com/gpu.deploy.*`` state labels are :func:`twin_label`'s prefix.
TWIN_LABELS = frozenset(
    {
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "kubernetes.io/arch",
        "kubernetes.io/hostname",
        "kubernetes.io/os",
        NFD_NVIDIA,
        GPU_PRESENT,
        _gfd.PRODUCT,
        _gfd.MEMORY,
        _gfd.COUNT,
        _gfd.REPLICAS,
        _gfd.STRATEGY,
        _gfd.MIG_CAPABLE,
        _gfd.FAMILY,
        _gfd.COMPUTE_MAJOR,
        _gfd.COMPUTE_MINOR,
    }
)
_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
# Kubelet defaults: evictionHard memory.available<100Mi, nodefs.available<10%.
_EVICTION_MEMORY = 100 * 2**20


def _conditions(now: str) -> list[Obj]:
    # k8s.io/kubernetes pkg/kubelet/nodestatus setters.go: the four standard conditions.
    def cond(kind: str, status: str, reason: str, message: str) -> Obj:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }

    return [
        cond(
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        cond(
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]


def twin_label(key: str) -> bool:
    """Whether the twin's own agents set the node label ``key`` (:data:`TWIN_LABELS`, and
    the GPU Operator's ``nvidia.com/gpu.deploy.*`` on GPU nodes). A key another agent sets on
    a real cluster (an NFD rule's ``feature.node.kubernetes.io/coral-tpu``, GFD's
    ``nvidia.com/gpu.machine``) is not one: in the twin only an inventory's ``labels`` put it
    on a node."""
    return key in TWIN_LABELS or key.startswith(_DEPLOY_PREFIX)


def node_object(
    spec: NodeSpec, *, index: int, now: str, kubelet_version: str = KUBELET_VERSION
) -> Obj:
    """The Node the kubelet of ``spec`` registers, Ready, with no device-plugin resources."""
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
    }
    if spec.gpus:
        labels[NFD_NVIDIA] = "true"
        labels[GPU_PRESENT] = "true"
    labels.update(spec.labels)
    memory = common.quantity_value(spec.memory)
    eph = common.quantity_value(spec.ephemeral_storage)
    capacity = {
        "cpu": spec.cpu,
        "ephemeral-storage": spec.ephemeral_storage,
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": spec.memory,
        "pods": str(spec.pods),
        **spec.resources,
    }
    allocatable = {
        **capacity,
        "ephemeral-storage": str(eph - eph // 10),
        "memory": common.format_quantity(max(memory - _EVICTION_MEMORY, 0), binary=True),
    }
    ident = uuid.uuid5(uuid.NAMESPACE_DNS, f"{spec.name}.node.twin")
    node_spec: Obj = {
        "podCIDR": f"10.244.{index % 256}.0/24",
        "podCIDRs": [f"10.244.{index % 256}.0/24"],
    }
    if spec.taints:
        node_spec["taints"] = [dict(t) for t in spec.taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": node_spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": _conditions(now),
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{index // 250}.{index % 250 + 2}"},
                {"type": "Hostname", "address": spec.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": ident.hex,
                "systemUUID": str(ident),
                "bootID": str(uuid.uuid5(ident, "boot")),
                "kernelVersion": "6.12.18",
                "osImage": "Ubuntu 24.04.2 LTS",
                "containerRuntimeVersion": "containerd://2.0.5",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def pod_ip(node_index: int, n: int) -> str:
    """The ``n``-th pod IP handed out on the node with this index (its podCIDR)."""
    return f"10.244.{node_index % 256}.{n % 253 + 2}"
