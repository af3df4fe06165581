"""Workloads expand into pods named like their controllers name them."""

from __future__ import annotations

import re
from typing import Any

from gpushift.engine import from_objects

ALNUM = "[bcdfghjklmnpqrstvwxz2456789]"


def workload(kind: str, name: str, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c"}], **spec},
            },
        },
    }


def names(objs: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in from_objects(objs).pods]


def test_statefulset_ordinals() -> None:
    assert names([workload("StatefulSet", "db", 3)]) == ["db-0", "db-1", "db-2"]


def test_deployment_pods_go_through_a_replicaset() -> None:
    inputs = from_objects([workload("Deployment", "web")])
    p = inputs.pods[0]
    h = p["metadata"]["labels"]["pod-template-hash"]
    assert re.fullmatch(f"web-{re.escape(h)}-{ALNUM}{{5}}", p["metadata"]["name"])
    owner = p["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ReplicaSet", f"web-{h}", True)
    assert len({q["metadata"]["name"] for q in inputs.pods}) == 2


def test_replicaset_names() -> None:
    assert all(re.fullmatch(f"rs-{ALNUM}{{5}}", n) for n in names([workload("ReplicaSet", "rs")]))


def test_daemonset_only_on_nodes_it_fits() -> None:
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu", "labels": {"gpu": "y"}}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu", "labels": {}}},
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "tainted", "labels": {"gpu": "y"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        },
    ]
    ds = workload("DaemonSet", "plugin", nodeSelector={"gpu": "y"})
    inputs = from_objects([*nodes, ds])
    (p,) = inputs.pods
    term = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["gpu"]
