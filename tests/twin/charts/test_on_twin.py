"""HelmReleases installed by the twin's helm-controller through the chart models."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.twin.flux.conftest import ready_condition, wait_for

from gpushift._kinds import by_kind
from gpushift_twin import Store
from gpushift_twin.cluster import Cluster, example, run_cluster
from gpushift_twin.flux import Flux


@pytest.fixture
def twin() -> Iterator[tuple[Store, Cluster]]:
    with run_cluster(example("homelab"), time_scale=200.0) as (t, cluster):
        flux = Flux(t.store, clock=cluster.clock).start()
        t.store.create(by_kind("Namespace"), {"metadata": {"name": "apps"}})
        try:
            yield t.store, cluster
        finally:
            flux.stop()


def _release(store: Store, name: str, url: str, values: dict[str, Any], **spec: Any) -> None:
    store.create(
        by_kind("OCIRepository"),
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "OCIRepository",
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {"interval": "1h", "url": url, "ref": {"tag": "1.0.0"}},
        },
        namespace="apps",
    )
    store.create(
        by_kind("HelmRelease"),
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {
                "interval": "1h",
                "chartRef": {"kind": "OCIRepository", "name": name},
                "values": values,
                **spec,
            },
        },
        namespace="apps",
    )


def _ready(store: Store, name: str) -> dict[str, Any]:
    hr = store.get(by_kind("HelmRelease"), name=name, namespace="apps")
    return ready_condition(hr)


def test_unknown_chart_is_ready_without_workloads(twin: tuple[Store, Cluster]) -> None:
    store, _ = twin
    _release(store, "cert-manager", "oci://quay.io/jetstack/charts/cert-manager", {})
    cond = wait_for(
        lambda: (
            _ready(store, "cert-manager").get("status") == "True" and _ready(store, "cert-manager")
        )
    )
    assert cond["reason"] == "InstallSucceeded"
    assert "not modelled by the twin" in cond["message"]
    assert store.list(by_kind("Deployment"), namespace="apps").objects == []


def test_missing_consumable_shares_gate_crash_loops_the_plugin(twin: tuple[Store, Cluster]) -> None:
    store, _ = twin
    values = {
        "gpuResourcesEnabledOverride": True,
        "resources": {"computeDomains": {"enabled": False}},
        "consumableShares": 5,
    }
    _release(
        store,
        "dra",
        "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu",
        values,
        install={"disableWait": True},
        timeout="1m",
    )

    def crashing() -> list[dict[str, Any]]:
        out = []
        for p in store.list(by_kind("Pod"), namespace="apps").objects:
            for s in (p.get("status") or {}).get("containerStatuses") or []:
                if (
                    s["name"] == "gpus"
                    and (s.get("state") or {}).get("waiting", {}).get("reason")
                    == "CrashLoopBackOff"
                ):
                    out.append(p)
        return out

    assert len(wait_for(crashing, what="crash-looping kubelet plugins")) == 3
    assert store.list(by_kind("ResourceSlice")).objects == []
    # install.disableWait: the release does not wait for its pods.
    assert _ready(store, "dra")["reason"] == "InstallSucceeded"


def test_uninstall_removes_the_release_objects(twin: tuple[Store, Cluster]) -> None:
    store, _ = twin
    values = {
        "controllers": {
            "web": {"containers": {"app": {"image": {"repository": "nginx", "tag": "1"}}}}
        }
    }
    _release(store, "web", "oci://ghcr.io/bjw-s-labs/helm/app-template", values)
    wait_for(lambda: _ready(store, "web").get("status") == "True", what="the install")
    dep = store.get(by_kind("Deployment"), name="web", namespace="apps")
    assert dep["metadata"]["annotations"]["meta.helm.sh/release-name"] == "web"
    store.delete(by_kind("HelmRelease"), name="web", namespace="apps")

    def gone() -> bool:
        names = {
            d["metadata"]["name"]
            for d in store.list(by_kind("Deployment"), namespace="apps").objects
        }
        hrs = store.list(by_kind("HelmRelease"), namespace="apps").objects
        return "web" not in names and not hrs

    wait_for(gone, what="the uninstall")


def test_suspended_release_is_not_installed(twin: tuple[Store, Cluster]) -> None:
    store, cluster = twin
    values = {
        "controllers": {
            "web": {"containers": {"app": {"image": {"repository": "nginx", "tag": "1"}}}}
        }
    }
    _release(store, "idle", "oci://ghcr.io/bjw-s-labs/helm/app-template", values, suspend=True)
    start = cluster.clock.seconds()
    wait_for(lambda: cluster.clock.seconds() - start > 120, what="two virtual minutes")
    assert _ready(store, "idle") == {}
    assert store.list(by_kind("Deployment"), namespace="apps").objects == []


def test_operator_restores_a_deleted_operand(twin: tuple[Store, Cluster]) -> None:
    store, _ = twin
    _release(store, "gpu-operator", "oci://ghcr.io/nvidia/gpu-operator", {})
    ds_kind = by_kind("DaemonSet")

    def plugin() -> dict[str, Any] | None:
        for ds in store.list(ds_kind, namespace="apps").objects:
            if ds["metadata"]["name"] == "nvidia-device-plugin-daemonset":
                return ds
        return None

    first = wait_for(plugin, what="the operand")
    store.delete(ds_kind, name="nvidia-device-plugin-daemonset", namespace="apps")
    again = wait_for(
        lambda: (p := plugin()) is not None and p["metadata"]["uid"] != first["metadata"]["uid"],
        what="the operand to come back",
    )
    assert again
    policy = store.get(by_kind("ClusterPolicy"), name="cluster-policy")
    assert policy["status"]["namespace"] == "apps"


def test_chart_from_a_helm_repository_with_values_from(twin: tuple[Store, Cluster]) -> None:
    store, _ = twin
    store.create(
        by_kind("HelmRepository"),
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "HelmRepository",
            "metadata": {"name": "bjw-s", "namespace": "apps"},
            "spec": {"interval": "1h", "url": "https://bjw-s-labs.github.io/helm-charts"},
        },
        namespace="apps",
    )
    store.create(
        by_kind("ConfigMap"),
        {
            "metadata": {"name": "web-values", "namespace": "apps"},
            "data": {
                "values.yaml": "controllers:\n  web:\n    replicas: 2\n    containers:\n"
                "      app:\n        image: {repository: nginx, tag: '1'}\n",
                "tag": "2",
            },
        },
        namespace="apps",
    )
    store.create(
        by_kind("HelmRelease"),
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {
                "interval": "1h",
                "chart": {
                    "spec": {
                        "chart": "app-template",
                        "version": "4.1.1",
                        "sourceRef": {"kind": "HelmRepository", "name": "bjw-s"},
                    }
                },
                "valuesFrom": [
                    {"kind": "ConfigMap", "name": "web-values"},
                    {
                        "kind": "ConfigMap",
                        "name": "web-values",
                        "valuesKey": "tag",
                        "targetPath": "controllers.web.containers.app.image.tag",
                    },
                ],
                # spec.values merges last, over every valuesFrom.
                "values": {"controllers": {"web": {"replicas": 1}}},
            },
        },
        namespace="apps",
    )
    cond = wait_for(lambda: _ready(store, "web").get("status") == "True" and _ready(store, "web"))
    assert cond["message"] == (
        "Helm install succeeded for release apps/web.v1 with chart app-template@4.1.1"
    )
    dep = store.get(by_kind("Deployment"), name="web", namespace="apps")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    repo = store.get(by_kind("HelmRepository"), name="bjw-s", namespace="apps")
    assert ready_condition(repo)["status"] == "True"
    # A valuesFrom ConfigMap changed without a new generation of the release: it upgrades.
    store.update(
        by_kind("ConfigMap"),
        name="web-values",
        namespace="apps",
        mutate=lambda cm: {**cm, "data": {**cm["data"], "tag": "3"}},
    )
    upgraded = "Helm upgrade succeeded for release apps/web.v2 with chart app-template@4.1.1"
    wait_for(lambda: _ready(store, "web").get("message") == upgraded, what="the upgrade")
    dep = store.get(by_kind("Deployment"), name="web", namespace="apps")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:3"


TIME_SLICING = """\
version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""


