"""kill -9 at every step boundary, in the middle of waits and between changes, then
``--resume``: the run converges with no invariant violation and every workload back at the
replicas the journal recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.runbook.conftest import MEDIA, Env, homelab, kill9

from gpushift.runbook import STEPS

KS = "kustomize.toolkit.fluxcd.io/v1"
HR = "helm.toolkit.fluxcd.io/v2"
ISVC = "inference.llmkube.dev/v1alpha1"
#: Steps that wait for the cluster (the others only change or record).
WAITING = ("drained", "merge", "old-allocator-gone", "new-allocator-up", "resume", "resume-bridged")


def _run_until(
    env: Env, args: list[str], points: list[tuple[str, str, int]], journal: Path
) -> tuple[Any, tuple[str, str, int] | None]:
    """Run, reading events; kill -9 at the first of ``points`` (event, step, nth) reached.
    Points of steps the run has gone past are dropped from the list as it goes. Returns
    (the final object, None) when the run ended first, else (None, the point)."""
    proc = env.start(*args, journal=journal)
    assert proc.stdout is not None
    counts: dict[tuple[str, str], int] = {}
    for line in proc.stdout:
        obj = json.loads(line)
        if obj["kind"] == "CutoverResult":
            proc.communicate(timeout=30)
            return obj, None
        step = obj.get("step")
        if step is None:
            continue
        while points and STEPS.index(points[0][1]) < STEPS.index(step):
            points.pop(0)
        key = (obj["event"], step)
        counts[key] = counts.get(key, 0) + 1
        if points and key == points[0][:2] and counts[key] >= points[0][2]:
            kill9(proc)
            return None, points.pop(0)
    proc.communicate(timeout=30)
    raise AssertionError(f"the run ended without a result: {proc.returncode}")


def _crash_through(
    env: Env, first: list[str], points: list[tuple[str, str, int]], journal: Path
) -> tuple[dict[str, Any], list[tuple[str, str, int]]]:
    """The first run and then --resume runs, each killed at the next point it reaches; the
    last run goes to the end. Returns its result and the points where a run was killed."""
    args = first
    kills: list[tuple[str, str, int]] = []
    points = list(points)
    while True:
        got, point = _run_until(env, args, points, journal)
        if got is not None:
            return got, kills
        assert point is not None
        kills.append(point)
        stored = env.journal()
        if stored["state"] in ("done", "unhealthy"):
            # The signal landed after the run had finished.
            return {"result": stored["state"], "to": stored["to"], "reasons": []}, kills
        args = [first[0], "--resume", "--step-timeout", "120s"]


def _back(env: Env, journal: dict[str, Any]) -> None:
    """Every object the suspend step changed holds its recorded value again."""
    recorded = {
        (c["object"], c["field"]): c["before"] for c in journal["changes"] if c["step"] == "suspend"
    }
    assert recorded, "the run recorded no change"
    for (obj, fieldname), before in recorded.items():
        kind, ns, name = obj.split("/")
        api = {"Kustomization": KS, "HelmRelease": HR, "InferenceService": ISVC}.get(kind)
        live = env.get(kind, ns, name, api)
        if fieldname == "spec.suspend":
            assert live["spec"].get("suspend") in (None, False, before), obj
        else:
            assert live["spec"]["replicas"] == before, obj
    for name in MEDIA:
        assert env.get("Deployment", "media", name)["spec"]["replicas"] == 1


def _points(steps: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """At each step's start (the boundary after the step before), between two changes of the
    suspend step, and at the first wait of each waiting step."""
    out: list[tuple[str, str, int]] = []
    for step in steps:
        out.append(("step-start", step, 1))
        if step == "suspend":
            out.append(("change", step, 5))
        if step in WAITING:
            out.append(("wait", step, 1))
    return out


@pytest.mark.slow(seconds=50)
def test_kill9_everywhere_then_resume_converges_both_ways(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        journal = tmp_path / "journal.json"
        result, kills = _crash_through(
            env,
            ["cutover", "--to", "dra", "--merge", env.merge(env.dra), "--step-timeout", "120s"],
            _points(STEPS),
            journal,
        )
        assert result["result"] == "done", (result["reasons"], kills)
        # Every step was killed into at least once, waits included (a process may finish
        # an instant step before the signal lands, so a few points pass by).
        assert len({step for _, step, _ in kills}) >= len(STEPS) - 2, kills
        assert len({step for event, step, _ in kills if event == "wait"}) >= 2, kills
        assert env.allocatable() == {"k8s-1": "0", "k8s-2": "0", "k8s-3": "0"}
        assert len(env.running("media")) == 6
        stored = env.journal()
        assert stored["state"] == "done"
        _back(env, stored)
        assert env.violations() == []

        # Back again, killed at each waiting step's wait and at two boundaries.
        points = [("step-start", "suspend", 1), ("change", "suspend", 3)] + [
            ("wait", s, 1) for s in WAITING
        ]
        result, kills = _crash_through(
            env,
            ["rollback", "--merge", env.merge(env.plugin), "--step-timeout", "120s"],
            points,
            journal,
        )
        assert result["result"] == "done" and result["to"] == "device-plugin", result
        assert len(kills) >= 2, kills
        assert env.allocatable() == {"k8s-1": "5", "k8s-2": "5", "k8s-3": "5"}
        stored = env.journal()
        _back(env, stored)
        assert env.violations() == []
