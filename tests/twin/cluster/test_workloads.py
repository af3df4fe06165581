"""Workload controllers through kubectl: rollouts (the Recreate gap), StatefulSet, DaemonSet."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest

pytestmark = [pytest.mark.slow(seconds=30)]

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: default}}
spec:
  replicas: 2
  strategy: {{type: {strategy}}}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - {{name: app, image: "ghcr.io/example/web:{version}"}}
"""


@contextmanager
def watch_pods(d: Any, selector: str) -> Iterator[list[tuple[str, str, str]]]:
    """Record (event type, pod name, image) of every pod event of a kubectl watch, as they
    arrive. kubectl lists first (the existing pods, as ADDED) and then watches from the
    list's resourceVersion, so once the listed pods are in, no later change is missed."""
    proc = subprocess.Popen(
        [
            "kubectl",
            "--cache-dir",
            str(d.cache),
            "get",
            "pods",
            "-n",
            "default",
            "-l",
            selector,
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "KUBECONFIG": str(d.twin.kubeconfig)},
    )
    seen: list[tuple[str, str, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        text = ""
        for line in proc.stdout:
            text += line
            try:  # one compact event per line; a line that does not parse yet is continued
                event = json.loads(text)
            except ValueError:
                continue
            text = ""
            pod = event["object"]
            seen.append(
                (event["type"], pod["metadata"]["name"], pod["spec"]["containers"][0]["image"])
            )

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield seen
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=10)


def _rollout(d: Any, strategy: str) -> list[tuple[str, str, str]]:
    d.apply(DEPLOYMENT.format(strategy=strategy, version=1))
    d.wait_for("v1 running", lambda: _images(d) == ["ghcr.io/example/web:1"] * 2)
    with watch_pods(d, "app=web") as seen:
        d.wait_for("the watch to list the v1 pods", lambda: len(seen) >= 2)
        d.apply(DEPLOYMENT.format(strategy=strategy, version=2))
        d.wait_for("v2 running", lambda: _images(d) == ["ghcr.io/example/web:2"] * 2)
        d.wait_for(
            "the watch to see both v1 pods deleted",
            lambda: sum(1 for k, _, image in seen if k == "DELETED" and image.endswith(":1")) == 2,
        )
    return seen


def _images(d: Any) -> list[str]:
    pods = d.get("pods", "-n", "default", "-l", "app=web")["items"]
    return (
        sorted(
            p["spec"]["containers"][0]["image"]
            for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        )
        if len(pods) == 2
        else []
    )


def test_recreate_leaves_a_gap_between_the_old_pods_and_the_new(three_nodes: Any) -> None:
    seen = _rollout(three_nodes, "Recreate")
    old_gone = max(
        i for i, (kind, _, image) in enumerate(seen) if kind == "DELETED" and image.endswith(":1")
    )
    new_added = min(
        i for i, (kind, _, image) in enumerate(seen) if kind == "ADDED" and image.endswith(":2")
    )
    # Both old pods are gone before the first new pod exists.
    assert old_gone < new_added
    assert sum(1 for kind, _, image in seen if kind == "DELETED" and image.endswith(":1")) == 2


def test_rolling_update_surges_before_the_old_pods_go(three_nodes: Any) -> None:
    seen = _rollout(three_nodes, "RollingUpdate")
    first_deleted = min(
        i for i, (kind, _, image) in enumerate(seen) if kind == "DELETED" and image.endswith(":1")
    )
    new_added = min(
        i for i, (kind, _, image) in enumerate(seen) if kind == "ADDED" and image.endswith(":2")
    )
    assert new_added < first_deleted


def test_daemonset_follows_selector_and_tolerations_and_statefulset_orders(
    three_nodes: Any,
) -> None:
    d = three_nodes
    d.kubectl("taint", "node", "gpu-2", "dedicated=infra:NoSchedule")
    d.kubectl("label", "node", "gpu-0", "disk=ssd")
    d.kubectl("label", "node", "gpu-2", "disk=ssd")
    d.apply("""\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {disk: ssd}
      containers: [{name: agent, image: "ghcr.io/example/agent:1"}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tolerant, namespace: default}
spec:
  selector: {matchLabels: {app: tolerant}}
  template:
    metadata: {labels: {app: tolerant}}
    spec:
      tolerations: [{key: dedicated, operator: Exists}]
      containers: [{name: agent, image: "ghcr.io/example/agent:1"}]
""")

    def placed(app: str) -> list[str]:
        pods = d.get("pods", "-n", "default", "-l", f"app={app}")["items"]
        return sorted(
            p["spec"].get("nodeName", "") for p in pods if p["status"].get("phase") == "Running"
        )

    # gpu-2 carries an untolerated NoSchedule taint: only gpu-0 has both label and no taint.
    d.wait_for("agent on gpu-0", lambda: placed("agent") == ["gpu-0"])
    d.wait_for("tolerant everywhere", lambda: placed("tolerant") == ["gpu-0", "gpu-1", "gpu-2"])
    ds = d.get("daemonset", "-n", "default", "agent")
    assert ds["status"]["desiredNumberScheduled"] == 1

    d.apply("""\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "ghcr.io/example/db:1"}]
""")
    d.wait_for("three db pods", lambda: len(placed("db")) == 3)
    pods = d.get("pods", "-n", "default", "-l", "app=db")["items"]
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert sorted(by_name) == ["db-0", "db-1", "db-2"]
    # OrderedReady: each ordinal is created only once the previous one is Running and Ready.
    created = [by_name[f"db-{i}"]["metadata"]["creationTimestamp"] for i in range(3)]
    started = [
        by_name[f"db-{i}"]["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        for i in range(3)
    ]
    assert started[0] <= created[1] and started[1] <= created[2]
    assert by_name["db-1"]["spec"]["hostname"] == "db-1"
    d.kubectl("scale", "statefulset", "-n", "default", "db", "--replicas=1")
    d.wait_for(
        "db-0 alone",
        lambda: (
            [p["metadata"]["name"] for p in d.get("pods", "-n", "default", "-l", "app=db")["items"]]
            == ["db-0"]
        ),
    )


def test_scaling_and_a_pods_conditions_and_events(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEPLOYMENT.format(strategy="RollingUpdate", version=1))

    def running() -> list[Any]:
        pods = d.get("pods", "-n", "default", "-l", "app=web")["items"]
        return [
            p
            for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        ]

    d.wait_for(
        "two",
        lambda: (
            len(running()) == 2
            and len(d.get("pods", "-n", "default", "-l", "app=web")["items"]) == 2
        ),
    )
    pod = running()[0]
    status = pod["status"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("PodReadyToStartContainers", "True"),
        ("Initialized", "True"),
        ("Ready", "True"),
        ("ContainersReady", "True"),
        ("PodScheduled", "True"),
    ]
    (cs,) = status["containerStatuses"]
    assert (cs["name"], cs["ready"], cs["started"], cs["restartCount"]) == ("app", True, True, 0)
    assert set(cs["state"]) == {"running"}
    assert status["podIP"].startswith("10.244.")
    name = pod["metadata"]["name"]
    events = d.get("events", "-n", "default", "--field-selector", f"involvedObject.name={name}")
    assert [
        (e["reason"], e["message"])
        for e in sorted(events["items"], key=lambda e: e["metadata"]["name"])
    ] == [
        ("Scheduled", f"Successfully assigned default/{name} to {pod['spec']['nodeName']}"),
        ("Pulled", 'Container image "ghcr.io/example/web:1" already present on machine'),
        ("Created", "Created container: app"),
        ("Started", "Started container app"),
    ]
    d.kubectl("scale", "deployment", "-n", "default", "web", "--replicas=5")
    d.wait_for("five", lambda: len(running()) == 5)
    d.kubectl("scale", "deployment", "-n", "default", "web", "--replicas=1")
    d.wait_for(
        "one left", lambda: len(d.get("pods", "-n", "default", "-l", "app=web")["items"]) == 1
    )
    deploy = d.get("deployment", "-n", "default", "web")
    assert {
        k: deploy["status"][k]
        for k in ("replicas", "readyReplicas", "availableReplicas", "updatedReplicas")
    } == {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1}
    scaled = d.get(
        "events",
        "-n",
        "default",
        "--field-selector",
        "involvedObject.kind=Deployment,reason=ScalingReplicaSet",
    )["items"]
    rs = d.get("replicasets", "-n", "default")["items"][0]["metadata"]["name"]
    assert sorted(e["message"] for e in scaled) == sorted(
        [
            f"Scaled up replica set {rs} from 0 to 2",
            f"Scaled up replica set {rs} from 2 to 5",
            f"Scaled down replica set {rs} from 5 to 1",
        ]
    )


def test_statefulset_rolls_a_new_template_from_the_highest_ordinal(three_nodes: Any) -> None:
    d = three_nodes
    sts = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: db, namespace: default}}
