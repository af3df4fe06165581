"""Type stub of gpushift_twin.cluster: its public names, which __init__.py loads on first use."""

from ._client import fetch_violations
from ._clock import VirtualClock
from ._context import Delays
from ._controllers import Cluster, run_cluster
from ._from_nodes import inventory_from_nodes
from ._generic import generic_resources
from ._inventory import (
    EXAMPLES,
    MODELS,
    Gpu,
    Inventory,
    NodeSpec,
    example,
    from_text,
    load,
    uniform,
)
from ._kubelet import NODE_FAULTS
from ._logs import LogBook
from ._loop import AgentThread, collector_paused
from ._monitor import (
    Violation,
    ViolationBody,
    ViolationList,
)
from ._nodes import TWIN_LABELS, twin_label
from ._promql import QueryError

__all__ = [
    "EXAMPLES",
    "MODELS",
    "NODE_FAULTS",
    "TWIN_LABELS",
    "AgentThread",
    "Cluster",
    "Delays",
    "Gpu",
    "Inventory",
    "LogBook",
    "NodeSpec",
    "QueryError",
    "Violation",
    "ViolationBody",
    "ViolationList",
    "VirtualClock",
    "collector_paused",
    "example",
    "fetch_violations",
    "from_text",
    "generic_resources",
    "inventory_from_nodes",
    "load",
    "run_cluster",
    "twin_label",
    "uniform",
]
