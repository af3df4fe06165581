"""Preemption on the twin: the victim really goes before the preemptor binds.

Expectations from kube-scheduler's DefaultPreemption: the victim gets a `Preempted` event
("Preempted by pod <uid> on node <node>") and is deleted with its grace period; the preemptor
carries `status.nominatedNodeName` and binds once the room is free, so the node is never
overcommitted.
"""

from __future__ import annotations

from typing import Any

LOW = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: v1
kind: Pod
metadata: {name: low, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 1500m}}}]
"""

HIGH = """\
apiVersion: v1
kind: Pod
metadata: {name: high, namespace: default}
spec:
  priorityClassName: high
  containers: [{name: c, image: x, resources: {requests: {cpu: 1500m}}}]
"""


def _phases(d: Any) -> dict[str, tuple[str | None, bool]]:
    return {
        p["metadata"]["name"]: (
            p["spec"].get("nodeName"),
            bool(p["metadata"].get("deletionTimestamp")),
        )
        for p in d.get("pods", "-n", "default")["items"]
    }


def test_preemption_deletes_the_victim_before_the_preemptor_binds(one_cpu_bound_node: Any) -> None:
    d = one_cpu_bound_node
    d.apply(LOW)
    d.wait_for(
        "low Running",
        lambda: d.get("pod", "low", "-n", "default")["status"].get("phase") == "Running",
    )
    d.apply(HIGH)

    # Never both bound and alive on a node with room for one of them.
    def settled() -> bool:
        pods = _phases(d)
        alive_bound = [n for n, (node, deleting) in pods.items() if node and not deleting]
        assert len(alive_bound) <= 1, pods
        return "low" not in pods and pods.get("high", (None, False))[0] == "n1"

    d.wait_for("high bound after low is gone", settled, timeout=30)
    high = d.get("pod", "high", "-n", "default")
    assert high["status"]["nominatedNodeName"] == "n1"
    events = d.get("events", "-n", "default")["items"]
    preempted = [e for e in events if e["reason"] == "Preempted"]
    assert [e["involvedObject"]["name"] for e in preempted] == ["low"]
    assert preempted[0]["message"] == (f"Preempted by pod {high['metadata']['uid']} on node n1")


GATED = """\
apiVersion: v1
kind: Pod
metadata: {name: gated, namespace: default}
spec:
  schedulingGates: [{name: example.com/quota}]
  containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
"""


def test_a_gated_pod_stays_scheduling_gated_until_its_gates_go(one_cpu_bound_node: Any) -> None:
    # kube-scheduler's SchedulingGates PreEnqueue plugin: a gated pod is never tried, so it
    # keeps the SchedulingGated condition kube-apiserver gave it; without gates it binds.
    d = one_cpu_bound_node
    d.apply(GATED)
    d.apply(LOW.split("---\n")[1].replace("name: low", "name: other"))
    d.wait_for("the other pod bound", lambda: d.get("pod", "other")["spec"].get("nodeName"))
    pod = d.get("pod", "gated")
    cond = {c["type"]: c for c in pod["status"]["conditions"]}["PodScheduled"]
    assert (pod["spec"].get("nodeName"), cond["reason"]) == (None, "SchedulingGated")
    d.kubectl(
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/spec/schedulingGates"}]',
    )
    assert (
        d.wait_for("the gated pod bound", lambda: d.get("pod", "gated")["spec"].get("nodeName"))
        == "n1"
    )
