"""One Kubernetes version everywhere: the API server's /version and every kubelet's."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from gpushift import UsageError
from gpushift_twin import DEFAULT_KUBERNETES_VERSION, parse_kubernetes_version, run_twin
from gpushift_twin.cluster import Cluster, example


def test_the_default_is_the_release_the_move_targets() -> None:
    assert DEFAULT_KUBERNETES_VERSION == "1.37.0"


@pytest.mark.parametrize(
    ("text", "want"), [("1.37", "1.37.0"), ("v1.36.2", "1.36.2"), ("1.34.0", "1.34.0")]
)
def test_versions_are_read_as_releases(text: str, want: str) -> None:
    assert parse_kubernetes_version(text) == want


@pytest.mark.parametrize("text", ["1.33", "2.0", "latest", "1.37.0.1"])
def test_versions_without_resource_k8s_io_v1_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="--kubernetes-version"):
        parse_kubernetes_version(text)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_api_server_and_kubelets_report_one_version() -> None:
    with run_twin(tls=True) as twin:
        cluster = Cluster(twin.store, example("homelab"), time_scale=1.0)
        cluster.start()
        try:
            out = subprocess.run(
                ["kubectl", "--kubeconfig", str(twin.kubeconfig), "version", "-o", "json"],
                capture_output=True,
                text=True,
                check=True,
            )
            server = json.loads(out.stdout)["serverVersion"]["gitVersion"]
            nodes = subprocess.run(
                ["kubectl", "--kubeconfig", str(twin.kubeconfig), "get", "nodes", "-o", "json"],
                capture_output=True,
                text=True,
                check=True,
            )
            kubelets = {
                n["status"]["nodeInfo"]["kubeletVersion"] for n in json.loads(nodes.stdout)["items"]
            }
        finally:
            cluster.stop()
    assert server == "v1.37.0"
    assert kubelets == {"v1.37.0"}