spec:
  replicas: 3
  serviceName: db
  selector: {{matchLabels: {{app: db}}}}
  template:
    metadata: {{labels: {{app: db}}}}
    spec:
      containers: [{{name: db, image: "ghcr.io/example/db:{version}"}}]
"""

    def images() -> dict[str, str]:
        pods = d.get("pods", "-n", "default", "-l", "app=db")["items"]
        return {
            p["metadata"]["name"]: p["spec"]["containers"][0]["image"][-1]
            for p in pods
            if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        }

    d.apply(sts.format(version=1))
    d.wait_for("v1", lambda: images() == {"db-0": "1", "db-1": "1", "db-2": "1"})
    d.apply(sts.format(version=2))
    d.wait_for("v2", lambda: images() == {"db-0": "2", "db-1": "2", "db-2": "2"})
    deleted = [
        e["message"]
        for e in sorted(
            d.get(
                "events",
                "-n",
                "default",
                "--field-selector",
                "involvedObject.kind=StatefulSet,reason=SuccessfulDelete",
            )["items"],
            key=lambda e: e["metadata"]["name"],
        )
    ]
    assert deleted == [f"delete Pod db-{i} in StatefulSet db successful" for i in (2, 1, 0)]
    status = d.get("statefulset", "-n", "default", "db")["status"]
    assert (status["updatedReplicas"], status["currentReplicas"]) == (3, 0)


def test_daemonset_rolls_a_new_template_one_node_at_a_time(three_nodes: Any) -> None:
    d = three_nodes
    ds = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: default}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      containers: [{{name: agent, image: "ghcr.io/example/agent:{version}"}}]
"""

    def versions() -> list[str]:
        pods = d.get("pods", "-n", "default", "-l", "app=agent")["items"]
        return sorted(p["spec"]["containers"][0]["image"][-1] for p in pods)

    d.apply(ds.format(version=1))
    d.wait_for("v1 everywhere", lambda: versions() == ["1", "1", "1"])
    seen: set[tuple[str, ...]] = set()

    def rolled() -> bool:
        now = versions()
        seen.add(tuple(now))
        return now == ["2", "2", "2"]

    d.apply(ds.format(version=2))
    d.wait_for("v2 everywhere", rolled)
    # maxUnavailable 1: never two nodes without their pod or with both versions missing.
    assert all(len(v) >= 2 for v in seen)
    status = d.get("daemonset", "-n", "default", "agent")["status"]
    assert (status["desiredNumberScheduled"], status["updatedNumberScheduled"]) == (3, 3)


