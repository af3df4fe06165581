"""`gpushift twin serve --example homelab` and `twin check-invariants`, as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

MANIFESTS = Path(__file__).resolve().parent / "manifests"
KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed"),
    pytest.mark.slow(seconds=18),
]


def _gpushift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *args], capture_output=True, text=True, timeout=60
    )


def test_serve_runs_the_cluster_and_check_invariants_reports_it(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpushift",
            "twin",
            "serve",
            "--example",
            "homelab",
            "--time-scale",
            "100",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kc),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stdout is not None
        first = serve.stdout.readline()
        assert first.startswith("gpushift twin serving https://127.0.0.1:"), first
        env = {**os.environ, "KUBECONFIG": str(kc)}

        def kubectl(*args: str, stdin: str | None = None) -> str:
            assert KUBECTL is not None
            done = subprocess.run(
                [KUBECTL, "--cache-dir", str(tmp_path / "cache"), *args],
                input=stdin,
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        nodes = json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
        assert [n["metadata"]["name"] for n in nodes] == ["k8s-1", "k8s-2", "k8s-3"]
        assert all(n["metadata"]["labels"]["nvidia.com/gpu.present"] == "true" for n in nodes)
        kubectl("apply", "-f", "-", stdin=(MANIFESTS / "device-plugin.yaml").read_text())
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            out = kubectl(
                "get", "nodes", "-o", "jsonpath={.items[*].status.allocatable.nvidia\\.com/gpu}"
            )
            if out == "5 5 5":
                break
            time.sleep(0.2)
        assert out == "5 5 5"
        assert _gpushift("twin", "check-invariants", "--kubeconfig", str(kc)).returncode == 0
        kubectl(
            "apply",
            "-f",
            "-",
            stdin=(MANIFESTS / "kubelet-plugin.yaml")
            .read_text()
            .format(shares="disabled", gate="false"),
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = _gpushift("twin", "check-invariants", "--kubeconfig", str(kc))
            if done.returncode == 1:
                break
            time.sleep(0.2)
        assert done.returncode == 1
        lines = sorted(done.stdout.splitlines())
        assert [line.split("\t")[:3] for line in lines] == [
            ["DualAdvertiser", n, "active"] for n in ("k8s-1", "k8s-2", "k8s-3")
        ]
    finally:
        serve.send_signal(signal.SIGTERM)
        code = serve.wait(timeout=20)
    assert code == 0


def test_check_invariants_exit_codes_for_bad_input_and_no_twin(tmp_path: Path) -> None:
    bad = tmp_path / "kc"
    bad.write_text("clusters: []\n")
    done = _gpushift("twin", "check-invariants", "--kubeconfig", str(bad))
    assert (done.returncode, done.stderr) == (
        2,
        f"gpushift: error: {bad}: no current context in the kubeconfig (give --context)\n",
    )
    gone = tmp_path / "gone"
    gone.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        "clusters: [{name: t, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: t, context: {cluster: t, user: t}}]\n"
        "users: [{name: t, user: {token: secret-token}}]\n"
    )
    done = _gpushift("twin", "check-invariants", "--kubeconfig", str(gone))
    assert done.returncode == 3
    assert done.stderr.splitlines()[-1].startswith("gpushift: error: cannot reach the cluster: ")
    assert "secret-token" not in done.stderr + done.stdout
