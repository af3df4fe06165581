"""The drain-boundary cutover between the device plugin and DRA, as planned steps.

Steps are frozen values (what to patch, what to wait for), built by a pure planner from what
the cluster shows and what the journal recorded; one executor does the I/O: the Lease lock,
the journal (ConfigMaps appended to by records, and a local JSON-lines file), each change
and each watch-based wait::

    outcome = Executor(kube, Request(Options(to="dra", merge="…")), emit=print).run()
    outcome.exit_code   # 0 done, 1 unhealthy, 4 refused, 5 timed out (docs/runbook.md)
"""

from __future__ import annotations

from gpushift.runbook._barrier import Agent, Barrier, choose_barrier, show_taint, untainted
from gpushift.runbook._conditions import (
    BRIDGE_REMEDIES,
    Allocatable,
    Condition,
    DependentsRetried,
    WorkloadsUp,
)
from gpushift.runbook._discover import discover, gpu_pods, holds_gpu, is_agent
from gpushift.runbook._executor import (
    EXIT,
    Cache,
    Executor,
    JournalStore,
    Outcome,
    Request,
    StoppedError,
    plan_json,
    plan_lines,
)
from gpushift.runbook._journal import (
    CHUNK_BYTES,
    JOURNAL_NAME,
    LEASE_NAME,
    PART_BYTES,
    Journal,
    chunk_name,
    chunk_plan,
    cluster_journal,
    head_journal,
    judge_lease,
    parse_lines,
    read_local,
)
from gpushift.runbook._left import left_lines, left_state
from gpushift.runbook._local import (
    LocalJournal,
    cluster_identity,
    cluster_key,
    local_journal,
    normalise_server,
)
from gpushift.runbook._model import (
    BARRIER_TAINT,
    CUTOVER_TAINT,
    STEPS,
    Change,
    Command,
    Consumer,
    Delete,
    Direction,
    ObjectRef,
    Options,
    Plan,
    Step,
    Wait,
)
from gpushift.runbook._pending import pending_causes, scheduling_message, why_pending
from gpushift.runbook._planner import (
    Context,
    barrier,
    facts,
    plan,
    plan_step,
    preflight,
    resume_waits,
)
from gpushift.runbook._snapshot import Judge, Snapshotter, judge, snapshot_of
from gpushift.runbook._target import (
    NEVER_RESTORED,
    DriverChart,
    Target,
    commit_tree,
    identified,
    older_than,
    read_target,
    returning,
)
from gpushift.runbook._view import View

__all__ = [
    "BARRIER_TAINT",
    "BRIDGE_REMEDIES",
    "CHUNK_BYTES",
    "CUTOVER_TAINT",
    "EXIT",
    "JOURNAL_NAME",
    "LEASE_NAME",
    "NEVER_RESTORED",
    "PART_BYTES",
    "STEPS",
    "Agent",
    "Allocatable",
    "Barrier",
    "Cache",
    "Change",
    "Command",
    "Condition",
    "Consumer",
    "Context",
    "Delete",
    "DependentsRetried",
    "Direction",
    "DriverChart",
    "Executor",
    "Journal",
    "JournalStore",
    "Judge",
    "LocalJournal",
    "ObjectRef",
    "Options",
    "Outcome",
    "Plan",
    "Request",
    "Snapshotter",
    "Step",
    "StoppedError",
    "Target",
    "View",
    "Wait",
    "WorkloadsUp",
    "barrier",
    "choose_barrier",
    "chunk_name",
    "chunk_plan",
    "cluster_identity",
    "cluster_journal",
    "cluster_key",
    "commit_tree",
    "discover",
    "facts",
    "gpu_pods",
    "head_journal",
    "holds_gpu",
    "identified",
    "is_agent",
    "judge",
    "judge_lease",
    "left_lines",
    "left_state",
    "local_journal",
    "normalise_server",
    "older_than",
    "parse_lines",
    "pending_causes",
    "plan",
    "plan_json",
    "plan_lines",
    "plan_step",
    "preflight",
    "read_local",
    "read_target",
    "resume_waits",
    "returning",
    "scheduling_message",
    "show_taint",
    "snapshot_of",
    "untainted",
    "why_pending",
]
