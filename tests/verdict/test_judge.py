"""The checks and the transition judgement on hand-built snapshots (no cluster)."""

from __future__ import annotations

import copy
from typing import Any

from tests.verdict.snapshots import (
    make_claim,
    make_node,
    make_pod,
    make_slice,
    make_snapshot,
)

from gpushift import verdict

Obj = dict[str, Any]


def _flux(name: str, *, ready: str = "True", suspended: bool = False) -> Obj:
    return {
        "kind": "Kustomization",
        "namespace": "media",
        "name": name,
        "ready": ready,
        "reason": "ReconciliationSucceeded" if ready == "True" else "HealthCheckFailed",
        "message": "Applied revision: main@sha1:1" if ready == "True" else "timeout",
        "revision": "main@sha1:1",
        "suspended": suspended,
    }


def test_card_advertised_by_both_ledgers_is_broken() -> None:
    snap = make_snapshot(nodes=[make_node("n1")], resourceSlices=[make_slice("n1")])
    result = verdict.judge(snap)
    assert result["verdict"] == "broken"
    assert result["reasons"] == [
        {
            "severity": "error",
            "object": "Node/n1",
            "message": "card gpu-0 is advertised by the device plugin (nvidia.com/gpu: 5 "
            "allocatable on the node) and published by DRA in ResourceSlice "
            "00000-gpu.nvidia.com-n1-abcde",
        }
    ]


def test_card_held_through_both_ledgers_names_both_holders() -> None:
    snap = make_snapshot(
        nodes=[make_node("n1")],
        resourceSlices=[make_slice("n1")],
        pods=[make_pod("plex-1-a"), make_pod("jelly-1-b", requests={}, claims=["jelly-gpu"])],
        resourceClaims=[make_claim("jelly-gpu", "jelly-1-b")],
    )
    [reason] = [r for r in verdict.reasons(snap) if r.check == "both-ledgers"]
    assert reason.message == (
        "card gpu-0 is held through both ledgers: media/plex-1-a (nvidia.com/gpu) through the "
        "device plugin and media/jelly-1-b (claim media/jelly-gpu) through DRA"
    )


def test_gpu_node_with_nothing_advertised() -> None:
    snap = make_snapshot(nodes=[make_node("n1", alloc=None)])
    [r] = verdict.judge(snap)["reasons"]
    assert (r["severity"], r["object"]) == ("error", "Node/n1")
    assert "allocatable nvidia.com/gpu absent and no gpu.nvidia.com ResourceSlice" in r["message"]


def test_pending_pod_and_its_claim_carry_the_scheduler_message() -> None:
    why = "0/1 nodes are available: 1 cannot allocate all claims."
    snap = make_snapshot(
        nodes=[make_node("n1", alloc="0")],
        resourceSlices=[make_slice("n1")],
        pods=[
            make_pod(
                "plex-1-a",
                node=None,
                phase="Pending",
                requests={},
                claims=["c1"],
                pendingReason="Unschedulable",
                pendingMessage=why,
            )
        ],
        resourceClaims=[
            {**make_claim("c1", "x"), "allocated": False, "devices": [], "reservedFor": []}
        ],
    )
    result = verdict.judge(snap)
    assert result["verdict"] == "degraded"
    assert {
        (r["object"], r["message"]) for r in result["reasons"] if r["severity"] == "warning"
    } == {
        ("Pod/media/plex-1-a", f"Pending: {why}"),
        ("ResourceClaim/media/c1", f"not allocated; its pod media/plex-1-a is Pending: {why}"),
    }


def test_bridged_request_not_served() -> None:
    why = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    pending = make_pod("llama-1-a", node=None, phase="Pending", pendingMessage=why)
    snap = make_snapshot(
        nodes=[make_node("n1", alloc="0")], resourceSlices=[make_slice("n1")], pods=[pending]
    )
    bridged = [r for r in verdict.reasons(snap) if r.check == "bridged-unserved"]
    assert [r.message for r in bridged] == [
        "nvidia.com/gpu is requested, no node advertises it and no DeviceClass has "
        f"extendedResourceName nvidia.com/gpu: {why}"
    ]
    classes = [{"name": "gpu.nvidia.com", "extendedResourceName": "nvidia.com/gpu"}]
    bridged = [
        r
        for r in verdict.reasons({**snap, "deviceClasses": classes})
        if r.check == "bridged-unserved"
    ]
    assert bridged[0].message.startswith("nvidia.com/gpu is bridged by DeviceClass gpu.nvidia.com")


def test_flux_suspended_degrades_and_not_ready_breaks() -> None:
    snap = make_snapshot(nodes=[make_node("n1")], flux=[_flux("plex", suspended=True)])
    assert verdict.judge(snap)["verdict"] == "degraded"
    snap = make_snapshot(nodes=[make_node("n1")], flux=[_flux("plex", ready="False")])
    result = verdict.judge(snap)
    assert result["verdict"] == "broken"
    assert result["reasons"][0]["object"] == "Kustomization/media/plex"


