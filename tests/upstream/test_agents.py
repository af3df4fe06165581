"""`gpushift twin serve --control-plane upstream --example homelab`: the twin's kubelets, GPU
agents and Flux acting through a real kube-apiserver, whose controllers and scheduler do the
rest. Checked from outside with the official Kubernetes client and kubectl."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]
GPUSHIFT = [sys.executable, "-m", "gpushift"]

pytestmark = [pytest.mark.upstream, pytest.mark.slow(seconds=120)]


@pytest.fixture(scope="module")
def homelab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, float]]:
    """The served homelab's kubeconfig and the seconds from start until `twin wait-ready`
    returned; stopped with SIGTERM at the end, which must exit 0."""
    out = tmp_path_factory.mktemp("homelab") / "kubeconfig"
    began = time.monotonic()
    proc = subprocess.Popen(
        [
            *GPUSHIFT,
            "twin",
            "serve",
            "--control-plane",
            "upstream",
            "--example",
            "homelab",
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
        first = proc.stdout.readline()
        assert first.startswith("gpushift twin serving https://127.0.0.1:"), first
        assert "on the upstream control plane" in first
        assert proc.stdout.readline().strip() == f"export KUBECONFIG={out.resolve()}"
        ready = subprocess.run(
            [*GPUSHIFT, "twin", "wait-ready", "--kubeconfig", str(out), "--timeout", "240"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        assert ready.returncode == 0, ready.stderr[-2000:]
        yield out, time.monotonic() - began
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _core(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def _until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.5)


def test_nodes_are_ready_with_the_device_plugins_gpus(homelab: tuple[Path, float]) -> None:
    kubeconfig, took = homelab
    print(f"homelab settled on upstream in {took:.1f} s")
    core = _core(kubeconfig)
    nodes = core.list_node().items
    assert sorted(n.metadata.name for n in nodes) == ["k8s-1", "k8s-2", "k8s-3"]
    for node in nodes:
        ready = {c.type: c.status for c in node.status.conditions}["Ready"]
        assert ready == "True"
        # The GPU Operator's device plugin, time-sliced 5 ways on one L4.
        assert node.status.allocatable["nvidia.com/gpu"] == "5"
        assert node.status.node_info.kubelet_version == "v1.37.2"
        assert not [t for t in node.spec.taints or [] if t.key.startswith("node.kubernetes.io/")]
    leases = client.CoordinationV1Api(
        config.new_client_from_config(config_file=str(kubeconfig))
    ).list_namespaced_lease("kube-node-lease")
    assert sorted(x.spec.holder_identity for x in leases.items) == ["k8s-1", "k8s-2", "k8s-3"]


def test_the_real_scheduler_placed_running_consumers(homelab: tuple[Path, float]) -> None:
    kubeconfig, _ = homelab
    core = _core(kubeconfig)
    pods = core.list_pod_for_all_namespaces().items
    assert pods and all(p.status.phase == "Running" for p in pods), [
        (p.metadata.name, p.status.phase) for p in pods
    ]
    consumers = [p for p in pods if p.metadata.namespace == "media"]
    assert len(consumers) == 6
    scheduled = {
        e.involved_object.name
        for e in core.list_namespaced_event("media").items
        if e.reason == "Scheduled"
        and "default-scheduler" in (e.reporting_component, e.source.component if e.source else "")
    }
    assert {p.metadata.name for p in consumers} <= scheduled
    daemons = [p for p in pods if p.metadata.name.startswith("nvidia-device-plugin-daemonset-")]
    assert len(daemons) == 3 and all(
        ref.kind == "DaemonSet" for p in daemons for ref in p.metadata.owner_references
    )


def test_a_deleted_pod_goes_and_its_replicaset_replaces_it(homelab: tuple[Path, float]) -> None:
    kubeconfig, _ = homelab
    core = _core(kubeconfig)
    (pod,) = [
        p for p in core.list_namespaced_pod("media").items if p.metadata.name.startswith("plex-")
    ]
    deleted = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(kubeconfig),
            "delete",
            "pod",
            "-n",
            "media",
            pod.metadata.name,
            "--grace-period=2",
            "--wait=true",
            "--timeout=60s",
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert deleted.returncode == 0, deleted.stderr

    def replaced() -> bool:
        plex = [
            p
            for p in core.list_namespaced_pod("media").items
            if p.metadata.name.startswith("plex-")
        ]
        return (
            len(plex) == 1
            and plex[0].metadata.uid != pod.metadata.uid
            and plex[0].status.phase == "Running"
        )

    _until(replaced, 60)
