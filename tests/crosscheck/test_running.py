"""kube-scheduler v1.37.2 on what is running and what is gated: the inputs of
tests/cli/test_simulate_running.py through `gpushift simulate --against upstream`.

The two sides must agree, and kube-scheduler's own outcome is checked against the same
hand-derived expectations as simulate's there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_simulate_running import DRA_NODE, EVICTION, GATED, RUNNING

pytestmark = pytest.mark.upstream


def against_upstream(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    args = ["simulate", str(path), "--against", "upstream", "-o", "json"]
    out = subprocess.run(
        [sys.executable, "-m", "gpushift", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr  # 0: the two agree
    doc: dict[str, Any] = json.loads(out.stdout)
    assert doc["differences"] == []
    return doc


def upstream_items(doc: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {i["metadata"]["name"]: i for i in doc["upstream"]["items"] if i["kind"] == kind}


def scheduled(pod: dict[str, Any]) -> dict[str, Any]:
    (cond,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    return {k: cond.get(k) for k in ("status", "reason", "message")}


def test_a_running_dra_pod_keeps_its_device(tmp_path: Path) -> None:
    doc = against_upstream(tmp_path, DRA_NODE + RUNNING)
    pods = upstream_items(doc, "Pod")
    assert pods["old"]["spec"]["nodeName"] == "n1"
    assert "gpushift.dev/preempted" not in (pods["old"]["metadata"].get("annotations") or {})
    assert "nodeName" not in pods["new"]["spec"]
    assert scheduled(pods["new"]) == {
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
        "available: 1 cannot allocate all claims.",
    }
    claims = upstream_items(doc, "ResourceClaim")
    (result,) = claims["old-gpu"]["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-0"
    (made,) = [c for name, c in claims.items() if name.startswith("new-gpu-")]
    assert not (made.get("status") or {}).get("allocation")


def test_a_gated_pod_is_never_tried(tmp_path: Path) -> None:
    doc = against_upstream(tmp_path, DRA_NODE + GATED)
    pods = upstream_items(doc, "Pod")
    assert pods["free"]["spec"]["nodeName"] == "n1"
    assert "nodeName" not in pods["gated"]["spec"]
    assert scheduled(pods["gated"]) == {
        "status": "False",
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates",
    }
    claims = upstream_items(doc, "ResourceClaim")
    (made,) = [c for name, c in claims.items() if name.startswith("gated-gpu-")]
    assert not (made.get("status") or {}).get("allocation")
    # The Deployment's two pods were made with its gate, and wait too.
    held = [p for name, p in pods.items() if name.startswith("held-")]
    assert len(held) == 2
    assert all(scheduled(p)["reason"] == "SchedulingGated" for p in held)


def test_a_running_pod_is_evicted_not_moved(tmp_path: Path) -> None:
    doc = against_upstream(tmp_path, EVICTION)
    pods = upstream_items(doc, "Pod")
    assert pods["media"]["spec"]["nodeName"] == "a"
    assert pods["busy"]["spec"]["nodeName"] == "b"
    # The victim as last seen before kube-scheduler's deletion; nothing made it again.
    assert pods["model"]["metadata"]["annotations"]["gpushift.dev/preempted"] == "true"
    assert sorted(pods) == ["busy", "media", "model"]
