"""Health snapshots and verdicts of a live cluster's GPUs (``gpushift snapshot``/``verdict``).

``take_snapshot(kube)`` reads both allocators' state into one GpuSnapshot document (one
paginated list per kind); ``judge(snapshot, against=before)`` says healthy, degraded or broken
with reasons pointing at objects, and whether a transition is the expected one::

    with kube.connect(kubeconfig=path) as client:
        before = take_snapshot(client)
        ...  # the cutover
        verdict = judge(take_snapshot(client), against=before)
"""

from __future__ import annotations

from gpushift.verdict._judge import CHECKS, Check, Reason, exit_code, format_verdict, judge, reasons
from gpushift.verdict._ledgers import Card, Holder, Ledgers, allocator, ledgers
from gpushift.verdict._map import Row, format_map, share_map, svg_map
from gpushift.verdict._snapshot import (
    API_VERSION,
    KIND,
    PAGE,
    Lists,
    build_snapshot,
    component,
    dump_snapshot,
    load_snapshot,
    owner,
    query_series,
    read_lists,
    take_snapshot,
    write_file,
)
from gpushift.verdict._transition import transition

__all__ = [
    "API_VERSION",
    "CHECKS",
    "KIND",
    "PAGE",
    "Card",
    "Check",
    "Holder",
    "Ledgers",
    "Lists",
    "Reason",
    "Row",
    "allocator",
    "build_snapshot",
    "component",
    "dump_snapshot",
    "exit_code",
    "format_map",
    "format_verdict",
    "judge",
    "ledgers",
    "load_snapshot",
    "owner",
    "query_series",
    "read_lists",
    "reasons",
    "share_map",
    "svg_map",
    "take_snapshot",
    "transition",
    "write_file",
]
