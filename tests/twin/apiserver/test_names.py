"""Object names per kind, as kube-apiserver validates them: applied with kubectl to the twin
and to kube-apiserver (tests/twin/apiserver/conftest.py), and the twin's rules one by one."""

from __future__ import annotations

import subprocess

import pytest
from tests.twin.apiserver.conftest import KUBECTL, Server

from gpushift_twin.apiserver import name_errors


def _apply(server: Server, body: str) -> subprocess.CompletedProcess[str]:
    return server.kubectl("apply", "-f", "-", stdin=body, check=False)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_rbac_names_are_path_segments(server: Server) -> None:
    done = _apply(
        server,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n"
        "metadata: {name: 'system:kube-vip-role'}\nrules: []\n",
    )
    assert done.returncode == 0, done.stderr
    assert "clusterrole.rbac.authorization.k8s.io/system:kube-vip-role created" in done.stdout


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_a_configmap_name_with_a_colon_is_refused_with_the_subdomain_message(
    server: Server,
) -> None:
    done = _apply(
        server,
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
