"""What the NVIDIA DRA driver (``gpu.nvidia.com``) publishes: ResourceSlices and DeviceClasses.

Mirrors kubernetes-sigs/dra-driver-nvidia-gpu (main, 0.5): the kubelet plugin's full-GPU
devices (``cmd/gpu-kubelet-plugin/deviceinfo.go``), its consumable-shares modes
(``consumable_shares.go``, gate ``ConsumableShares`` plus ``CONSUMABLE_SHARES``) and the Helm
chart's DeviceClasses (``templates/deviceclass-*.yaml``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from gpushift._sharing import ConsumableShares, ConsumableSharesError, parse_consumable_shares
from gpushift.engine._capacity import Amount
from gpushift.engine._dra_types import (
    Device as DeviceBody,
)
from gpushift.engine._dra_types import (
    DeviceAttribute,
    DeviceCapacity,
    DeviceClass,
    ResourceSlice,
)

__all__ = [
    "DRIVER_NAME",
    "ConsumableShares",
    "ConsumableSharesError",
    "GpuInfo",
    "nvidia_device_classes",
    "nvidia_gpu_device",
    "nvidia_resource_slice",
    "parse_consumable_shares",
]

#: cmd/gpu-kubelet-plugin: ``DriverName``.
DRIVER_NAME = "gpu.nvidia.com"

_MI = 1 << 20


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One full GPU as NVML reports it to the kubelet plugin.

    ``memory_bytes`` is None when NVML cannot report memory (the device then has no capacity).
    Versions are semver strings; ``cuda_compute_capability`` may be ``"8.9"``.
    """

    minor: int
    uuid: str
    product_name: str
    memory_bytes: int | None
    architecture: str
    cuda_compute_capability: str
    driver_version: str = "580.126.20"
    cuda_driver_version: str = "13.0.0"
    brand: str = "Nvidia"
    pci_bus_id: str | None = None
    pcie_root: str | None = None
    numa_node: int | None = None
    addressing_mode: str | None = None


def _semver(v: str) -> str:
    # The plugin publishes versions as full semver (major.minor.patch).
    parts = v.split(".")
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


def _q(value: int, *, binary: bool) -> str:
    return Amount(value, binary).text()


def nvidia_gpu_device(gpu: GpuInfo, *, sharing: ConsumableShares = "disabled") -> DeviceBody:
    """The ``spec.devices[]`` entry the plugin publishes for a full GPU in this sharing mode."""
    attrs: dict[str, DeviceAttribute] = {
        "type": {"string": "gpu"},
        "uuid": {"string": gpu.uuid},
        "productName": {"string": gpu.product_name},
        "brand": {"string": gpu.brand},
        "architecture": {"string": gpu.architecture},
        "cudaComputeCapability": {"version": _semver(gpu.cuda_compute_capability)},
        "driverVersion": {"version": _semver(gpu.driver_version)},
        "cudaDriverVersion": {"version": _semver(gpu.cuda_driver_version)},
    }
    if gpu.addressing_mode is not None:
        attrs["addressingMode"] = {"string": gpu.addressing_mode}
    if gpu.pci_bus_id is not None:
        attrs["resource.kubernetes.io/pciBusID"] = {"string": gpu.pci_bus_id}
    if gpu.pcie_root is not None:
        attrs["resource.kubernetes.io/pcieRoot"] = {"string": gpu.pcie_root}
    if gpu.numa_node is not None and gpu.numa_node >= 0:
        attrs["resource.kubernetes.io/numaNode"] = {"int": gpu.numa_node}
    dev: DeviceBody = {"name": f"gpu-{gpu.minor}", "attributes": attrs}
    if sharing == "disabled":
        if gpu.memory_bytes is not None:
            dev["capacity"] = {"memory": {"value": _q(gpu.memory_bytes, binary=True)}}
        return dev
    # consumable_shares.go applyConsumableShares
    dev["allowMultipleAllocations"] = True
    if gpu.memory_bytes is None:
        return dev
    mem = _q(gpu.memory_bytes // _MI * _MI, binary=True)
    caps: dict[str, DeviceCapacity] = {}
    if sharing == "memory":
        caps["memory"] = {
            "value": mem,
            "requestPolicy": {
                "default": mem,
                "validRange": {"min": "1Mi", "max": mem, "step": "1Mi"},
            },
        }
    else:
        caps["memory"] = {
            "value": mem,
            "requestPolicy": {
                "default": "0",
                "validRange": {"min": "0", "max": mem, "step": "1Mi"},
            },
        }
    if isinstance(sharing, int):
        n = str(sharing)
        caps["shares"] = {
            "value": n,
            "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": n, "step": "1"}},
        }
    dev["capacity"] = caps
    return dev


_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery util/rand: no vowels, no 0/1/3


def _suffix(node_name: str) -> str:
    # A stable stand-in for the random generateName suffix.
    h = int.from_bytes(hashlib.sha256(node_name.encode()).digest()[:8], "big")
    out = []
    for _ in range(5):
        h, i = divmod(h, len(_NAME_ALPHABET))
        out.append(_NAME_ALPHABET[i])
    return "".join(out)


def nvidia_resource_slice(
    *,
    node_name: str,
    gpus: list[GpuInfo] | tuple[GpuInfo, ...],
    sharing: ConsumableShares | str = "disabled",
    generation: int = 1,
) -> ResourceSlice:
    """The ResourceSlice the kubelet plugin publishes for a node's full GPUs.

    One pool named after the node with one slice (DynamicMIG off), devices ``gpu-<minor>``
    in minor order. ``sharing`` is a parsed or raw ``CONSUMABLE_SHARES`` value; "disabled"
    means the ConsumableShares gate is off. The object name follows the client library's
    ``<index>-<driver>-<node>-`` generateName with a suffix derived from the node name.
    Raises ConsumableSharesError for an invalid ``sharing``.
    """
    mode = parse_consumable_shares(sharing)
    generate = f"00000-{DRIVER_NAME}-{node_name}-"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": generate + _suffix(node_name),
            "generateName": generate,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node_name, "controller": True}
            ],
        },
        "spec": {
            "driver": DRIVER_NAME,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
            "devices": [
                nvidia_gpu_device(g, sharing=mode) for g in sorted(gpus, key=lambda g: g.minor)
            ],
        },
    }


def _selector(kind: str) -> str:
    return (
        f"device.driver == '{DRIVER_NAME}' && device.attributes['{DRIVER_NAME}'].type == '{kind}'"
    )


def nvidia_device_classes(*, api_version: str = "resource.k8s.io/v1") -> list[DeviceClass]:
    """The DeviceClasses the chart creates when ``resources.gpus.enabled`` (the default).

    ``gpu.nvidia.com`` maps the extended resource ``nvidia.com/gpu`` only when rendered for
    ``resource.k8s.io/v1``, as the chart's template does.
    """
    out: list[DeviceClass] = []
    for name, kind in (
        ("gpu.nvidia.com", "gpu"),
        ("mig.nvidia.com", "mig"),
        ("vfio.gpu.nvidia.com", "vfio"),
    ):
        cls: DeviceClass = {
            "apiVersion": api_version,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": _selector(kind)}}]},
        }
        if kind == "gpu" and api_version == "resource.k8s.io/v1":
            cls["spec"]["extendedResourceName"] = "nvidia.com/gpu"
        out.append(cls)
    return out
