"""kube-scheduler v1.37.2 on `simulate --compare`'s preemption probe: the homelab running
(`simulate --example homelab -o yaml --all`), then nine default-priority transcodes, one more
than its eight free slots. Under the device plugin kube-scheduler preempts the model
(PriorityClass gpu-preemptible, -100); under DRA it does not preempt for a device, and one
transcode stays Pending. The two sides must agree.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.upstream

TEMPLATE = """\
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: any-nvidia-gpu, namespace: media}
spec:
  spec:
    devices:
      requests:
      - name: nvidia-gpu
        exactly: {deviceClassName: gpu.nvidia.com}
"""


def burst(dra: bool) -> str:
    gpu = (
        "        resources: {claims: [{name: nvidia-gpu}]}\n"
        "      resourceClaims: [{name: nvidia-gpu, resourceClaimTemplateName: any-nvidia-gpu}]\n"
        if dra
        else "        resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    return (
        "---\napiVersion: apps/v1\nkind: Deployment\n"
        "metadata: {name: transcode-burst, namespace: media}\n"
        "spec:\n  replicas: 9\n  selector: {matchLabels: {app: burst}}\n  template:\n"
        "    metadata: {labels: {app: burst}}\n    spec:\n"
        "      containers:\n      - name: app\n        image: example\n" + gpu
    ) + (TEMPLATE if dra else "")


def gpushift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *args], capture_output=True, text=True, check=False
    )


def probe(tmp_path: Path, allocator: str) -> dict[str, dict[str, Any]]:
    running = gpushift(
        "simulate", "--example", "homelab", "--allocator", allocator, "--sharing", "5",
        "-o", "yaml", "--all",
    )  # fmt: skip
    assert running.returncode == 0, running.stderr
    (tmp_path / "running.yaml").write_text(running.stdout)
    (tmp_path / "burst.yaml").write_text(burst(allocator == "dra"))
    out = gpushift("simulate", str(tmp_path), "--against", "upstream", "-o", "json")
    assert out.returncode == 0, out.stdout + out.stderr  # 0: the two agree
    doc = json.loads(out.stdout)
    assert doc["differences"] == []
    return {i["metadata"]["name"]: i for i in doc["upstream"]["items"] if i["kind"] == "Pod"}


def test_the_device_plugin_preempts_the_model(tmp_path: Path) -> None:
    pods = probe(tmp_path, "device-plugin")
    (model,) = [p for n, p in pods.items() if n.startswith("llama-nvidia-")]
    assert (model["metadata"].get("annotations") or {}).get("gpushift.dev/preempted") == "true"
    transcodes = [p for n, p in pods.items() if n.startswith("transcode-burst-")]
    assert len(transcodes) == 9


def test_dra_leaves_a_transcode_pending_beside_the_model(tmp_path: Path) -> None:
    pods = probe(tmp_path, "dra")
    (model,) = [p for n, p in pods.items() if n.startswith("llama-nvidia-")]
    assert "gpushift.dev/preempted" not in (model["metadata"].get("annotations") or {})
    assert model["spec"]["nodeName"] == "k8s-1"
    waiting = [
        p
        for n, p in pods.items()
        if n.startswith("transcode-burst-") and "nodeName" not in p["spec"]
    ]
    assert len(waiting) == 1
