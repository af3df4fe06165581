"""Hazards: both ledgers on one card are recorded; the ordered cutover records nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow(seconds=11)]

MANIFESTS = Path(__file__).resolve().parent / "manifests"
DEVICE_PLUGIN = (MANIFESTS / "device-plugin.yaml").read_text()
GPU_APP = (MANIFESTS / "gpu-app.yaml").read_text()
DEVICE_CLASS = (MANIFESTS / "device-class.yaml").read_text()
KUBELET_PLUGIN = (MANIFESTS / "kubelet-plugin.yaml").read_text().format(shares=5, gate="true")
CLAIM_APP = (MANIFESTS / "claim-app.yaml").read_text()


def _check(d: Any) -> tuple[int, str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushift",
            "twin",
            "check-invariants",
            "--kubeconfig",
            str(d.twin.kubeconfig),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout


def _allocatable(d: Any) -> list[str]:
    return [str(n["status"]["allocatable"].get("nvidia.com/gpu")) for n in d.get("nodes")["items"]]


def test_both_agents_with_tenants_on_both_ledgers_are_recorded(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.wait_for("registration", lambda: _allocatable(d) == ["5", "5", "5"])
    d.apply(GPU_APP.format(name="gpu-app", replicas=3))
    d.apply(DEVICE_CLASS)
    d.apply(KUBELET_PLUGIN)
    d.wait_for("slices", lambda: len(d.get("resourceslices")["items"]) == 3)
    d.apply(CLAIM_APP.replace("replicas: 6", "replicas: 3"))
    d.wait_for(
        "six Running consumers",
        lambda: (
            sorted(p["status"].get("phase", "") for p in d.get("pods", "-n", "default")["items"])
            == ["Running"] * 6
        ),
    )
    record = d.wait_for(
        "six violations",
        lambda: r if len((r := d.http("/twin/v1/violations"))["items"]) == 6 else None,
    )
    found = sorted((v["reason"], v["node"], v["card"]) for v in record["items"])
    assert found == [
        ("DoubleAllocation", "gpu-0", 0),
        ("DoubleAllocation", "gpu-1", 0),
        ("DoubleAllocation", "gpu-2", 0),
        ("DualAdvertiser", "gpu-0", None),
        ("DualAdvertiser", "gpu-1", None),
        ("DualAdvertiser", "gpu-2", None),
    ]
    dual = next(
        v for v in record["items"] if v["reason"] == "DualAdvertiser" and v["node"] == "gpu-0"
    )
    assert dual["message"] == (
        "node gpu-0 advertises nvidia.com/gpu: 5 through the device plugin and publishes its "
        "GPUs through the DRA driver gpu.nvidia.com; both ledgers can hand out the same card"
    )
    assert record["active"] == 6
    events = d.get("events", "-n", "default", "--field-selector", "type=Warning")["items"]
    assert sorted(
        (e["reason"], e["involvedObject"]["kind"], e["involvedObject"]["name"])
        for e in events
        if e["reason"] in ("DualAdvertiser", "DoubleAllocation")
    ) == [(r, "Node", n) for r, n, _ in found]
    code, out = _check(d)
    assert code == 1
    assert out.count("DualAdvertiser\t") == 3 and out.count("DoubleAllocation\t") == 3


def test_draining_the_consumers_first_records_nothing(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.wait_for("registration", lambda: _allocatable(d) == ["5", "5", "5"])
    d.apply(GPU_APP.format(name="gpu-app", replicas=3))
    d.wait_for(
        "consumers running",
        lambda: (
            [p["status"].get("phase") for p in d.get("pods", "-n", "default")["items"]]
            == ["Running"] * 3
        ),
    )
    # The cutover in order: consumers off, plugin off, then the DRA driver and new consumers.
    d.kubectl("scale", "deployment", "-n", "default", "gpu-app", "--replicas=0")
    d.wait_for("consumers gone", lambda: not d.get("pods", "-n", "default")["items"])
    d.kubectl("delete", "daemonset", "-n", "nvidia-device-plugin", "nvidia-device-plugin")
    d.wait_for("allocatable 0", lambda: _allocatable(d) == ["0", "0", "0"])
    d.apply(DEVICE_CLASS)
    d.apply(KUBELET_PLUGIN)
    d.wait_for("slices", lambda: len(d.get("resourceslices")["items"]) == 3)
    d.apply(CLAIM_APP)
    d.wait_for(
        "DRA consumers running",
        lambda: (
            [p["status"].get("phase") for p in d.get("pods", "-n", "default")["items"]]
            == ["Running"] * 6
        ),
    )
    assert d.http("/twin/v1/violations") == {"kind": "ViolationList", "items": [], "active": 0}
    assert _check(d) == (0, "no invariant violations recorded\n")
