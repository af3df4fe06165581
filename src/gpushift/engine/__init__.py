"""The GPU allocation engine: device-plugin ledger, DRA allocation, scheduler loop, hazards.

A library with no I/O beyond reading input files in :func:`load_inputs`. Upstream behaviour
(kube-scheduler, the DRA allocator, the NVIDIA DRA driver and device plugin) is the spec.
"""

from __future__ import annotations

from gpushift.engine._allocator import (
    ALLOCATION_RESULTS_MAX_SIZE,
    AllocatedState,
    StructuredAllocator,
    UnknownDeviceClassError,
    device_key,
)
from gpushift.engine._bridging import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    BridgeClaim,
    bridge_claim,
    class_mapping,
    delegated,
)
from gpushift.engine._cel import (
    CelSelectorEvaluator,
    SelectorError,
    SelectorEvaluationError,
)
from gpushift.engine._compare import compare_homelab
from gpushift.engine._core_types import Event, KubeList
from gpushift.engine._example import COMPARE, Setup, homelab, setup
from gpushift.engine._filters import (
    match_label_selector,
    node_matches_pod,
    tolerates,
    untolerated_taint,
)
from gpushift.engine._hazards import DOUBLE_ALLOCATION, DUAL_ADVERTISER, Hazard
from gpushift.engine._hazards import find as find_hazards
from gpushift.engine._inputs import Inputs, from_objects
from gpushift.engine._inputs import load as load_inputs
from gpushift.engine._ledger import CardLedger, GpuLedger, Tenant, card_layout
from gpushift.engine._nvidia import (
    DRIVER_NAME,
    ConsumableShares,
    ConsumableSharesError,
    GpuInfo,
    nvidia_device_classes,
    nvidia_gpu_device,
    nvidia_resource_slice,
    parse_consumable_shares,
)
from gpushift.engine._report import (
    Placement,
    as_list,
    card_rows,
    human,
    ignored_slices,
    placement,
)
from gpushift.engine._requests import pod_non_zero_requests, pod_requests

# The resourceclaim controller's claim naming, for the twin's controller.
from gpushift.engine._scheduler import NodeInfo, Outcome, PodInfo, pod_claim_generate_name, schedule
from gpushift.engine._simulation import Simulation, simulate
from gpushift.engine._workloads import DAEMONSET_TOLERATIONS, pin_daemon_pod, template_hash

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "COMPARE",
    "DAEMONSET_TOLERATIONS",
    "DOUBLE_ALLOCATION",
    "DRIVER_NAME",
    "DUAL_ADVERTISER",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION",
    "AllocatedState",
    "BridgeClaim",
    "CardLedger",
    "CelSelectorEvaluator",
    "ConsumableShares",
    "ConsumableSharesError",
    "Event",
    "GpuInfo",
    "GpuLedger",
    "Hazard",
    "Inputs",
    "KubeList",
    "NodeInfo",
    "Outcome",
    "Placement",
    "PodInfo",
    "SelectorError",
    "SelectorEvaluationError",
    "Setup",
    "Simulation",
    "StructuredAllocator",
    "Tenant",
    "UnknownDeviceClassError",
    "as_list",
    "bridge_claim",
    "card_layout",
    "card_rows",
    "class_mapping",
    "compare_homelab",
    "delegated",
    "device_key",
    "find_hazards",
    "from_objects",
    "homelab",
    "human",
    "ignored_slices",
    "load_inputs",
    "match_label_selector",
    "node_matches_pod",
    "nvidia_device_classes",
    "nvidia_gpu_device",
    "nvidia_resource_slice",
    "parse_consumable_shares",
    "pin_daemon_pod",
    "placement",
    "pod_claim_generate_name",
    "pod_non_zero_requests",
    "pod_requests",
    "schedule",
    "setup",
    "simulate",
    "template_hash",
    "tolerates",
    "untolerated_taint",
]
