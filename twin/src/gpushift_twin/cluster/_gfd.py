"""GPU feature discovery's node labels (NVIDIA/k8s-device-plugin internal/lm).

GFD reads the device plugin's config, so the sharing labels follow the time-slicing config in
use; nothing removes them when the plugin goes (they stay stale, as upstream's do).
``nvidia.com/gpu.present`` is the GPU Operator's (from NFD), set when the node joins.
"""

from __future__ import annotations

import re

from gpushift_twin.cluster._inventory import Gpu

PRODUCT = "nvidia.com/gpu.product"
MEMORY = "nvidia.com/gpu.memory"
COUNT = "nvidia.com/gpu.count"
REPLICAS = "nvidia.com/gpu.replicas"
STRATEGY = "nvidia.com/gpu.sharing-strategy"
MIG_CAPABLE = "nvidia.com/mig.capable"
FAMILY = "nvidia.com/gpu.family"
COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"


def _sanitise(product: str) -> str:
    # internal/lm resource.go sanitise: spaces become '-', other invalid characters dropped.
    return re.sub(r"[^-A-Za-z0-9_.]", "", product.replace(" ", "-"))


def labels(
    gpus: tuple[Gpu, ...] | list[Gpu], *, replicas: int, strategy: str, renamed: bool
) -> dict[str, str]:
    """GFD's labels for a node with ``gpus`` under a config of ``replicas`` per card.

    ``replicas`` is 0 without a sharing config and 1 without replication (GFD's
    ``gpu.replicas``); the product gets ``-SHARED`` when replicas > 1 and the resource is not
    renamed (resource.go ``baseLabeler``).
    """
    if not gpus:
        return {}
    first = gpus[0]
    product = _sanitise(first.product)
    if replicas > 1 and not renamed:
        product += "-SHARED"
    major, _, minor = first.compute_capability.partition(".")
    return {
        PRODUCT: product,
        MEMORY: str(first.memory // 2**20),
        COUNT: str(len(gpus)),
        REPLICAS: str(replicas),
        STRATEGY: strategy,
        MIG_CAPABLE: "true" if first.mig_capable else "false",
        FAMILY: first.architecture.split()[0].lower(),
        COMPUTE_MAJOR: major,
        COMPUTE_MINOR: minor or "0",
    }