def test_gpu_operator_creates_the_device_plugin_config_map_from_its_values(
    twin: tuple[Store, Cluster],
) -> None:
    store, _ = twin
    values = {
        "devicePlugin": {
            "config": {
                "create": True,
                "name": "time-slicing-config",
                "default": "any",
                "data": {"any": TIME_SLICING},
            }
        },
        "migManager": {
            "config": {
                "create": True,
                "name": "custom-mig-parted-config",
                "data": "all-disabled:\n  - devices: all\n    mig-enabled: false\n",
            }
        },
    }
    _release(store, "gpu-operator", "oci://ghcr.io/nvidia/gpu-operator", values)
    cm = wait_for(
        lambda: next(
            (
                c
                for c in store.list(by_kind("ConfigMap"), namespace="apps").objects
                if c["metadata"]["name"] == "time-slicing-config"
            ),
            None,
        ),
        what="the device-plugin ConfigMap",
    )
    assert cm["data"] == {"any": TIME_SLICING}
    mig = store.get(by_kind("ConfigMap"), name="custom-mig-parted-config", namespace="apps")
    assert mig["data"]["config.yaml"] == (
        "version: v1\nmig-configs:\n  all-disabled:\n    - devices: all\n      mig-enabled: false\n"
    )
    # The device plugin mounts it and advertises each L4 four times.
    wait_for(
        lambda: all(
            n["status"]["allocatable"].get("nvidia.com/gpu") == "4"
            for n in store.list(by_kind("Node")).objects
        ),
        timeout=60,
        what="four replicas per card",
    )


def test_gpu_operator_config_map_without_data_is_not_created(twin: tuple[Store, Cluster]) -> None:
    store, _ = twin
    values = {"devicePlugin": {"config": {"create": True, "name": "empty-config", "data": {}}}}
    _release(store, "gpu-operator", "oci://ghcr.io/nvidia/gpu-operator", values)
    wait_for(lambda: _ready(store, "gpu-operator").get("status") == "True", what="the install")
    names = {
        c["metadata"]["name"] for c in store.list(by_kind("ConfigMap"), namespace="apps").objects
    }
    assert "empty-config" not in names
