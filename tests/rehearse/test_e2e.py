"""The whole rehearsal on the homelab twin: the real `gpushift cutover` and `rollback`.

The rehearsal drives the real commands as subprocesses through their `-o json` contract
(docs/runbook.md), so these tests cover both sides of it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpushift_twin.rehearse import (
    STEPS,
    KillPoint,
    RehearseOptions,
    gpushift_argv,
    rehearse,
    write_report,
)

pytestmark = [pytest.mark.slow(seconds=60)]

NODES = ("k8s-1", "k8s-2", "k8s-3")
CONSUMERS = 7  # six media apps and one llmkube model


def test_homelab_both_directions_with_zero_violations(tmp_path: Path) -> None:
    result = rehearse(RehearseOptions(example="homelab", time_scale=100))
    assert result.violations == ()
    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.exit_code == 0
    for run in result.runs:
        assert [s["name"] for s in run.steps] == list(STEPS)
        assert run.attempts == 1
    samples = result.samples
    # before: time-slicing, every consumer Running
    assert samples[0].allocatable == tuple((n, 5) for n in NODES)
    assert samples[0].gpu_pods_running == CONSUMERS
    # in between: the old allocator gone and one slice per node
    dra = [s for s in samples if s.slices == tuple((n, 1) for n in NODES)]
    assert any(all(a == 0 for _, a in s.allocatable) for s in dra)
    # The cutover's taint holds the new allocator's agents off each node until the old one is
    # gone, so no node ever shows both ledgers, whatever order Flux applies the merge in.
    both = [
        s
        for s in samples
        if any(a > 0 and n > 0 for (_, a), (_, n) in zip(s.allocatable, s.slices, strict=True))
    ]
    assert both == []
    # after the way back: as before
    assert samples[-1].allocatable == tuple((n, 5) for n in NODES)
    assert samples[-1].slices == tuple((n, 0) for n in NODES)
    assert samples[-1].gpu_pods_running == CONSUMERS
    maps = dict(result.cards)
    assert {c.ledger for c in maps["after dra"]} == {"DRA"}
    assert sum(len(c.tenants) for c in maps["after dra"]) == CONSUMERS
    assert {c.ledger for c in maps["after device-plugin"]} == {"device plugin"}
    page = write_report(result, tmp_path / "rehearsal.html").read_text(encoding="utf-8")
    assert "no violation over the whole run" in page


def test_kill_in_the_drain_wait_then_resume_converges() -> None:
    result = rehearse(
        RehearseOptions(example="homelab", time_scale=100, kill_at=KillPoint.parse("drained:wait"))
    )
    to_dra = result.runs[0]
    assert to_dra.killed_at == "drained:wait"
    assert to_dra.attempts == 2
    assert any(s.result == "killed" and s.name == "drained" for s in to_dra.spans)
    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.violations == ()
    assert result.samples[-1].gpu_pods_running == CONSUMERS


def test_cli_json_with_a_kill_at_the_merge(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *gpushift_argv(),
            "rehearse",
            "--example",
            "homelab",
            "--kill-at",
            "merge",
            "--report",
            str(tmp_path / "r.html"),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["kind"] == "Rehearsal"
    assert doc["violations"] == []
    assert [(r["to"], r["result"]) for r in doc["runs"]] == [
        ("dra", "done"),
        ("device-plugin", "done"),
    ]
    assert doc["runs"][0]["killedAt"] == "merge"
    for run in doc["runs"]:
        assert [s["name"] for s in run["steps"]] == list(STEPS)
        assert all(isinstance(s["seconds"], float) for s in run["steps"])
    assert (tmp_path / "r.html").stat().st_size > 1_000_000
