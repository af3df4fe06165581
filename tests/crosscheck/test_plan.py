"""What the loader writes for an input, and the order it releases the pending pods in, worked
out by hand from simulate's queue (priority, creationTimestamp, input order). No server."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpushift.crosscheck import GATE, Slot, plan


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": "old-uid"},
        "status": {"allocatable": {"cpu": "4", "nvidia.com/gpu": "1"}},
    }


def pod(name: str, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    created = spec.pop("created", None)
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c"}], **spec},
    }


def deployment(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c"}], **spec},
            },
        },
    }


HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 10,
}


def test_queue_order_is_priority_then_creation_then_input() -> None:
    # The Deployment's pods follow the bare pods in input order (simulate expands workloads
    # after reading every pod); "late" has the higher class, "old" the older timestamp.
    the_plan = plan(
        [
            node("n"),
            HIGH,
            deployment("web", 2),
            pod("b", created="2026-01-02T00:00:00Z"),
            pod("a", created="2026-01-03T00:00:00Z"),
            pod("late", priorityClassName="high", created="2026-01-09T00:00:00Z"),
            pod("old", created="2026-01-01T00:00:00Z"),
            pod("bound", nodeName="n"),
        ]
    )
    web = ("Deployment", "apps", "web")
    assert the_plan.queue == [
        Slot((-10, "2026-01-09T00:00:00Z", 2), pod="default/late"),
        Slot((0, "", 5), workload=web),
        Slot((0, "", 6), workload=web),
        Slot((0, "2026-01-01T00:00:00Z", 3), pod="default/old"),
        Slot((0, "2026-01-02T00:00:00Z", 0), pod="default/b"),
        Slot((0, "2026-01-03T00:00:00Z", 1), pod="default/a"),
    ]


def test_pending_pods_and_templates_are_gated_bound_pods_are_not() -> None:
    the_plan = plan([node("n"), pod("p"), pod("q", nodeName="n"), deployment("web", 1)])
    gates = {p["metadata"]["name"]: p["spec"].get("schedulingGates") for p in the_plan.pods}
    assert gates == {"p": [{"name": GATE}], "q": None}
    (web,) = the_plan.workloads
    assert web["spec"]["template"]["spec"]["schedulingGates"] == [{"name": GATE}]
    # apps/v1 needs a selector: the template's labels.
    assert web["spec"]["selector"] == {"matchLabels": {"app": "web"}}


def test_what_kube_apiserver_would_refuse_is_made_acceptable() -> None:
    the_plan = plan(
        [
            node("n"),
            pod("p", priority=-7, runtimeClassName="nvidia"),
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "db"},
                "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            },
        ]
    )
    (p,) = the_plan.pods
    # The Priority admission plugin sets spec.priority from the class and refuses one given.
    assert "priority" not in p["spec"]
    assert p["spec"]["priorityClassName"] == "gpushift-priority-minus-7"
    assert [(c["metadata"]["name"], c["value"]) for c in the_plan.priority_classes] == [
        ("gpushift-priority-minus-7", -7)
    ]
    assert p["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
    assert [(r["metadata"]["name"], r["handler"]) for r in the_plan.runtime_classes] == [
        ("nvidia", "nvidia")
    ]
    (sts,) = the_plan.workloads
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    (n,) = the_plan.nodes
    assert "uid" not in n["metadata"]
    assert n["status"]["capacity"] == n["status"]["allocatable"]
    # kube-scheduler reads a missing pods figure as 0, simulate as no limit.
    assert n["status"]["allocatable"]["pods"] == "110"
    assert {c["type"]: c["status"] for c in n["status"]["conditions"]}["Ready"] == "True"
    assert [ns["metadata"]["name"] for ns in the_plan.namespaces] == ["default"]


def test_a_workload_whose_pods_are_in_the_input_is_not_written() -> None:
    # A dump: the ReplicaSet's pods are there, so simulate takes them as they are; written,
    # the ReplicaSet's controller would reconcile them to its template.
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "uid": "rs-1"},
        "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    child = pod("web-abc-0")
    child["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "web-abc", "uid": "rs-1", "controller": True}
    ]
    the_plan = plan([node("n"), rs, child])
    assert the_plan.workloads == []
    assert the_plan.queue == [Slot((0, "", 0), pod="default/web-abc-0")]


@given(
    st.lists(
        st.tuples(
            st.integers(-3, 3),
            st.sampled_from(["", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]),
        ),
        max_size=12,
    )
)
def test_the_queue_is_sorted_by_simulates_key(pods: list[tuple[int, str]]) -> None:
    objs: list[dict[str, Any]] = [node("n")]
    for i, (prio, created) in enumerate(pods):
        objs.append(pod(f"p{i}", priority=prio, created=created))
    the_plan = plan(objs)
    keys = [s.key for s in the_plan.queue]
    assert keys == sorted((-prio, created, i) for i, (prio, created) in enumerate(pods))
