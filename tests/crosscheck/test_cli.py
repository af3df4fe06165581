"""`gpushift simulate --against upstream`: the JSON it prints and its exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpushift.cli import main

ROOT = Path(__file__).resolve().parents[2]
NOT_HELPFUL = "Preemption is not helpful for scheduling"

# One GPU, a model bound to it at priority -100, and a media pod at priority 0 whose
# PriorityClass may not preempt (preemptionPolicy: Never), which simulate does not model:
# simulate lets the media pod preempt the model, kube-scheduler leaves it Pending
# (DefaultPreemption's PodEligibleToPreemptOthers).
NEVER_PREEMPTS = [
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "a"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}},
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "gpu-preemptible"},
        "value": -100,
    },
    {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "never-preempts"},
        "value": 0,
        "preemptionPolicy": "Never",
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "model"},
        "spec": {
            "nodeName": "a",
            "priorityClassName": "gpu-preemptible",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "media"},
        "spec": {
            "priorityClassName": "never-preempts",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        },
    },
]


def test_bad_input_exits_2_before_any_control_plane(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{}]}\n")
    assert main(["simulate", str(bad), "--against", "upstream"]) == 2
    assert "containers[0].name" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--example", "homelab", "--compare", "--against", "upstream"]) == 2
    assert "--against" in capsys.readouterr().err
    assert main(["simulate", "examples/cluster", "--against", "elsewhere"]) == 2


def test_no_binaries_exit_3_naming_make_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUSHIFT_UPSTREAM", str(tmp_path))
    code = main(["simulate", str(ROOT / "examples" / "cluster"), "--against", "upstream"])
    assert code == 3
    err = capsys.readouterr().err
    assert err.startswith("gpushift: error: the upstream control plane v1.37.2 is not built")
    assert "make upstream" in err and len(err.splitlines()) == 1


@pytest.mark.upstream
def test_agreement_exits_0_with_one_comparison_object(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["simulate", str(ROOT / "examples" / "cluster"), "--against", "upstream", "-o", "json"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc.get("differences")
    assert set(doc) == {"kind", "simulate", "upstream", "differences"}
    assert doc["kind"] == "SimulationComparison"
    assert doc["differences"] == []
    for side in ("simulate", "upstream"):
        assert (doc[side]["apiVersion"], doc[side]["kind"]) == ("v1", "List")
    # examples/cluster: two nodes of 4 units; llm (2) and three transcode pods (1) fit, too-big
    # (5) fits nowhere, on either side.
    up = doc["upstream"]["items"]
    pods = {p["metadata"]["name"]: p for p in up if p["kind"] == "Pod"}
    assert len(pods) == 5
    assert sum(1 for p in pods.values() if p["spec"].get("nodeName")) == 4
    (cond,) = [c for c in pods["too-big"]["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == (
        f"0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
        f"available: 2 {NOT_HELPFUL}."
    )
    assert {e["reason"] for e in up if e["kind"] == "Event"} >= {"Scheduled", "FailedScheduling"}


@pytest.mark.upstream
def test_a_difference_exits_1_and_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "never.yaml"
    path.write_text(yaml.safe_dump_all(NEVER_PREEMPTS))
    code = main(["simulate", str(path), "--against", "upstream", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    by_object = {(d["object"], d["field"]): d for d in doc["differences"]}
    assert by_object[("Pod default/media", "state")] == {
        "object": "Pod default/media",
        "field": "state",
        "simulate": ["Scheduled on a"],  # the only node
        "upstream": [
            "Pending (Insufficient nvidia.com/gpu, "
            "preemption: not eligible due to preemptionPolicy=Never)"
        ],
    }
    assert by_object[("Pod default/model", "state")]["simulate"] == ["Preempted"]
    assert by_object[("Pod default/model", "state")]["upstream"] == ["Scheduled"]
    assert set(by_object) == {
        ("Pod default/media", "state"),
        ("Pod default/model", "state"),
        ("Preemption victims", "priority"),
    }


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ("start", 3),  # a component did not come up
        ("settle", 5),  # the cluster was still moving at the deadline
    ],
)
def test_a_control_plane_that_fails_or_never_settles_maps_to_its_exit_code(
    error: str, code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpushift import crosscheck, upstream

    def fail(*args: object, **kw: object) -> None:
        if error == "start":
            raise upstream.StartError("kube-apiserver exited with status 1: bind: address in use")
        raise crosscheck.SettleTimeoutError("the cluster did not settle: default/p nominated to a")

    monkeypatch.setattr(crosscheck, "against_upstream", fail)
    assert main(["simulate", str(ROOT / "examples" / "cluster"), "--against", "upstream"]) == code
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gpushift: error: ")
