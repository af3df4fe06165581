"""Admin access to devices is refused outside a labelled namespace: by the twin as by
kube-apiserver (tests/twin/apiserver/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.twin.apiserver.conftest import Server

from gpushift import kube

NS = kube.ResourceRef.named("Namespace")
CLAIM = kube.ResourceRef.named("ResourceClaim")


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[kube.Kube]:
    with kube.connect(kubeconfig=server.kubeconfig) as k:
        yield k


def _claim(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "monitor", "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "all",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "allocationMode": "All",
                            "adminAccess": True,
                        },
                    }
                ]
            }
        },
    }


def test_admin_access_needs_the_namespace_label(client: kube.Kube) -> None:
    client.create(NS, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plain"}})
    with pytest.raises(kube.KubeError) as err:
        client.create(CLAIM, _claim("plain"), namespace="plain")
    assert (err.value.code, err.value.message) == (
        422,
        'ResourceClaim.resource.k8s.io "monitor" is invalid: spec.devices.requests[0].adminAccess: '
        "Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: "
        "true` label on the containing namespace",
    )
    client.create(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "gpu-monitoring",
                "labels": {"resource.kubernetes.io/admin-access": "true"},
            },
        },
    )
    made = client.create(CLAIM, _claim("gpu-monitoring"), namespace="gpu-monitoring")
    assert made["metadata"]["name"] == "monitor"
