"""gpu-operator 26.7's GPUCluster on the twin: its DRA stack, the one-of-two-CRs rule with the
ClusterPolicy, and the finalizer its teardown ends with."""

from __future__ import annotations

from typing import Any

import pytest
from tests.twin.charts.test_on_twin import _ready, _release, twin  # noqa: F401
from tests.twin.flux.conftest import wait_for

from gpushift._kinds import by_kind
from gpushift_twin import Store
from gpushift_twin.charts import ChartError, render
from gpushift_twin.cluster import Cluster

_URL = "oci://ghcr.io/nvidia/gpu-operator"
_GPU_CLUSTER: dict[str, Any] = {
    "clusterPolicy": {"deployCR": False},
    "gpuCluster": {"deployCR": True},
    "driver": {"enabled": False},
    "toolkit": {"enabled": False},
    "draDriver": {
        "featureGates": {"ConsumableShares": True},
        "gpus": {"kubeletPlugin": {"env": [{"name": "CONSUMABLE_SHARES", "value": "5"}]}},
    },
}


def _daemonsets(store: Store) -> set[str]:
    return {d["metadata"]["name"] for d in store.list(by_kind("DaemonSet")).objects}


def _slices(store: Store) -> list[dict[str, Any]]:
    return [
        s
        for s in store.list(by_kind("ResourceSlice")).objects
        if s["spec"].get("driver") == "gpu.nvidia.com"
    ]


def test_the_chart_refuses_a_gpu_cluster_beside_a_cluster_policy() -> None:
    values = {**_GPU_CLUSTER, "clusterPolicy": {"deployCR": True}}
    with pytest.raises(ChartError, match="cannot both be true"):
        render(_URL, release="gpu-operator", namespace="apps", values=values)
    with pytest.raises(ChartError, match="nvidiaDriverCRD"):
        render(
            _URL,
            release="gpu-operator",
            namespace="apps",
            values={**_GPU_CLUSTER, "driver": {"enabled": True}},
        )


def test_gpu_cluster_runs_the_dra_stack_and_no_device_plugin(
    twin: tuple[Store, Cluster],  # noqa: F811
) -> None:
    store, _ = twin
    _release(store, "gpu-operator", _URL, _GPU_CLUSTER)
    slices = wait_for(lambda: len(_slices(store)) == 3 and _slices(store), what="three pools")
    for s in slices:
        for device in s["spec"]["devices"]:
            assert device["allowMultipleAllocations"] is True
            assert device["capacity"]["shares"]["value"] in (5, "5")
    names = _daemonsets(store)
    assert "nvidia-dra-driver-kubelet-plugin" in names
    assert "nvidia-dcgm-exporter-dra" in names
    assert not {"nvidia-device-plugin-daemonset", "gpu-feature-discovery"} & names
    assert store.list(by_kind("ClusterPolicy")).objects == []
    cls = store.get(by_kind("DeviceClass"), name="gpu.nvidia.com")
    assert "extendedResourceName" not in cls["spec"]
    exporter = store.get(by_kind("DaemonSet"), name="nvidia-dcgm-exporter-dra", namespace="apps")
    env = exporter["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "KUBERNETES_ENABLE_DRA", "value": "true"} in env
    binding = store.get(by_kind("ClusterRoleBinding"), name="nvidia-dcgm-exporter-dra-read-pods")
    assert binding["subjects"][0]["name"] == "nvidia-dcgm-exporter-dra"
    cluster = wait_for(
        lambda: (
            (c := store.get(by_kind("GPUCluster"), name="gpu-cluster"))
            and (c.get("status") or {}).get("state") == "ready"
            and c
        ),
        what="the GPUCluster ready",
    )
    assert cluster["metadata"]["finalizers"] == ["nvidia.com/gpu-cluster"]


def test_a_gpu_cluster_beside_a_cluster_policy_is_refused_in_its_status(
    twin: tuple[Store, Cluster],  # noqa: F811
) -> None:
    store, _ = twin
    _release(store, "gpu-operator", _URL, {})
    wait_for(lambda: "nvidia-device-plugin-daemonset" in _daemonsets(store), what="the plugin")
    store.create(
        by_kind("GPUCluster"),
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "GPUCluster",
            "metadata": {"name": "gpu-cluster"},
            "spec": {"draDriver": {}},
        },
    )

    def refused() -> dict[str, Any] | None:
        st = store.get(by_kind("GPUCluster"), name="gpu-cluster").get("status") or {}
        conds = [c for c in st.get("conditions") or [] if c.get("reason") == "ClusterPolicyExists"]
        return conds[0] if conds else None

    cond = wait_for(refused, what="the refusal in status")
    assert cond["status"] == "False"
    assert "cluster-policy" in cond["message"]
    assert "nvidia-dra-driver-kubelet-plugin" not in _daemonsets(store)
    assert _slices(store) == []
    # The ClusterPolicy it was refused beside runs on.
    assert "nvidia-device-plugin-daemonset" in _daemonsets(store)
    assert not store.get(by_kind("GPUCluster"), name="gpu-cluster")["metadata"].get("finalizers")


def test_deleting_the_gpu_cluster_waits_for_its_operands(
    twin: tuple[Store, Cluster],  # noqa: F811
) -> None:
    store, _ = twin
    _release(store, "gpu-operator", _URL, _GPU_CLUSTER)
    wait_for(lambda: len(_slices(store)) == 3, what="three pools")
    store.delete(by_kind("GPUCluster"), name="gpu-cluster")
    deleting = store.get(by_kind("GPUCluster"), name="gpu-cluster")
    assert deleting["metadata"].get("deletionTimestamp")

    def gone() -> bool:
        return store.list(by_kind("GPUCluster")).objects == []

    wait_for(gone, what="the finalizer removed")
    assert _slices(store) == []
    assert "nvidia-dra-driver-kubelet-plugin" not in _daemonsets(store)
    assert not [
        p
        for p in store.list(by_kind("Pod"), namespace="apps").objects
        if p["metadata"]["name"].startswith("nvidia-dra-driver-kubelet-plugin")
    ]


def test_a_release_with_both_crs_fails_its_install_with_the_charts_message(
    twin: tuple[Store, Cluster],  # noqa: F811
) -> None:
    store, _ = twin
    values = {**_GPU_CLUSTER, "clusterPolicy": {"deployCR": True}}
    _release(store, "gpu-operator", _URL, values)
    cond = wait_for(
        lambda: (c := _ready(store, "gpu-operator")).get("status") == "False" and c,
        what="the install to fail",
    )
    assert "cannot both be true" in cond["message"]
    assert store.list(by_kind("GPUCluster")).objects == []
