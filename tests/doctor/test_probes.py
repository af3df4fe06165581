"""Probes on hand-built snapshots: the registry, conflicting claim configs, bridged requests."""

from __future__ import annotations

from typing import Any

from tests.verdict.snapshots import (
    make_claim,
    make_node,
    make_pod,
    make_slice,
    make_snapshot,
)

from gpushift.doctor import PROBES, Context, diagnose, format_report

Obj = dict[str, Any]


def _ctx(snapshot: Obj, node: str | None = None) -> Context:
    return Context(snapshot, lambda ns, pod, c, prev: None, lambda kind: [], node)


def test_probe_ids_are_unique_and_documented() -> None:
    ids = [p.id for p in PROBES]
    assert len(ids) == len(set(ids)) == 5
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "verdict.md").read_text()
    for probe_id in ids:
        assert f"#### `{probe_id}`" in doc


def test_claims_sharing_a_card_with_different_configs() -> None:
    ts = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
    }
    snap = make_snapshot(
        nodes=[make_node("n1", alloc="0")],
        resourceSlices=[make_slice("n1")],
        resourceClaims=[make_claim("a", "pa"), make_claim("b", "pb", config=ts)],
    )
    report = diagnose(_ctx(snap))
    [p] = report.problems
    assert (p.probe, p.object) == ("claim-config-conflict", "ResourceClaim/media/b")
    assert p.summary == "claims media/a and media/b share gpu-0 on n1 with different GpuConfig"
    assert "same GpuConfig" in p.fix
    assert report.exit_code == 1
    same = make_snapshot(
        resourceClaims=[make_claim("a", "pa", config=ts), make_claim("b", "pb", config=ts)]
    )
    assert diagnose(_ctx(same)).problems == ()


def test_bridged_request_pending_gets_the_two_remedies() -> None:
    why = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    snap = make_snapshot(
        nodes=[make_node("n1", alloc="0")],
        resourceSlices=[make_slice("n1")],
        pods=[make_pod("llama-1-a", node=None, phase="Pending", pendingMessage=why)],
    )
    [p] = diagnose(_ctx(snap)).problems
    assert (p.probe, p.object) == ("bridged-insufficient", "Pod/media/llama-1-a")
    assert f"scheduler: {why}" in p.evidence
    assert "extendedResourceName: nvidia.com/gpu" in p.fix and "ResourceClaim" in p.fix
    assert "DRAExtendedResource" in p.fix
    text = format_report(diagnose(_ctx(snap)))
    assert text.splitlines()[0] == (
        "bridged-insufficient  Pod/media/llama-1-a: Pending on Insufficient nvidia.com/gpu"
    )
    assert text.rstrip().endswith("1 problem found")
    # Under --node the probe stays quiet: the pod is on no node.
    assert diagnose(_ctx(snap, node="n1")).problems == ()


def test_healthy_snapshot_has_nothing_wrong() -> None:
    snap = make_snapshot(nodes=[make_node("n1")])
    report = diagnose(_ctx(snap))
    assert report.exit_code == 0
    assert format_report(report) == "nothing wrong found (5 probes)\n"