AGENT = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}, namespace: default}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      tolerations: {tolerations}
      containers: [{{name: agent, image: "ghcr.io/example/agent:1"}}]
"""


def _pods_by_node(d: Any, app: str) -> dict[str, Any]:
    """The pods of ``app`` that are Running and not being deleted, by node."""
    pods = d.get("pods", "-n", "default", "-l", f"app={app}")["items"]
    return {
        p["spec"]["nodeName"]: p
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


def test_a_noschedule_taint_keeps_a_running_daemon_pod_and_starts_no_new_one(
    three_nodes: Any,
) -> None:
    d = three_nodes
    d.apply(AGENT.format(name="agent", tolerations="[]"))
    d.wait_for("agent everywhere", lambda: len(_pods_by_node(d, "agent")) == 3)
    before = _pods_by_node(d, "agent")["gpu-1"]["metadata"]
    # The cutover's merge-step taint, which the agent does not tolerate.
    d.kubectl("taint", "node", "gpu-1", "gpushift.dev/cutover=dra:NoSchedule")
    # NodeShouldRunDaemonPod on gpu-1: an untolerated taint, none of them NoExecute, so
    # shouldRun is false and shouldContinueRunning true: the pod stays but gpu-1 is no
    # longer desired, and a node with a pod it should not run is counted misscheduled.
    status = d.wait_for(
        "the taint in the agent's status",
        lambda: (
            s
            if (s := d.get("daemonset", "-n", "default", "agent")["status"])[
                "desiredNumberScheduled"
            ]
            == 2
            else None
        ),
    )
    assert (status["numberMisscheduled"], status["currentNumberScheduled"]) == (1, 2)
    pod = d.get("pod", "-n", "default", before["name"])
    assert pod["metadata"]["uid"] == before["uid"]
    assert pod["status"]["phase"] == "Running"
    assert "deletionTimestamp" not in pod["metadata"]
    # A DaemonSet made after the taint gets no pod on gpu-1 (shouldRun is false there).
    d.apply(AGENT.format(name="late", tolerations="[]"))
    d.wait_for(
        "late on gpu-0 and gpu-2",
        lambda: (
            sorted(_pods_by_node(d, "late"))
            == [
                "gpu-0",
                "gpu-2",
            ]
        ),
    )
    late = d.get("daemonset", "-n", "default", "late")["status"]
    assert (late["desiredNumberScheduled"], late["numberMisscheduled"]) == (2, 0)
    assert all(
        p["spec"].get("nodeName") != "gpu-1"
        for p in d.get("pods", "-n", "default", "-l", "app=late")["items"]
    )
    assert sorted(_pods_by_node(d, "agent")) == ["gpu-0", "gpu-1", "gpu-2"]
    # Untainted, gpu-1 is desired again; its pod was never replaced.
    d.kubectl("taint", "node", "gpu-1", "gpushift.dev/cutover-")
    d.wait_for("late on gpu-1 too", lambda: len(_pods_by_node(d, "late")) == 3)
    assert _pods_by_node(d, "agent")["gpu-1"]["metadata"]["uid"] == before["uid"]


def test_an_untolerated_noexecute_taint_evicts_daemon_and_other_pods(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(AGENT.format(name="agent", tolerations="[]"))
    d.apply(
        AGENT.format(
            name="tolerant", tolerations="[{key: maintenance, operator: Exists, effect: NoExecute}]"
        )
    )
    d.apply("""\
