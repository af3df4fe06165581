"""Passes that skip what did not change leave the store exactly as passes that visit everything.

Two twins with the same seed, inventory and frozen clock get the same random writes and clock
steps; one cluster's kubelets visit every node on every pass (``incremental = False``), the
other's only nodes whose inputs changed or whose timer is due. After every pass both stores
hold the same objects, byte for byte (uids, names, timestamps, Events), and the monitor's
record is the same.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushift._kinds import by_kind
from gpushift_twin import new_store
from gpushift_twin.apiserver import ApiError, Store
from gpushift_twin.cluster import Cluster, VirtualClock, uniform

START = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 2\n"
)
DEVICE_PLUGIN = {
    "metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"app": "nvidia-device-plugin"}},
        "template": {
            "metadata": {"labels": {"app": "nvidia-device-plugin"}},
            "spec": {
                "containers": [
                    {
                        "name": "nvidia-device-plugin-ctr",
                        "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
                        "env": [{"name": "CONFIG_FILE", "value": "/config/config.yaml"}],
                    }
                ],
                "volumes": [{"name": "config", "configMap": {"name": "time-slicing"}}],
            },
        },
    },
}


def _deployment(name: str, replicas: int, gpus: int) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "example/app:1", "resources": resources}
                    ]
                },
            },
        },
    }


# One step: ("deploy", name, replicas, gpus), ("scale", name, replicas), ("delete-pod", index),
# ("configmap", replicas), ("restart", node index) or ("advance", virtual seconds); each is
# followed by one pass.
STEPS = st.one_of(
    st.tuples(st.just("deploy"), st.sampled_from(["a", "b"]), st.integers(0, 4), st.integers(0, 2)),
    st.tuples(st.just("scale"), st.sampled_from(["a", "b"]), st.integers(0, 5)),
    st.tuples(st.just("delete-pod"), st.integers(0, 20)),
    st.tuples(st.just("configmap"), st.integers(1, 3)),
    st.tuples(st.just("restart"), st.integers(0, 2)),
    st.tuples(st.just("advance"), st.sampled_from([0.5, 1.0, 2.0, 5.0, 31.0, 400.0])),
)


def _apply(store: Store, cluster: Cluster, step: tuple[Any, ...]) -> None:
    deployment, pod, configmap = by_kind("Deployment"), by_kind("Pod"), by_kind("ConfigMap")
    try:
        if step[0] == "deploy":
            store.create(deployment, _deployment(step[1], step[2], step[3]))
        elif step[0] == "scale":

            def scale(cur: dict[str, Any]) -> dict[str, Any]:
                cur["spec"]["replicas"] = step[2]
                return cur

            store.update(deployment, name=step[1], namespace="default", mutate=scale)
        elif step[0] == "delete-pod":
            pods = store.list(pod, namespace="default").objects
            if pods:
                victim = pods[step[1] % len(pods)]["metadata"]["name"]
                store.delete(pod, name=victim, namespace="default")
        elif step[0] == "configmap":
            text = CONFIG.replace("replicas: 2", f"replicas: {step[1]}")

            def config(cur: dict[str, Any]) -> dict[str, Any]:
                cur["data"] = {"config.yaml": text}
                return cur

            store.update(configmap, name="time-slicing", namespace="kube-system", mutate=config)
        elif step[0] == "restart":
            cluster.restart_kubelet(f"gpu-{step[1]}")
        else:
            cluster.clock.advance(step[1])
    except ApiError:
        pass  # the same refusal on both twins


def _twin(*, incremental: bool) -> tuple[Store, Cluster]:
    store = new_store(seed=7)
    clock = VirtualClock(time_scale=0, start=START)
    cluster = Cluster(store, uniform(nodes=3, gpus=2), clock=clock)
    cluster.kubelet.incremental = incremental
    store.create(
        by_kind("ConfigMap"),
        {
            "metadata": {"name": "time-slicing", "namespace": "kube-system"},
            "data": {"config.yaml": CONFIG},
        },
    )
    store.create(by_kind("DaemonSet"), DEVICE_PLUGIN)
    return store, cluster


def _dump(store: Store) -> list[dict[str, Any]]:
    # The default namespaces are made by the store before the cluster's clock drives it, so
    # they carry the wall second each store was made in; the agents never write them.
    return [o for o in store.dump() if o["kind"] != "Namespace"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=1, max_size=14))
def test_skipping_unchanged_nodes_leaves_the_same_store_as_visiting_all(
    steps: list[tuple[Any, ...]],
) -> None:
    full_store, full = _twin(incremental=False)
    fast_store, fast = _twin(incremental=True)
    for step in [("advance", 2.0), *steps, ("advance", 2.0), ("advance", 31.0)]:
        for store, cluster in ((full_store, full), (fast_store, fast)):
            _apply(store, cluster, step)
            cluster.run_once()
        assert _dump(fast_store) == _dump(full_store), step
        assert fast.violations() == full.violations()
