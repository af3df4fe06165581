"""`gpushift rehearse --control-plane upstream`: the whole rehearsal (the cutover to DRA, a
verdict, the rollback, a verdict) with the twin's agents and Flux on kube-apiserver,
kube-controller-manager and kube-scheduler, through the real CLI and its `-o json`.

The first three are each one full rehearsal in real time (about five and a half minutes on
two cores), so each checks everything its run shows: both moves done, no violation, every
consumer Running again on the device plugin's 5 replicas per card, no slice left, and both
verdicts healthy (a Flux object left suspended would make them degraded: `flux-suspended`).
The last interrupts one, as tests/rehearse/test_interrupts.py does on the embedded server.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.rehearse.test_interrupts import BOUND, Run, _interrupt, _nothing_left

from gpushift_twin.rehearse import STEPS, gpushift_argv

pytestmark = [pytest.mark.upstream, pytest.mark.slow(seconds=1200)]

NODES = ("k8s-1", "k8s-2", "k8s-3")
CONSUMERS = 7  # six media apps and one llmkube model


def _rehearse(tmp_path: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            *gpushift_argv(),
            "rehearse",
            "--example",
            "homelab",
            "--control-plane",
            "upstream",
            *args,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=2400,
        check=False,
        cwd=tmp_path,
    )
    assert done.stdout, done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(done.stdout)
    print(f"rehearse {' '.join(args)} on upstream: {doc['wallSeconds']:.0f} s")
    assert done.returncode == 0, json.dumps(doc["notes"]) + done.stderr[-3000:]
    return doc


def _both_moves_clean(doc: dict[str, Any]) -> None:
    assert doc["kind"] == "Rehearsal"
    assert doc["controlPlane"] == "upstream"
    assert doc["timeScale"] == 1
    assert doc["ok"] is True
    assert doc["violations"] == []
    assert [(r["to"], r["result"]) for r in doc["runs"]] == [
        ("dra", "done"),
        ("device-plugin", "done"),
    ]
    for run in doc["runs"]:
        assert [s["name"] for s in run["steps"]] == list(STEPS)
        verdict = run["verdict"]
        assert verdict["source"] == "gpushift verdict"
        assert verdict["verdict"] == "healthy", verdict
    # Replicas restored: every consumer Running again, on the device plugin, no slice left.
    last = doc["last"]
    assert last["gpuPodsRunning"] == CONSUMERS
    assert last["allocatable"] == dict.fromkeys(NODES, 5)
    assert last["slices"] == dict.fromkeys(NODES, 0)
    assert last["violationsActive"] == 0


def test_a_kill_in_the_drain_then_resume_converges(tmp_path: Path) -> None:
    doc = _rehearse(tmp_path, "--kill-at", "drained:wait")
    _both_moves_clean(doc)
    to_dra = doc["runs"][0]
    assert to_dra["killedAt"] == "drained:wait"
    assert to_dra["attempts"] == 2
    killed = [s for s in to_dra["timeline"] if s["result"] == "killed"]
    assert [(s["name"], s["attempt"]) for s in killed] == [("drained", 1)]


def test_a_kill_at_the_merge_then_resume_converges_with_a_report(tmp_path: Path) -> None:
    doc = _rehearse(tmp_path, "--kill-at", "merge", "--report", str(tmp_path / "r.html"))
    _both_moves_clean(doc)
    to_dra = doc["runs"][0]
    assert to_dra["killedAt"] == "merge"
    assert to_dra["attempts"] == 2
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "no violation over the whole run" in page


def test_both_moves_complete_under_errors_and_dropped_watches(tmp_path: Path) -> None:
    # Through `gpushift twin proxy` in front of the twin: `twin serve` takes no fault flag
    # with agents on the real control plane.
    doc = _rehearse(tmp_path, "--error-rate", "0.1", "--drop-watch-every", "5", "--seed", "1")
    _both_moves_clean(doc)
    assert doc["faults"] == {"errorRate": 0.1, "dropWatchEvery": 5.0}
    assert any("watch interruptions, each resumed" in n for n in doc["notes"])


def test_ctrl_c_stops_the_cutover_the_proxy_and_the_control_plane(tmp_path: Path) -> None:
    # Every process the run started carries its marker, etcd and kube-apiserver included.
    r = Run(tmp_path, "--control-plane", "upstream", "--error-rate", "0.1", "--seed", "2")
    try:
        r.wait_for("cutover to dra: drained", timeout=600)
        assert any("twin proxy" in cmd for _, cmd in r.processes())
        assert any("kube-apiserver" in cmd for _, cmd in r.processes())
        code, took, line = _interrupt(r, signal.SIGINT)
        print(f"Ctrl-C on upstream: exit {code} in {took:.1f} s")
        assert code == 130
        assert took < BOUND
        assert line.startswith(
            "gpushift rehearse: interrupted by Ctrl-C during cutover to dra: drained"
        )
        assert "stopped 3 processes" in line  # the cutover, the proxy, the twin
        _nothing_left(r)
    finally:
        r.stop()