apiVersion: v1
kind: Pod
metadata: {name: solo, namespace: default, labels: {app: solo}}
spec:
  nodeSelector: {kubernetes.io/hostname: gpu-2}
  containers: [{name: app, image: "ghcr.io/example/web:1"}]
""")
    d.wait_for(
        "everything running",
        lambda: (
            len(_pods_by_node(d, "agent")) == 3
            and len(_pods_by_node(d, "tolerant")) == 3
            and list(_pods_by_node(d, "solo")) == ["gpu-2"]
        ),
    )
    tolerant = _pods_by_node(d, "tolerant")["gpu-2"]["metadata"]["uid"]
    d.kubectl("taint", "node", "gpu-2", "maintenance=now:NoExecute")
    # The agent does not tolerate the NoExecute taint: shouldContinueRunning is false, its
    # pod goes and none comes back. The bare pod goes too (taint eviction, any pod). The
    # tolerant agent tolerates it without tolerationSeconds: it stays for good.
    d.wait_for(
        "agent and solo off gpu-2",
        lambda: (
            not any(
                p["spec"].get("nodeName") == "gpu-2"
                for p in d.get("pods", "-n", "default", "-l", "app=agent")["items"]
            )
            and not d.get("pods", "-n", "default", "-l", "app=solo")["items"]
        ),
    )
    assert sorted(_pods_by_node(d, "agent")) == ["gpu-0", "gpu-1"]
    status = d.get("daemonset", "-n", "default", "agent")["status"]
    assert (status["desiredNumberScheduled"], status["numberMisscheduled"]) == (2, 0)
    evictions = d.get("events", "-n", "default", "--field-selector", "reason=TaintManagerEviction")[
        "items"
    ]
    assert ("Pod", "solo", "Marking for deletion Pod default/solo") in {
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["message"]) for e in evictions
    }
    assert _pods_by_node(d, "tolerant")["gpu-2"]["metadata"]["uid"] == tolerant


def _created(d: Any, name: str) -> datetime:
    d.kubectl("create", "configmap", "-n", "default", name)
    return _time(d.get("configmap", "-n", "default", name)["metadata"]["creationTimestamp"])


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_a_tolerated_noexecute_taint_evicts_after_toleration_seconds(three_nodes: Any) -> None:
    d = three_nodes
    pod = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: {name}}}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: gpu-0}}
  terminationGracePeriodSeconds: 3000
  tolerations: [{{key: maintenance, operator: Exists, effect: NoExecute, tolerationSeconds: {s}}}]
  containers: [{{name: app, image: "ghcr.io/example/web:1"}}]
"""
    d.apply(pod.format(name="patient", s=300))
    d.apply(pod.format(name="spared", s=1500))
    d.wait_for(
        "both running",
        lambda: _pods_by_node(d, "patient") and _pods_by_node(d, "spared"),
    )
    # Object timestamps are cluster time (100 s per wall second here), in whole seconds.
    before = _created(d, "before")
    d.kubectl("taint", "node", "gpu-0", "maintenance=now:NoExecute")
    after = _created(d, "after")
    evicted = d.wait_for(
        "patient marked for deletion",
        lambda: (
            p
            if (p := d.get("pod", "-n", "default", "patient"))["metadata"].get("deletionTimestamp")
            else None
        ),
    )
    # Both tolerate the taint, so each is deleted once its tolerationSeconds have passed
    # since the controller saw the taint: patient 300 s after it was set, no sooner.
    (condition,) = [c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "True",
        "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint",
    )
    at = _time(condition["lastTransitionTime"])
    assert before + timedelta(seconds=300) <= at <= after + timedelta(seconds=300 + 200)
    assert at <= _time(evicted["metadata"]["deletionTimestamp"]) <= at + timedelta(seconds=1)
    # Removing the taint before spared's 1500 s are up cancels its eviction.
    d.kubectl("taint", "node", "gpu-0", "maintenance-")
    d.wait_for(
        "spared's eviction cancelled",
        lambda: [
            e
            for e in d.get(
                "events", "-n", "default", "--field-selector", "reason=TaintManagerEviction"
            )["items"]
            if e["message"] == "Cancelling deletion of Pod default/spared"
        ],
    )
    spared = d.get("pod", "-n", "default", "spared")
    assert "deletionTimestamp" not in spared["metadata"]
    assert spared["status"]["phase"] == "Running"
