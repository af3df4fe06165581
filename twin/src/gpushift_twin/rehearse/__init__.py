"""Rehearsing the cutover on a twin: ``gpushift rehearse``.

:func:`rehearse` starts a twin (``gpushift twin serve``), runs ``gpushift cutover --to dra``
and then ``gpushift rollback`` against it as subprocesses (the command-line contract, read
through their ``-o json`` event streams), takes a verdict after each, and samples the
cluster throughout from watches; the result is a frozen :class:`Rehearsal`, written as text
(:func:`as_text`), JSON (:func:`as_json`) or one self-contained HTML page
(:func:`write_report`)::

    result = rehearse(RehearseOptions(example="homelab", time_scale=100))
    print(as_text(result)); raise SystemExit(result.exit_code)
"""

from __future__ import annotations

from gpushift_twin.rehearse._cards import Card, build_map, ledger_of, read_map
from gpushift_twin.rehearse._cutover import (
    CutoverCommand,
    merge_command,
    run_attempt,
    run_direction,
)
from gpushift_twin.rehearse._defaults import (
    DEFAULT_NODE_NAMES,
    DEFAULT_NODES,
    MIGRATE_TO_DRA,
    DefaultInventory,
    MadeTarget,
    NodeLabel,
    NodeResource,
    default_inventory,
    depended_on,
    label_nodes,
    migrated_copy,
    node_resources,
    pod_resources,
    required_labels,
    stack_labels,
)
from gpushift_twin.rehearse._events import (
    STEPS,
    Attempt,
    KillPoint,
    RunRecord,
    StepSpan,
    fold_run,
    parse_line,
    parse_stream,
)
from gpushift_twin.rehearse._lifetime import Interrupted, Lifetime
from gpushift_twin.rehearse._output import as_json, as_text
from gpushift_twin.rehearse._progress import Progress
from gpushift_twin.rehearse._report import render_report, write_report
from gpushift_twin.rehearse._run import (
    KEPT_JOURNALS,
    Rehearsal,
    RehearsalInterruptedError,
    RehearseOptions,
    rehearse,
)
from gpushift_twin.rehearse._sampler import Sample, Sampler, allocatable_gpus, is_gpu_pod
from gpushift_twin.rehearse._settle import (
    GPU_STACK_CHARTS,
    Cluster,
    FluxKey,
    Settled,
    Unsettled,
    explain_pods,
    flux_objects,
    gpu_workload_owners,
    live_seeds,
    matters,
    repo_seeds,
    settle,
    still_unsettled,
)
from gpushift_twin.rehearse._twinproc import (
    TwinOptions,
    TwinProcess,
    TwinStartError,
    command_available,
    get_json,
    gpushift_argv,
    running_twin,
    start_twin,
)

__all__ = [
    "DEFAULT_NODES",
    "DEFAULT_NODE_NAMES",
    "GPU_STACK_CHARTS",
    "KEPT_JOURNALS",
    "MIGRATE_TO_DRA",
    "STEPS",
    "Attempt",
    "Card",
    "Cluster",
    "CutoverCommand",
    "DefaultInventory",
    "FluxKey",
    "Interrupted",
    "KillPoint",
    "Lifetime",
    "MadeTarget",
    "NodeLabel",
    "NodeResource",
    "Progress",
    "Rehearsal",
    "RehearsalInterruptedError",
    "RehearseOptions",
    "RunRecord",
    "Sample",
    "Sampler",
    "Settled",
    "StepSpan",
    "TwinOptions",
    "TwinProcess",
    "TwinStartError",
    "Unsettled",
    "allocatable_gpus",
    "as_json",
    "as_text",
    "build_map",
    "command_available",
    "default_inventory",
    "depended_on",
    "explain_pods",
    "flux_objects",
    "fold_run",
    "get_json",
    "gpu_workload_owners",
    "gpushift_argv",
    "is_gpu_pod",
    "label_nodes",
    "ledger_of",
    "live_seeds",
    "matters",
    "merge_command",
    "migrated_copy",
    "node_resources",
    "parse_line",
    "parse_stream",
    "pod_resources",
    "read_map",
    "rehearse",
    "render_report",
    "repo_seeds",
    "required_labels",
    "run_attempt",
    "run_direction",
    "running_twin",
    "settle",
    "stack_labels",
    "start_twin",
    "still_unsettled",
    "write_report",
]
