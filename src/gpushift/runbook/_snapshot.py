"""The GPU state recorded before and after the move, and the judge comparing the two.

The snapshot and verdict steps call a :class:`Snapshotter` and a :class:`Judge`; the built-in
ones (kept in the journal) record per-node ``nvidia.com/*`` allocatable, ResourceSlices per node
and the GPU pods with their phase, and call a move healthy when every GPU pod runs and no fewer
run than before. Beside them the verdict step judges the whole GpuSnapshot with
``gpushift.verdict`` against the one taken before the move (:func:`verdict_reasons`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from gpushift._obj import Obj
from gpushift.kube import Kube
from gpushift.runbook._discover import gpu_pods, pod_key
from gpushift.runbook._model import DRA_DRIVER
from gpushift.runbook._view import View


class Snapshotter(Protocol):
    """Takes the GPU state of a cluster as a JSON-able dict."""

    def __call__(self, kube: Kube, /) -> Obj: ...


class Judge(Protocol):
    """Judges the state after the move against the one before: (healthy, reasons)."""

    def __call__(
        self, before: Mapping[str, Any], after: Mapping[str, Any], /
    ) -> tuple[bool, list[str]]: ...


def snapshot_of(view: View) -> Obj:
    """The built-in snapshot of a view."""
    nodes: dict[str, Obj] = {}
    for node in view.all("Node"):
        name = str(node["metadata"]["name"])
        alloc = ((node.get("status") or {}).get("allocatable")) or {}
        nodes[name] = {
            "allocatable": {
                k: str(v) for k, v in sorted(alloc.items()) if str(k).startswith("nvidia.com/")
            },
            "resourceSlices": 0,
            "devices": 0,
        }
    for rs in view.all("ResourceSlice"):
        spec = rs.get("spec") or {}
        on = str(spec.get("nodeName") or "")
        if spec.get("driver") == DRA_DRIVER and on in nodes:
            nodes[on]["resourceSlices"] += 1
            nodes[on]["devices"] += len(spec.get("devices") or [])
    pods = [
        {
            "pod": pod_key(p),
            "phase": str((p.get("status") or {}).get("phase") or "Pending"),
            "node": str((p.get("spec") or {}).get("nodeName") or ""),
        }
        for p in gpu_pods(view)
    ]
    return {"nodes": nodes, "gpuPods": pods}


def judge(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Healthy when every GPU pod after the move is Running and at least as many run as
    before (pods get new names when they are recreated, so counts are compared)."""
    reasons: list[str] = []
    after_pods = list(after.get("gpuPods") or [])
    not_running = [p["pod"] for p in after_pods if p.get("phase") != "Running"]
    if not_running:
        reasons.append("GPU pods not Running: " + ", ".join(not_running))
    ran = sum(1 for p in before.get("gpuPods") or [] if p.get("phase") == "Running")
    runs = sum(1 for p in after_pods if p.get("phase") == "Running")
    if runs < ran:
        reasons.append(f"{runs} GPU pods Running after the move, {ran} before")
    return not reasons, reasons


def verdict_reasons(doc: Mapping[str, Any]) -> list[str]:
    """The lines of a ``gpushift verdict`` document that make a move unhealthy: its warnings
    and errors, and what changed that the transition did not expect."""
    out = [
        f"{r.get('severity')}: {r.get('object')}: {r.get('message')}"
        for r in doc.get("reasons") or []
        if r.get("severity") in ("error", "warning")
    ]
    transition = doc.get("transition") or {}
    if transition and not transition.get("expected"):
        out += [f"unexpected: {u}" for u in transition.get("unexpected") or []] or [
            "the change is not the expected transition"
        ]
    return out
