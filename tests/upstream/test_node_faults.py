"""A scenario fault on the upstream twin: the node's device plugin crash-loops through the
twin's kubelet, and `gpushift doctor` reads it through kube-apiserver. Its own control plane,
so it is not up beside the homelab module's."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]
GPUSHIFT = [sys.executable, "-m", "gpushift"]

pytestmark = [pytest.mark.upstream, pytest.mark.slow(seconds=60)]


def _core(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def _until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.5)


def test_a_node_fault_crash_loops_the_plugin_and_doctor_names_it(tmp_path: Path) -> None:
    """Crash back-off, previous logs and the missing allocatable, as on the embedded twin,
    read by `gpushift doctor` through the real API server."""
    out = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            *GPUSHIFT,
            "twin",
            "serve",
            "--control-plane",
            "upstream",
            "--example",
            "homelab",
            "--node-fault",
            "k8s-1=plugin-crashloop",
            "--port",
            "0",
            "--kubeconfig-out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("gpushift twin serving https://")
        core = _core(out)

        def crash_looping() -> bool:
            for pod in core.list_namespaced_pod("gpu-operator").items:
                if pod.spec.node_name != "k8s-1" or "device-plugin" not in pod.metadata.name:
                    continue
                for s in pod.status.container_statuses or []:
                    waiting = s.state.waiting
                    if waiting is not None and waiting.reason == "CrashLoopBackOff":
                        return True
            return False

        _until(crash_looping, 120)
        nodes = {n.metadata.name: n for n in core.list_node().items}
        assert "nvidia.com/gpu" not in (nodes["k8s-1"].status.allocatable or {})
        doctor = subprocess.run(
            [*GPUSHIFT, "doctor", "--kubeconfig", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert "Node/k8s-1: the GPU plugin crash-loops" in doctor.stdout, doctor.stdout
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
