"""The upstream control plane as clients meet it: kubectl and the official Python client with
the kubeconfig it writes, gpushift's CRDs served, loopback only, nothing left at stop."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpushift import upstream

pytestmark = pytest.mark.upstream

#: The kinds gpushift reads whose CRDs the control plane must serve (the issue's list).
REQUIRED_CRDS = {
    "kustomizations.kustomize.toolkit.fluxcd.io",
    "helmreleases.helm.toolkit.fluxcd.io",
    "gitrepositories.source.toolkit.fluxcd.io",
    "ocirepositories.source.toolkit.fluxcd.io",
    "inferenceservices.inference.llmkube.dev",
}


def _kubectl(plane: upstream.ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    assert plane.kubeconfig is not None
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _listening_ports(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket ``pid`` listens on, from ss(8)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        if f"pid={pid}," not in line:
            continue
        local = line.split()[3]
        host, _, port = local.rpartition(":")
        found.add((host.strip("[]"), int(port)))
    return found


def test_kubectl_sees_the_real_server_and_its_crds(upstream_plane: upstream.ControlPlane) -> None:
    version = _kubectl(upstream_plane, "version", "-o", "json")
    assert json.loads(version.stdout)["serverVersion"]["gitVersion"] == "v1.37.2"
    crds = _kubectl(upstream_plane, "get", "crd", "-o", "name")
    assert crds.returncode == 0, crds.stderr
    names = {line.split("/", 1)[1] for line in crds.stdout.split()}
    assert names >= REQUIRED_CRDS


def test_the_official_client_reads_and_writes_custom_resources(
    upstream_plane: upstream.ControlPlane,
) -> None:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(upstream_plane.kubeconfig))
    namespaces = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
    assert {"default", "kube-system", "kube-node-lease"} <= namespaces
    custom = client.CustomObjectsApi(api)
    group, version, plural = "kustomize.toolkit.fluxcd.io", "v1", "kustomizations"
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "default"},
        "spec": {"interval": "10m", "path": "./apps", "prune": True},
    }
    made = custom.create_namespaced_custom_object(group, version, "default", plural, body)
    assert made["spec"]["path"] == "./apps"
    # The status subresource: a status write through /status is kept, a spec change in the
    # same body is not (apiextensions-apiserver's status strategy).
    made["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    made["spec"]["path"] = "./other"
    custom.replace_namespaced_custom_object_status(group, version, "default", plural, "apps", made)
    now = custom.get_namespaced_custom_object(group, version, "default", plural, "apps")
    assert now["status"]["conditions"][0]["status"] == "True"
    assert now["spec"]["path"] == "./apps"


def test_every_component_listens_on_loopback_only(upstream_plane: upstream.ControlPlane) -> None:
    for comp in upstream_plane.components:
        assert comp.proc is not None
        ports = _listening_ports(comp.proc.pid)
        assert ports, f"{comp.name} listens on nothing"
        assert {host for host, _ in ports} == {"127.0.0.1"}, (comp.name, ports)


def test_stop_ends_every_process_and_removes_the_data_directory() -> None:
    plane = upstream.ControlPlane(controller_manager=False, scheduler=False, crds=False)
    plane.start()
    directory = plane.directory
    pids = [c.proc.pid for c in plane.components if c.proc is not None]
    assert directory is not None and directory.is_dir() and len(pids) == 2
    plane.stop()
    assert not directory.exists()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_failed_start_says_which_component_and_leaves_nothing(tmp_path: Path) -> None:
    # An etcd that exits at once: the start fails naming it, with its last log line.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = upstream.ControlPlane.binaries()
    for name in upstream.BINARIES:
        os.symlink(real / name, bin_dir / name)
    (bin_dir / "etcd").unlink()
    (bin_dir / "etcd").write_text("#!/bin/sh\necho 'etcd: cannot open data dir' >&2\nexit 3\n")
    (bin_dir / "etcd").chmod(0o755)
    plane = upstream.ControlPlane(bin_dir=bin_dir, timeout=30)
    with pytest.raises(upstream.StartError, match="etcd exited with status 3: etcd: cannot open"):
        plane.start()
    assert plane.directory is None and not plane.components


def test_a_port_in_use_is_named() -> None:
    # A fixed --port someone else holds: kube-apiserver cannot bind it, and the error says so.
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        plane = upstream.ControlPlane(
            port=port, controller_manager=False, scheduler=False, crds=False, timeout=60
        )
        with pytest.raises(
            upstream.StartError,
            match=r"kube-apiserver exited with status \d+ \(address already in use\)",
        ):
            plane.start()
    assert plane.directory is None and not plane.components
