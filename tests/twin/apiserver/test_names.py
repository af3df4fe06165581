"""Object names per kind, as kube-apiserver validates them, applied with kubectl."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushift.twin import Twin, run_twin
from gpushift.twin.apiserver import name_errors

KUBECTL = shutil.which("kubectl")


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    with run_twin(tls=True) as running:
        yield running


def _apply(twin: Twin, tmp: Path, body: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--cache-dir", str(tmp / "cache"), "apply", "-f", "-"],
        input=body,
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(twin.kubeconfig)},
        timeout=60,
    )


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_rbac_names_are_path_segments(twin: Twin, tmp_path: Path) -> None:
    done = _apply(
        twin,
        tmp_path,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata: {name: 'system:kube-vip-role'}\nrules: []\n",
    )
    assert done.returncode == 0, done.stderr
    assert "clusterrole.rbac.authorization.k8s.io/system:kube-vip-role created" in done.stdout


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_a_configmap_name_with_a_colon_is_refused_with_the_subdomain_message(
    twin: Twin, tmp_path: Path
) -> None:
    done = _apply(
        twin,
        tmp_path,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'a:b', namespace: default}\n",
    )
    assert done.returncode != 0
    assert (
        'ConfigMap "a:b" is invalid: metadata.name: Invalid value: "a:b": '
        "a lowercase RFC 1123 subdomain" in done.stderr
    )


@pytest.mark.parametrize(
    ("group", "kind", "name", "ok"),
    [
        ("rbac.authorization.k8s.io", "Role", "system:controller:x", True),
        ("rbac.authorization.k8s.io", "RoleBinding", "a/b", False),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", "..", False),
        ("rbac.authorization.k8s.io", "ClusterRole", "Has%Percent", False),
        ("rbac.authorization.k8s.io", "ClusterRole", "UPPER_case ok", True),
        ("", "Namespace", "a.b", False),  # a label: no dots
        ("", "Namespace", "x" * 63, True),
        ("", "Namespace", "x" * 64, False),
        ("", "Service", "1abc", False),  # DNS-1035: starts with a letter
        ("", "Service", "abc-1", True),
        ("", "ConfigMap", "a.b-c", True),
        ("", "ConfigMap", "x" * 254, False),
        ("apps", "Deployment", "Plex", False),
        ("ceph.rook.io", "CephCluster", "rook-ceph", True),
    ],
)
def test_name_rules(group: str, kind: str, name: str, ok: bool) -> None:
    assert (name_errors(group, kind, name) == []) is ok


def test_path_segment_errors_read_as_upstream() -> None:
    assert name_errors("rbac.authorization.k8s.io", "Role", "a/b%c") == [
        "may not contain '/'",
        "may not contain '%'",
    ]
    assert name_errors("rbac.authorization.k8s.io", "Role", ".") == ["may not be '.'"]
