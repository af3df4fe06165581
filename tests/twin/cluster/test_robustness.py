"""One bad object does not stop the agents (the store can hold what kube-apiserver rejects)."""

from __future__ import annotations

from gpushift._kinds import by_kind
from gpushift_twin import new_store
from gpushift_twin.cluster import Cluster, example


def test_an_unparsable_quantity_leaves_the_other_pods_scheduled() -> None:
    store = new_store()
    cluster = Cluster(store, example("homelab"), time_scale=1e6)
    pod = by_kind("Pod")
    store.create(
        pod,
        {
            "metadata": {"name": "bad", "namespace": "default"},
            "spec": {
                "containers": [
                    {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "abc"}}}
                ]
            },
        },
    )
    store.create(
        pod,
        {
            "metadata": {"name": "good", "namespace": "default"},
            "spec": {"containers": [{"name": "a", "image": "x"}]},
        },
    )
    for _ in range(3):
        cluster.run_once()
    good = store.get(pod, name="good", namespace="default")
    bad = store.get(pod, name="bad", namespace="default")
    assert good["status"]["phase"] == "Running"
    assert "nodeName" not in bad["spec"]
    events = [
        (e["involvedObject"]["name"], e["type"], e["reason"], e["message"])
        for e in store.objects(by_kind("Event"))
        if e["involvedObject"]["name"] == "bad"
    ]
    assert events == [
        (
            "bad",
            "Warning",
            "FailedScheduling",
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': 'abc'",
        )
    ]
