"""Pod admission, on the twin as on kube-apiserver (tests/twin/apiserver/conftest.py): a
pod's ``spec.priority`` and ``spec.preemptionPolicy`` come from its PriorityClass, and a pod
with scheduling gates is created SchedulingGated."""

from __future__ import annotations

from typing import Any

from tests.twin.apiserver.conftest import Server


def _class(server: Server, name: str, value: int, **extra: Any) -> str:
    name = server.unique(name)
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }
    server.ok("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    return name


def _pod(server: Server, namespace: str, name: str, **spec: Any) -> tuple[int, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "example"}], **spec},
    }
    status, _, answer = server.call("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    return status, answer


def test_no_class_is_priority_zero(server: Server, namespace: str) -> None:
    status, pod = _pod(server, namespace, "plain")
    assert status == 201, pod
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert "priorityClassName" not in pod["spec"]


def test_the_class_gives_value_and_policy(server: Server, namespace: str) -> None:
    low = _class(server, "gpu-preemptible", -100)
    polite = _class(server, "polite", 1000, preemptionPolicy="Never")
    _, pod = _pod(server, namespace, "model", priorityClassName=low)
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (
        -100,
        "PreemptLowerPriority",
    )
    _, pod = _pod(server, namespace, "batch", priorityClassName=polite)
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (1000, "Never")


def test_the_built_in_classes(server: Server, namespace: str) -> None:
    _, pod = _pod(server, namespace, "agent", priorityClassName="system-node-critical")
    assert pod["spec"]["priority"] == 2000001000


def test_an_unknown_class_is_forbidden(server: Server, namespace: str) -> None:
    status, answer = _pod(server, namespace, "lost", priorityClassName="nowhere")
    assert (status, answer["reason"], answer["message"]) == (
        403,
        "Forbidden",
        'pods "lost" is forbidden: no PriorityClass with name nowhere was found',
    )


def test_a_priority_other_than_the_class_value_is_forbidden(server: Server, namespace: str) -> None:
    low = _class(server, "low", -5)
    status, answer = _pod(server, namespace, "cheat", priorityClassName=low, priority=7)
    assert (status, answer["message"]) == (
        403,
        'pods "cheat" is forbidden: the integer value of priority (7) must not be provided in '
        "pod spec; priority admission controller computed -5 from the given PriorityClass name",
    )


def test_a_gated_pod_is_scheduling_gated_from_its_creation(server: Server, namespace: str) -> None:
    status, pod = _pod(server, namespace, "gated", schedulingGates=[{"name": "example.com/wait"}])
    assert status == 201, pod
    (cond,) = pod["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodScheduled",
        "False",
        "SchedulingGated",
        "Scheduling is blocked due to non-empty scheduling gates",
    )