def test_not_ready_before_the_transition_is_not_what_it_broke() -> None:
    # immich was not Ready before the move and still is not; plex broke during it.
    before = make_snapshot(
        nodes=[make_node("n1")], flux=[_flux("immich", ready="False"), _flux("plex")]
    )
    after = make_snapshot(
        nodes=[make_node("n1")], flux=[_flux("immich", ready="False"), _flux("plex")]
    )
    result = verdict.judge(after, against=before)
    assert result["verdict"] == "healthy"
    (reason,) = result["reasons"]
    assert reason["severity"] == "info"
    assert reason["object"] == "Kustomization/media/immich"
    assert reason["message"].startswith("already not Ready before (HealthCheckFailed); ")
    broken = make_snapshot(
        nodes=[make_node("n1")],
        flux=[_flux("immich", ready="False"), _flux("plex", ready="False")],
    )
    result = verdict.judge(broken, against=before)
    assert result["verdict"] == "broken"
    assert [(r["severity"], r["object"]) for r in result["reasons"]] == [
        ("error", "Kustomization/media/plex"),
        ("info", "Kustomization/media/immich"),
    ]
    # Without a snapshot to judge against, it is an error as before.
    assert verdict.judge(after)["verdict"] == "broken"


def test_informational_reasons_leave_it_healthy() -> None:
    snap = make_snapshot(
        nodes=[
            make_node(
                "n1",
                alloc="0",
                labels={
                    "nvidia.com/gpu.sharing-strategy": "time-slicing",
                    "nvidia.com/gpu.replicas": "5",
                },
            )
        ],
        resourceSlices=[make_slice("n1")],
        deviceClasses=[{"name": "mig.nvidia.com", "extendedResourceName": None}],
    )
    result = verdict.judge(snap)
    assert result["verdict"] == "healthy"
    assert [r["severity"] for r in result["reasons"]] == ["info", "info"]
    assert verdict.exit_code(result) == 0


def _before_after() -> tuple[Obj, Obj]:
    before = make_snapshot(nodes=[make_node("n1")], pods=[make_pod("plex-1-a")])
    after = make_snapshot(
        nodes=[make_node("n1", alloc="0")],
        resourceSlices=[make_slice("n1")],
        pods=[make_pod("plex-2-b", requests={}, claims=["c1"])],
        resourceClaims=[make_claim("c1", "plex-2-b")],
    )
    return before, after


def test_transition_flipped_with_the_same_slots_and_consumers_is_expected() -> None:
    before, after = _before_after()
    assert verdict.transition(before, after) == {
        "from": "device-plugin",
        "to": "dra",
        "expected": True,
        "unexpected": [],
    }
    # Back again (a rollback) is a flip too.
    assert verdict.transition(after, before)["expected"] is True


def test_transition_lists_everything_else_as_unexpected() -> None:
    before, after = _before_after()
    changed = copy.deepcopy(after)
    changed["resourceSlices"] = [make_slice("n1", shares="3")]
    changed["pods"] = []
    changed["resourceClaims"] = []
    t = verdict.transition(before, changed)
    assert t["expected"] is False
    assert t["unexpected"] == [
        {"object": "Node/n1", "message": "card gpu-0: 5 replicas became 3 shares"},
        {"object": "Deployment/media/plex", "message": "ran before and does not run now"},
    ]
    same = verdict.transition(before, before)
    assert same["unexpected"] == [
        {"object": "Node/n1", "message": "allocator device-plugin -> device-plugin, not flipped"}
    ]
    result = verdict.judge(before, against=before)
    assert result["verdict"] == "healthy" and verdict.exit_code(result) == 1


def test_every_verdict_check_is_documented() -> None:
    from pathlib import Path

    from gpushift.verdict import CHECKS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "verdict.md").read_text()
    for check in CHECKS:
        assert f"#### `{check.id}` ({check.severity.value})" in doc


def _ranked_pods() -> list[Obj]:
    # The seed's shape: the model at PriorityClass gpu-preemptible (-100), a transcode at 0.
    return [
        make_pod("model-5d9f-x1", priority=-100, priorityClassName="gpu-preemptible"),
        make_pod("plex-7c4b-y2", bridged=True),
    ]


def test_dra_preemption_lost_is_mentioned_on_dra_and_changes_nothing() -> None:
    snap = make_snapshot(
        nodes=[make_node("n1", alloc="0")],
        resourceSlices=[make_slice("n1")],
        pods=_ranked_pods(),
    )
    result = verdict.judge(snap)
    assert result["verdict"] == "healthy"
    (reason,) = [r for r in result["reasons"] if "preempt" in r["message"]]
    assert reason["severity"] == "info"
    assert reason["object"] == "Deployment/media/model"
    assert "Deployment/media/plex (no PriorityClass, priority 0)" in reason["message"]


def test_dra_preemption_lost_not_on_the_device_plugin_nor_with_never() -> None:
    on_plugin = make_snapshot(nodes=[make_node("n1")], pods=_ranked_pods())
    assert not [r for r in verdict.judge(on_plugin)["reasons"] if "preempt" in r["message"]]
    polite = _ranked_pods()
    polite[1]["preemptionPolicy"] = "Never"
    on_dra = make_snapshot(
        nodes=[make_node("n1", alloc="0")], resourceSlices=[make_slice("n1")], pods=polite
    )
    assert not [r for r in verdict.judge(on_dra)["reasons"] if "preempt" in r["message"]]
