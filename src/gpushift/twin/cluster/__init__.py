"""The cluster twin's agents: nodes, kubelets, scheduler, controllers and GPU agents.

They run in-process against the twin's :class:`~gpushift.twin.Store` on a virtual clock, so
objects move as on a cluster (pods bind, start and terminate; device plugins register;
the DRA driver publishes ResourceSlices) while clients drive it through the API::

    with run_cluster(example("homelab"), time_scale=100) as (twin, cluster):
        subprocess.run(["kubectl", "--kubeconfig", twin.kubeconfig, "get", "nodes"])
"""

from __future__ import annotations

from gpushift.twin.cluster._client import fetch_violations
from gpushift.twin.cluster._clock import VirtualClock
from gpushift.twin.cluster._context import Delays
from gpushift.twin.cluster._controllers import Cluster, run_cluster
from gpushift.twin.cluster._from_nodes import inventory_from_nodes
from gpushift.twin.cluster._inventory import (
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
from gpushift.twin.cluster._kubelet import NODE_FAULTS
from gpushift.twin.cluster._logs import LogBook
from gpushift.twin.cluster._loop import AgentThread, collector_paused
from gpushift.twin.cluster._monitor import Violation, ViolationBody, ViolationList
from gpushift.twin.cluster._promql import QueryError

__all__ = [
    "EXAMPLES",
    "MODELS",
    "NODE_FAULTS",
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
    "inventory_from_nodes",
    "load",
    "run_cluster",
    "uniform",
]
