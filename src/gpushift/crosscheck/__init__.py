"""simulate held to the real kube-scheduler: the same input on an upstream control plane.

:func:`against_upstream` loads simulate's input into a control plane (``gpushift.upstream``),
lets kube-controller-manager and kube-scheduler act until nothing changes, reads the outcome
back as a v1 List and sets it beside simulate's (:class:`Comparison`); :func:`compare` is the
comparison alone, a pure function of the two Lists (docs/simulate.md says what counts as a
difference). :class:`Session` keeps one control plane for several runs.
"""

from __future__ import annotations

from gpushift.crosscheck._compare import (
    VICTIM_ANNOTATION,
    Cluster,
    Difference,
    compare,
    reasons,
    rows,
    summarize,
    workload_of,
)
from gpushift.crosscheck._load import GATE, Plan, Slot, Written, plan, read_objects, write
from gpushift.crosscheck._run import (
    CONTROLLERS,
    Comparison,
    Session,
    UpstreamRun,
    against_upstream,
    run_upstream,
    tie_breaks,
)
from gpushift.crosscheck._settle import SettleTimeoutError

__all__ = [
    "CONTROLLERS",
    "GATE",
    "VICTIM_ANNOTATION",
    "Cluster",
    "Comparison",
    "Difference",
    "Plan",
    "Session",
    "SettleTimeoutError",
    "Slot",
    "UpstreamRun",
    "Written",
    "against_upstream",
    "compare",
    "plan",
    "read_objects",
    "reasons",
    "rows",
    "run_upstream",
    "summarize",
    "tie_breaks",
    "workload_of",
    "write",
]
