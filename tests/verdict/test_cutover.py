"""The cutover judged as a transition: drained by hand as docs/twin.md rehearses it, and
merged without draining while a pod still holds a device-plugin unit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from tests.verdict.conftest import MEDIA, NODES, Env, drained_cutover, homelab, merge_dra, wait_for

from gpushift import verdict
from gpushift.kube import ResourceRef

pytestmark = [pytest.mark.slow(seconds=13)]


def _snap(env: Env) -> dict:
    with env.client() as c:
        return verdict.take_snapshot(c, prometheus_url=env.twin.url)


def test_drained_cutover_is_the_expected_transition(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        before = _snap(env)
        drained_cutover(env)
        after = _snap(env)
    result = verdict.judge(after, against=before)
    assert result["transition"] == {
        "from": "device-plugin",
        "to": "dra",
        "expected": True,
        "unexpected": [],
    }
    assert result["verdict"] == "healthy", result["reasons"]
    assert verdict.exit_code(result) == 0
    # 5 replicas per card became 5 shares per card, every consumer on a claim.
    rows = verdict.share_map(after)
    assert [(r.node, r.ledger, len(r.slots)) for r in rows] == [
        ("k8s-1", "dra", 5),
        ("k8s-2", "dra", 5),
        ("k8s-3", "dra", 5),
    ]
    assert len([s for r in rows for s in r.slots if s]) == len(MEDIA) + 1


def test_undrained_cutover_is_broken_naming_the_card_and_both_holders(tmp_path: Path) -> None:
    # The operator waits long before deleting its device plugin, so both ledgers overlap.
    with homelab(tmp_path, operator_delay=3000.0) as env:
        before = _snap(env)
        # The job goes where a device-plugin unit is free: the scheduler may have put five of
        # the seven consumers on one node, whose kubelet would refuse a sixth.
        held = Counter(p["node"] for p in before["pods"] if p["phase"] == "Running")
        node = min(NODES, key=lambda n: (held[n], n))
        assert held[node] < 5, held
        job = {
            "metadata": {"name": "cuda-job", "namespace": "default"},
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "cuda",
                        "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                    }
                ],
            },
        }
        with env.client() as c:
            c.create(ResourceRef.named("Pod"), job, namespace="default")
        wait_for(
            lambda: any(
                p["metadata"]["name"] == "cuda-job" and p["status"].get("phase") == "Running"
                for p in env.pods("default")
            ),
            what="the job Running on the device plugin",
        )
        merge_dra(env)

        def dra_tenant_on_the_node() -> dict | None:
            snap = _snap(env)
            cards = verdict.ledgers(snap).cards[node]
            if any(h.ledger == "dra" for h in cards[0].holders):
                return snap
            return None

        after = wait_for(dra_tenant_on_the_node, timeout=90, what=f"a claim allocated on {node}")
    result = verdict.judge(after, against=before)
    assert result["verdict"] == "broken"
    assert verdict.exit_code(result) == 1
    both = [
        r
        for r in result["reasons"]
        if r["object"] == f"Node/{node}" and "held through both ledgers" in r["message"]
    ]
    assert len(both) == 1, result["reasons"]
    message = both[0]["message"]
    assert both[0]["severity"] == "error"
    assert "card gpu-0" in message
    # The job, and any media pod not rolled yet, hold the card through the device plugin.
    plugin_side, dra_side = message.split(" through the device plugin and ")
    assert "default/cuda-job (nvidia.com/gpu)" in plugin_side
    dra_holders = [
        h.pod for h in verdict.ledgers(after).cards[node][0].holders if h.ledger == "dra"
    ]
    assert dra_holders and all(h in dra_side for h in dra_holders)
    t = result["transition"]
    assert t["expected"] is False
    assert {
        "object": f"Node/{node}",
        "message": "allocator device-plugin -> both, not flipped",
    } in t["unexpected"]
