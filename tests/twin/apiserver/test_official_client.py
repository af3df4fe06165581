"""The official ``kubernetes`` Python client as a second real client, next to kubectl, of the
twin and of kube-apiserver (tests/twin/apiserver/conftest.py).

Its typed models refuse what kube-apiserver never sends (a JSON number where a Quantity string
belongs), so these tests check that the twin serves what the real server serves.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")

from kubernetes import client, config, watch  # noqa: E402
from tests.twin.apiserver.conftest import Server  # noqa: E402

from gpushift import kube  # noqa: E402
from gpushift.upstream import VERSION  # noqa: E402

POD = kube.ResourceRef.named("Pod")


@pytest.fixture(scope="module")
def api(server: Server) -> Any:
    return config.new_client_from_config(config_file=str(server.kubeconfig))


def _gpu_pod(name: str, namespace: str) -> dict[str, Any]:
    # Written as a JSON number, as Helm-rendered manifests often carry it.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "gpu"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {
                        "limits": {"nvidia.com/gpu": 1, "memory": 2147483648},
                        "requests": {"cpu": 0.5},
                    },
                }
            ]
        },
    }


def test_version(server: Server, api: Any) -> None:
    info = client.VersionApi(api).get_code()
    # The twin reports its --kubernetes-version (1.37.0 by default); kube-apiserver the
    # release `make upstream` built.
    release = "v1.37.0" if server.is_twin else VERSION
    assert (info.major, info.minor, info.git_version) == ("1", "37", release)


def test_typed_get_and_list_of_pods_with_quantities(
    server: Server, api: Any, namespace: str
) -> None:
    with kube.connect(kubeconfig=server.kubeconfig) as k:
        k.create(POD, _gpu_pod("typed", namespace), namespace=namespace)
    core = client.CoreV1Api(api)
    pod = core.read_namespaced_pod("typed", namespace)
    resources = pod.spec.containers[0].resources
    # Canonical strings, as resource.Quantity serialises: 2Gi written as bytes is "2Gi"
    # only with a binary suffix in the input; a plain number stays decimal.
    assert resources.limits == {"nvidia.com/gpu": "1", "memory": "2147483648"}
    requests = {"cpu": "500m"}
    if not server.is_twin:
        # kube-apiserver defaults a Pod's unset requests to its limits (pkg/apis/core/v1
        # SetDefaults_Pod); the twin stores objects as sent (docs/twin.md).
        requests |= {"nvidia.com/gpu": "1", "memory": "2147483648"}
    assert resources.requests == requests
    names = [p.metadata.name for p in core.list_namespaced_pod(namespace).items]
    assert "typed" in names
    assert core.list_pod_for_all_namespaces(label_selector="app=gpu").items


def test_watch_delivers_typed_pods(server: Server, api: Any, namespace: str) -> None:
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_pod(namespace).metadata.resource_version
    created = threading.Event()

    def make() -> None:
        with kube.connect(kubeconfig=server.kubeconfig) as k:
            k.create(POD, _gpu_pod("watched", namespace), namespace=namespace)
        created.set()

    threading.Thread(target=make).start()
    w = watch.Watch()
    seen = None
    for event in w.stream(
        core.list_namespaced_pod, namespace, resource_version=rv, timeout_seconds=10
    ):
        if event["object"].metadata.name == "watched":
            seen = event
            w.stop()
    assert created.wait(5)
    assert seen is not None and seen["type"] == "ADDED"
    assert seen["object"].spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"


def test_patch_and_scale_a_deployment(server: Server, api: Any, namespace: str) -> None:
    apps = client.AppsV1Api(api)
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                    ]
                },
            },
        },
    }
    # Created with a JSON number (the official client itself only sends strings).
    with kube.connect(kubeconfig=server.kubeconfig) as k:
        k.create(kube.ResourceRef.named("Deployment"), body, namespace=namespace)
    got = apps.read_namespaced_deployment("web", namespace)
    assert got.spec.template.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
    patched = apps.patch_namespaced_deployment(
        "web", namespace, {"metadata": {"labels": {"tier": "gpu"}}}
    )
    assert patched.metadata.labels == {"tier": "gpu"}
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 3}})
    scale = apps.read_namespaced_deployment_scale("web", namespace)
    assert scale.spec.replicas == 3
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 3


def test_device_classes_and_resource_claims(server: Server, api: Any, namespace: str) -> None:
    resource = client.ResourceV1Api(api)
    resource.create_device_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
        }
    )
    classes = [c.metadata.name for c in resource.list_device_class().items]
    assert "gpu.nvidia.com" in classes
    with kube.connect(kubeconfig=server.kubeconfig) as k:
        k.create(
            kube.ResourceRef.named("ResourceClaim"),
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "share", "namespace": namespace},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "capacity": {"requests": {"memory": 1073741824}},
                                },
                            }
                        ]
                    }
                },
            },
            namespace=namespace,
        )
    claim = resource.read_namespaced_resource_claim("share", namespace)
    assert claim.spec.devices.requests[0].exactly.capacity.requests == {"memory": "1073741824"}
    patched = resource.patch_namespaced_resource_claim(
        "share", namespace, {"metadata": {"labels": {"a": "b"}}}
    )
    assert patched.metadata.labels == {"a": "b"}
    assert [c.metadata.name for c in resource.list_resource_claim_for_all_namespaces().items] == [
        "share"
    ]


def test_leases(api: Any, namespace: str) -> None:
    coordination = client.CoordinationV1Api(api)
    coordination.create_namespaced_lease(
        namespace,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "leader", "namespace": namespace},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        },
    )
    lease = coordination.read_namespaced_lease("leader", namespace)
    lease.spec.holder_identity = "b"
    replaced = coordination.replace_namespaced_lease("leader", namespace, lease)
    assert replaced.spec.holder_identity == "b"
