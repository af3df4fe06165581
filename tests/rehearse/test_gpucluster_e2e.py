"""The move between gpu-operator's ClusterPolicy (time-slicing 5 ways) and its GPUCluster,
both ways on the twin, through the CLI as a person runs it: render a non-Talos homelab tree,
`migrate --to gpucluster --write` a copy, `rehearse --repo --target -o json`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow(seconds=120)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/homelab.gpushift.yaml"
STEPS = [
    "preflight",
    "snapshot",
    "suspend",
    "drained",
    "merge",
    "old-allocator-gone",
    "new-allocator-up",
    "resume",
    "resume-bridged",
    "verdict",
]


SHARED_CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: shared-gpu
  namespace: media
spec:
  devices:
    requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
"""


def _gpushift(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def _config(tmp_path: Path) -> Path:
    # The homelab without Talos (the GPUCluster assumes the driver at /), the driver on the
    # hosts, and a gpu-operator chart that has the GPUCluster (26.7.0).
    text = EXAMPLE.read_text()
    assert "  talos: true" in text
    text = text.replace("  talos: true", "  talos: false\n  preinstalledDriver: true  #")
    text += "charts:\n  gpuOperator:\n    version: v26.7.0\n"
    path = tmp_path / "gpushift.yaml"
    path.write_text(text)
    return path


def test_cluster_policy_to_gpu_cluster_and_back_with_zero_violations(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    done = _gpushift("render", str(_config(tmp_path)), "--out", str(before))
    assert done.returncode == 0, done.stderr
    assert not list(before.rglob("*talos*"))
    shutil.copytree(before, after)
    done = _gpushift("migrate", str(after), "--to", "gpucluster", "--write")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    values = (after / "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml").read_text()
    assert "gpuCluster:\n      deployCR: true" in values
    # A user ResourceClaim beside the templates: the way back deletes it before the merge.
    claims = after / "kubernetes/apps/media/gpu-claim-templates/app"
    (claims / "shared-claim.yaml").write_text(SHARED_CLAIM)
    with (claims / "kustomization.yaml").open("a") as f:
        f.write("  - ./shared-claim.yaml\n")

    done = _gpushift(
        "rehearse", "--repo", str(before), "--target", str(after), "-o", "json", timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["violations"] == []
    assert [(r["to"], r["result"]) for r in report["runs"]] == [
        ("dra", "done"),
        ("device-plugin", "done"),
    ]
    for run in report["runs"]:
        assert [s["name"] for s in run["steps"]] == STEPS
        assert run["verdict"]["verdict"] == "healthy"
    # The watches sampled the cluster throughout (the monitor judged those states).
    assert report["samples"] > 0
