"""The official ``kubernetes`` Python client as a second real client of the twin, next to kubectl.

Its typed models refuse what kube-apiserver never sends (a JSON number where a Quantity string
belongs), so these tests check that the twin serves what the real server serves.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")

from kubernetes import client, config, watch  # noqa: E402

from gpushift import kube  # noqa: E402
from gpushift.twin import Twin, run_twin  # noqa: E402

POD = kube.ResourceRef.named("Pod")


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    with run_twin(tls=True) as running:
        yield running


@pytest.fixture(scope="module")
def api(twin: Twin) -> Any:
    return config.new_client_from_config(config_file=str(twin.kubeconfig))


def _gpu_pod(name: str) -> dict[str, Any]:
    # Written as a JSON number, as Helm-rendered manifests often carry it.
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "gpu"}},
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


def test_version(api: Any) -> None:
    info = client.VersionApi(api).get_code()
    assert (info.major, info.minor, info.git_version) == ("1", "37", "v1.37.0")


def test_typed_get_and_list_of_pods_with_quantities(twin: Twin, api: Any) -> None:
    with kube.connect(kubeconfig=twin.kubeconfig) as k:
        k.create(POD, _gpu_pod("typed"), namespace="default")
    core = client.CoreV1Api(api)
    pod = core.read_namespaced_pod("typed", "default")
    resources = pod.spec.containers[0].resources
    # Canonical strings, as resource.Quantity serialises: 2Gi written as bytes is "2Gi"
    # only with a binary suffix in the input; a plain number stays decimal.
    assert resources.limits == {"nvidia.com/gpu": "1", "memory": "2147483648"}
    assert resources.requests == {"cpu": "500m"}
    names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    assert "typed" in names
    assert core.list_pod_for_all_namespaces(label_selector="app=gpu").items


def test_watch_delivers_typed_pods(twin: Twin, api: Any) -> None:
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    created = threading.Event()

    def make() -> None:
        with kube.connect(kubeconfig=twin.kubeconfig) as k:
            k.create(POD, _gpu_pod("watched"), namespace="default")
        created.set()

    threading.Thread(target=make).start()
    w = watch.Watch()
    seen = None
    for event in w.stream(
        core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=10
    ):
        if event["object"].metadata.name == "watched":
            seen = event
            w.stop()
    assert created.wait(5)
    assert seen is not None and seen["type"] == "ADDED"
    assert seen["object"].spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"


def test_patch_and_scale_a_deployment(twin: Twin, api: Any) -> None:
    apps = client.AppsV1Api(api)
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
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
    with kube.connect(kubeconfig=twin.kubeconfig) as k:
        k.create(kube.ResourceRef.named("Deployment"), body, namespace="default")
    got = apps.read_namespaced_deployment("web", "default")
    assert got.spec.template.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
    patched = apps.patch_namespaced_deployment(
        "web", "default", {"metadata": {"labels": {"tier": "gpu"}}}
    )
    assert patched.metadata.labels == {"tier": "gpu"}
    apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 3}})
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert scale.spec.replicas == 3
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 3


def test_device_classes_and_resource_claims(twin: Twin, api: Any) -> None:
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
    with kube.connect(kubeconfig=twin.kubeconfig) as k:
        k.create(
            kube.ResourceRef.named("ResourceClaim"),
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "share", "namespace": "default"},
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
            namespace="default",
        )
    claim = resource.read_namespaced_resource_claim("share", "default")
    assert claim.spec.devices.requests[0].exactly.capacity.requests == {"memory": "1073741824"}
    patched = resource.patch_namespaced_resource_claim(
        "share", "default", {"metadata": {"labels": {"a": "b"}}}
    )
    assert patched.metadata.labels == {"a": "b"}
    assert [c.metadata.name for c in resource.list_resource_claim_for_all_namespaces().items] == [
        "share"
    ]


def test_leases(api: Any) -> None:
    coordination = client.CoordinationV1Api(api)
    coordination.create_namespaced_lease(
        "default",
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "leader", "namespace": "default"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
        },
    )
    lease = coordination.read_namespaced_lease("leader", "default")
    lease.spec.holder_identity = "b"
    replaced = coordination.replace_namespaced_lease("leader", "default", lease)
    assert replaced.spec.holder_identity == "b"
