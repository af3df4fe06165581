"""`gpushift twin serve --control-plane upstream --example homelab`: the twin's kubelets, GPU
agents and Flux acting through a real kube-apiserver, whose controllers and scheduler do the
rest. Checked from outside with the official Kubernetes client and kubectl."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from tests.upstream.conftest import GPUSHIFT, ROOT, api_client, served, until
from tests.upstream.conftest import core as _core

pytestmark = [pytest.mark.upstream, pytest.mark.slow(seconds=300)]


@pytest.fixture(scope="module")
def homelab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, float]]:
    """The served homelab's kubeconfig and the seconds from start until `twin wait-ready`
    returned; stopped with SIGTERM at the end, which must exit 0."""
    out = tmp_path_factory.mktemp("homelab") / "kubeconfig"
    began = time.monotonic()
    with served(out, "--example", "homelab"):
        ready = subprocess.run(
            [*GPUSHIFT, "twin", "wait-ready", "--kubeconfig", str(out), "--timeout", "240"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        assert ready.returncode == 0, ready.stderr[-2000:]
        yield out, time.monotonic() - began


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
    leases = client.CoordinationV1Api(api_client(kubeconfig)).list_namespaced_lease(
        "kube-node-lease"
    )
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

    until(replaced, 60)


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_kubectl_logs_come_from_the_twins_kubelets(homelab: tuple[Path, float]) -> None:
    kubeconfig, _ = homelab
    core = _core(kubeconfig)
    (pod, *_) = [
        p
        for p in core.list_namespaced_pod("gpu-operator").items
        if p.metadata.name.startswith("nvidia-device-plugin-daemonset-")
    ]
    got = _kubectl(kubeconfig, "logs", "-n", "gpu-operator", pod.metadata.name, "--all-containers")
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip()


def test_the_invariant_monitor_reads_the_real_server(homelab: tuple[Path, float]) -> None:
    kubeconfig, _ = homelab
    got = subprocess.run(
        [*GPUSHIFT, "twin", "check-invariants", "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert got.returncode == 0, got.stdout + got.stderr
    assert "no invariant violations recorded" in got.stdout


_CLAIM = """
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-path}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  storageClassName: local-path
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: user, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers: [{name: c, image: busybox}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data}}
  - {name: settings, configMap: {name: settings}}
"""


def test_a_claim_is_provisioned_and_a_missing_configmap_blocks_the_mount(
    homelab: tuple[Path, float],
) -> None:
    kubeconfig, _ = homelab
    core = _core(kubeconfig)
    applied = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f", "-"],
        input=_CLAIM,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert applied.returncode == 0, applied.stderr

    def failed_mount() -> bool:
        return any(
            e.reason == "FailedMount" and 'configmap "settings" not found' in (e.message or "")
            for e in core.list_namespaced_event("default").items
        )

    until(failed_mount, 60)
    claim = core.read_namespaced_persistent_volume_claim("data", "default")
    assert claim.status.phase == "Bound"  # kube-controller-manager bound the twin's volume
    assert core.read_namespaced_pod("user", "default").status.phase == "Pending"
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "settings"}, "data": {"a": "b"}}
    )
    until(lambda: core.read_namespaced_pod("user", "default").status.phase == "Running", 60)
    core.delete_namespaced_pod("user", "default")
    core.delete_namespaced_persistent_volume_claim("data", "default")
    until(lambda: not core.list_persistent_volume().items, 60)


def test_the_cutover_to_dra_finishes(homelab: tuple[Path, float], tmp_path: Path) -> None:
    """The cutover drains, merges (git-set), and the real scheduler allocates the claims
    from the ResourceSlices the twin's DRA plugin publishes."""
    kubeconfig, _ = homelab
    target = tmp_path / "dra"
    rendered = subprocess.run(
        [
            *GPUSHIFT,
            "render",
            "--example",
            "homelab",
            "--allocator",
            "dra",
            "--sharing",
            "5",
            "--out",
            str(target),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert rendered.returncode == 0, rendered.stderr
    merge = f"{sys.executable} -m gpushift twin git-set {target} --kubeconfig {kubeconfig}"
    began = time.monotonic()
    cut = subprocess.run(
        [
            *GPUSHIFT,
            "cutover",
            "--to",
            "dra",
            "--yes",
            "--kubeconfig",
            str(kubeconfig),
            "--merge",
            merge,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert cut.returncode == 0, (cut.stdout + cut.stderr)[-3000:]
    print(f"cutover to dra on upstream in {time.monotonic() - began:.1f} s")
    claims = _kubectl(kubeconfig, "get", "resourceclaims", "-A", "-o", "json")
    assert claims.returncode == 0, claims.stderr
    items = json.loads(claims.stdout)["items"]
    media = [c for c in items if c["metadata"]["namespace"] == "media"]
    assert len(media) == 6
    assert all((c.get("status") or {}).get("allocation") for c in items)
    core = _core(kubeconfig)
    for node in core.list_node().items:
        assert node.status.allocatable.get("nvidia.com/gpu", "0") == "0"
    pods = core.list_pod_for_all_namespaces().items
    assert all(p.status.phase == "Running" for p in pods)
    check = subprocess.run(
        [*GPUSHIFT, "twin", "check-invariants", "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert check.returncode == 0, check.stdout + check.stderr
