"""A scenario fault on the upstream twin: the node's device plugin crash-loops through the
twin's kubelet, and `gpushift doctor` reads it through kube-apiserver. Its own control plane,
so it is not up beside the homelab module's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.upstream.conftest import GPUSHIFT, ROOT, core, served, until

pytestmark = [pytest.mark.upstream, pytest.mark.slow(seconds=60)]


def test_a_node_fault_crash_loops_the_plugin_and_doctor_names_it(tmp_path: Path) -> None:
    """Crash back-off, previous logs and the missing allocatable, as on the embedded twin,
    read by `gpushift doctor` through the real API server."""
    out = tmp_path / "kubeconfig"
    with served(out, "--example", "homelab", "--node-fault", "k8s-1=plugin-crashloop"):
        api = core(out)

        def crash_looping() -> bool:
            for pod in api.list_namespaced_pod("gpu-operator").items:
                if pod.spec.node_name != "k8s-1" or "device-plugin" not in pod.metadata.name:
                    continue
                for s in pod.status.container_statuses or []:
                    waiting = s.state.waiting
                    if waiting is not None and waiting.reason == "CrashLoopBackOff":
                        return True
            return False

        until(crash_looping, 120)
        nodes = {n.metadata.name: n for n in api.list_node().items}
        assert "nvidia.com/gpu" not in (nodes["k8s-1"].status.allocatable or {})
        doctor = subprocess.run(
            [*GPUSHIFT, "doctor", "--kubeconfig", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert "Node/k8s-1: the GPU plugin crash-loops" in doctor.stdout, doctor.stdout
