"""The twin's own controllers against kube-controller-manager's: each test runs the same
scenario on `gpushift twin serve --nodes` with the embedded control plane and with
`--control-plane upstream` (marked ``upstream``), drives it with kubectl over HTTP, and holds
both to the sequence derived by hand from the upstream controller's code.

Each server is one `twin serve` process for the module, three one-card nodes ``gpu-0`` to
``gpu-2`` and no Flux; each test keeps to its own namespace (the claim test also adds the
cluster's DeviceClass and the DRA kubelet plugin, which no other test uses).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.upstream.conftest import served, until

pytestmark = [pytest.mark.slow(seconds=120)]

NODES = ("gpu-0", "gpu-1", "gpu-2")
INVENTORY = """\
nodes:
- name: gpu
  count: 3
  gpus: [{product: NVIDIA L4}]
"""
#: The cutover's merge-step barrier, which the agent below does not tolerate.
BARRIER = "gpushift.dev/cutover=dra:NoSchedule"


@dataclass
class Server:
    """One served twin and kubectl on it."""

    name: str
    kubeconfig: Path
    cache: Path

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(self.kubeconfig),
                "--cache-dir",
                str(self.cache),
                *args,
            ],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def namespace(self, name: str) -> str:
        """Create ``name``; on kube-apiserver wait for its ``default`` ServiceAccount,
        without which pods are not admitted."""
        self.kubectl("create", "namespace", name)
        if self.name == "upstream":
            until(
                lambda: "default" in self.kubectl("get", "serviceaccounts", "-n", name),
                30,
                f"the default ServiceAccount of {name}",
            )
        return name


@pytest.fixture(
    scope="module",
    params=["twin", pytest.param("upstream", marks=pytest.mark.upstream)],
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """Three one-card nodes on the embedded control plane (at 10 times wall time) or on
    kube-apiserver, kube-controller-manager and kube-scheduler (wall time)."""
    where = tmp_path_factory.mktemp(request.param)
    inventory = where / "nodes.yaml"
    inventory.write_text(INVENTORY)
    kubeconfig = where / "kubeconfig"
    speed = ("--time-scale", "10") if request.param == "twin" else ()
    with served(kubeconfig, "--nodes", str(inventory), *speed, control_plane=request.param):
        found = Server(request.param, kubeconfig, where / "cache")
        until(
            lambda: (
                json.loads(found.kubectl("get", "nodes", "-o", "json"))["items"]
                and all(
                    c["status"] == "True"
                    for n in found.get("nodes")["items"]
                    for c in n["status"].get("conditions") or []
                    if c["type"] == "Ready"
                )
                and len(found.get("nodes")["items"]) == 3
            ),
            60,
            "three Ready nodes",
        )
        yield found


AGENT = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: {namespace}}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      terminationGracePeriodSeconds: 2
      containers: [{{name: agent, image: "ghcr.io/example/agent:{version}"}}]
"""


@dataclass(frozen=True)
class Seen:
    """One watch event of a daemon pod: its type, name, node, image tag, whether it is
    being deleted and whether it is Ready."""

    type: str
    name: str
    node: str
    version: str
    terminating: bool
    ready: bool


def _seen(event: Any) -> Seen:
    pod = event["object"]
    spec = pod["spec"]
    # A daemon pod is bound by the scheduler; its node is also in the controller's affinity.
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or [{}]
    node = spec.get("nodeName") or next(
        (f["values"][0] for f in terms[0].get("matchFields") or []), ""
    )
    return Seen(
        type=event["type"],
        name=pod["metadata"]["name"],
        node=node,
        version=spec["containers"][0]["image"].rsplit(":", 1)[1],
        terminating=bool(pod["metadata"].get("deletionTimestamp")),
        ready=any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        ),
    )


@contextmanager
def watch_raw(server: Server, namespace: str, *what: str) -> Iterator[list[Any]]:
    """Every watch event of ``kubectl get WHAT -n NAMESPACE --watch``, in order: kubectl
    lists first (the existing objects, as ADDED), then watches from the list's
    resourceVersion, so no change after the listed objects is missed."""
    proc = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            str(server.kubeconfig),
            "--cache-dir",
            str(server.cache),
            "get",
            *what,
            "-n",
            namespace,
            "--watch",
            "--output-watch-events",
            "-o",
            "json",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    events: list[Any] = []

    def read() -> None:
        assert proc.stdout is not None
        text = ""
        for line in proc.stdout:
            text += line
            try:
                event = json.loads(text)
            except ValueError:
                continue
            text = ""
            events.append(event)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield events
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        reader.join(timeout=10)


def _states(seen: list[Seen], *, listed: int = 3) -> Iterator[tuple[Seen, dict[str, Seen]]]:
    """Each event after the ``listed`` ones of the watch's initial list, with the pods as
    they stood right after it, by name."""
    pods: dict[str, Seen] = {}
    for i, s in enumerate(seen):
        if s.type == "DELETED":
            pods.pop(s.name, None)
        else:
            pods[s.name] = s
        if i >= listed - 1:
            yield s, dict(pods)


def _status(server: Server, namespace: str) -> dict[str, Any]:
    status: dict[str, Any] = server.get("daemonset", "-n", namespace, "agent")["status"]
    return status


def _running_everywhere(server: Server, namespace: str, version: str) -> bool:
    pods = server.get("pods", "-n", namespace, "-l", "app=agent")["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return (
        len(pods) == 3
        and sorted(_seen({"type": "", "object": p}).node for p in live) == list(NODES)
        and all(
            (s := _seen({"type": "", "object": p})).ready and s.version == version for p in live
        )
    )


def test_a_daemonset_rolls_one_node_at_a_time(server: Server) -> None:
    """RollingUpdate with the default maxUnavailable 1 (update.go rollingUpdate): an old pod
    is deleted only while every other node has a live Ready pod, and its node gets the new
    pod only after the old one is gone; so at no moment do two nodes lack a live Ready pod."""
    ns = server.namespace("roll")
    server.kubectl("apply", "-f", "-", stdin=AGENT.format(namespace=ns, version=1))
    until(lambda: _running_everywhere(server, ns, "1"), 90, "v1 Ready on every node")
    with watch_raw(server, ns, "pods", "-l", "app=agent") as raw:
        until(lambda: len(raw) >= 3, 30, "the watch to list the v1 pods")
        server.kubectl("apply", "-f", "-", stdin=AGENT.format(namespace=ns, version=2))
        until(lambda: _running_everywhere(server, ns, "2"), 120, "v2 Ready on every node")
    seen = [_seen(e) for e in raw]
    for event, pods in _states(seen):
        lacking = [
            n
            for n in NODES
            if not any(p.node == n and p.ready and not p.terminating for p in pods.values())
        ]
        assert len(lacking) <= 1, (event, lacking)
        by_node: dict[str, int] = {}
        for p in pods.values():
            by_node[p.node] = by_node.get(p.node, 0) + 1
        # Without surge, a node never holds an old and a new pod at once.
        assert max(by_node.values(), default=0) <= 1, (event, pods)
    assert sorted(s.node for s in seen if s.type == "DELETED") == list(NODES)
    created = [s for s in seen if s.type == "ADDED" and s.version == "2"]
    assert sorted(s.node for s in created) == list(NODES)
    status = _status(server, ns)
    assert (status["desiredNumberScheduled"], status["updatedNumberScheduled"]) == (3, 3)
    assert (status["numberAvailable"], status.get("numberUnavailable", 0)) == (3, 0)


def test_under_the_cutover_taint_old_pods_go_one_at_a_time_and_none_comes_back(
    server: Server,
) -> None:
    """The cutover's barrier on every node and a new template (the merge changing an agent
    it does not hold back): no node should run the pod any more (shouldRun false), the old
    pods may stay (shouldContinueRunning), and the rollout still deletes them, one at a time:
    maxUnavailable is 1 of 0 desired nodes, a node whose pod is terminating counts as
    unavailable until the pod is gone, and a node with no pod counts as nothing. No new pod
    starts until the taint goes; then one starts on every node at once."""
    ns = server.namespace("barrier")
    server.kubectl("apply", "-f", "-", stdin=AGENT.format(namespace=ns, version=1))
    until(lambda: _running_everywhere(server, ns, "1"), 90, "v1 Ready on every node")
    server.kubectl("taint", "nodes", *NODES, BARRIER)
    # kube-controller-manager does not sync a DaemonSet for a NoSchedule taint on a node
    # whose pod may stay (syncNodeUpdate), so agent's status goes on saying 3 desired. A
    # DaemonSet made now shows when its node cache has the taints: 0 desired.
    server.kubectl(
        "apply",
        "-f",
        "-",
        stdin=AGENT.format(namespace=ns, version=1).replace("agent", "probe"),
    )
    until(
        lambda: (
            (server.get("daemonset", "-n", ns, "probe").get("status") or {}).get(
                "desiredNumberScheduled"
            )
            == 0
        ),
        30,
        "the taints in the controller's view",
    )
    try:
        with watch_raw(server, ns, "pods", "-l", "app=agent") as raw:
            until(lambda: len(raw) >= 3, 30, "the watch to list the v1 pods")
            server.kubectl("apply", "-f", "-", stdin=AGENT.format(namespace=ns, version=2))
            until(
                lambda: sum(1 for e in raw if e["type"] == "DELETED") == 3,
                120,
                "every v1 pod gone",
            )
            # Nothing may start while the barrier is there; give the controller time to try.
            until(lambda: _status(server, ns).get("observedGeneration") == 2, 30, "generation 2")
            tainted = [_seen(e) for e in raw]
    finally:
        server.kubectl("taint", "nodes", *NODES, "gpushift.dev/cutover-")
    deleting: list[str] = []
    for event, pods in _states(tainted):
        terminating = [p.name for p in pods.values() if p.terminating]
        # One at a time: the next deletion waits for the pod before it to be gone.
        assert len(terminating) <= 1, (event, terminating)
        if event.terminating and event.name not in deleting:
            deleting.append(event.name)
    assert len(deleting) == 3
    assert not [s for s in tainted if s.type == "ADDED" and s.version == "2"]
    until(lambda: _running_everywhere(server, ns, "2"), 120, "v2 Ready on every node untainted")
    status = _status(server, ns)
    assert (status["desiredNumberScheduled"], status["updatedNumberScheduled"]) == (3, 3)


MANIFESTS = Path(__file__).resolve().parents[1] / "twin" / "cluster" / "manifests"
CLAIMED = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: whole-gpu, namespace: {namespace}}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {{deviceClassName: gpu.nvidia.com}}
---
apiVersion: v1
kind: Pod
metadata: {{name: user, namespace: {namespace}}}
spec:
  terminationGracePeriodSeconds: 2
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: whole-gpu}}]
  containers:
  - name: app
    image: ghcr.io/example/app:1
    resources: {{claims: [{{name: gpu}}]}}
"""


def _claims(server: Server, namespace: str) -> list[Any]:
    items: list[Any] = server.get("resourceclaims", "-n", namespace)["items"]
    return items


def test_a_generated_claim_is_deallocated_before_it_goes(server: Server) -> None:
    """The resourceclaim controller (controller.go syncClaim) on a pod's claim from a
    template: once the pod is gone it writes the status without ``reservedFor`` and without
    ``allocation``, then removes its ``delete-protection`` finalizer, and only then does the
    claim go; no observer ever sees an allocated claim without the finalizer, or one deleted
    while still allocated."""
    ns = server.namespace("claims")
    server.kubectl("apply", "-f", str(MANIFESTS / "device-class.yaml"))
    plugin = (MANIFESTS / "kubelet-plugin.yaml").read_text()
    server.kubectl("apply", "-f", "-", stdin=plugin.format(shares="disabled", gate="false"))
    until(lambda: len(server.get("resourceslices")["items"]) == 3, 90, "three slices")
    server.kubectl("apply", "-f", "-", stdin=CLAIMED.format(namespace=ns))

    def running() -> bool:
        pod = server.get("pod", "-n", ns, "user")
        claims = _claims(server, ns)
        return (
            pod["status"].get("phase") == "Running"
            and len(claims) == 1
            and bool((claims[0].get("status") or {}).get("reservedFor"))
        )

    until(running, 90, "the pod Running on its reserved claim")
    (claim,) = _claims(server, ns)
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert claim["metadata"]["name"].startswith("user-gpu-")
    assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    with watch_raw(server, ns, "resourceclaims") as events:
        until(lambda: events, 30, "the watch to list the claim")
        server.kubectl("delete", "pod", "-n", ns, "user", "--wait=true", "--timeout=60s")
        until(lambda: any(e["type"] == "DELETED" for e in events), 60, "the claim deleted")
    states = [
        (
            e["type"],
            bool((e["object"].get("status") or {}).get("allocation")),
            bool((e["object"].get("status") or {}).get("reservedFor")),
            "resource.kubernetes.io/delete-protection"
            in (e["object"]["metadata"].get("finalizers") or []),
        )
        for e in events
    ]
    for _, allocated, _, guarded in states:
        assert guarded or not allocated, states
    assert states[-1][:3] == ("DELETED", False, False), states
    # Deallocated while still guarded, before the finalizer went.
    assert any(
        not allocated and not reserved and guarded for _, allocated, reserved, guarded in states
    ), states


WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: {namespace}
  annotations: {{example.com/owner: media-team}}
spec:
  replicas: 1
  strategy: {{type: Recreate}}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 2
      containers: [{{name: web, image: "ghcr.io/example/web:{version}"}}]
"""


def _web_settled(server: Server, namespace: str, version: str) -> bool:
    deploy = server.get("deployment", "-n", namespace, "web")
    status = deploy.get("status") or {}
    pods = server.get("pods", "-n", namespace)["items"]
    return (
        status.get("observedGeneration") == deploy["metadata"]["generation"]
        and status.get("updatedReplicas") == 1
        and status.get("availableReplicas") == 1
        and len(pods) == 1
        and pods[0]["spec"]["containers"][0]["image"].endswith(f":{version}")
    )


def test_a_rollback_makes_the_old_replicaset_the_newest_revision(server: Server) -> None:
    """The Deployment controller (sync.go getNewReplicaSet, deployment_util.go) through a
    Recreate rollout v1, v2 and back to v1: the v1 ReplicaSet is taken again and becomes
    revision 3, its former revision kept in ``revision-history``; the Deployment's revision
    annotation follows; both ReplicaSets carry the Deployment's own annotations. The status
    counts are omitempty except ``replicas`` on a ReplicaSet and ``terminatingReplicas`` (a
    pointer), which counts the pods being deleted while the old ones go."""
    ns = server.namespace("rollback")
    for version in ("1", "2"):
        server.kubectl("apply", "-f", "-", stdin=WEB.format(namespace=ns, version=version))
        until(lambda v=version: _web_settled(server, ns, v), 90, f"v{version} available")
    with watch_raw(server, ns, "replicasets") as events:
        until(lambda: len(events) >= 2, 30, "the watch to list both ReplicaSets")
        server.kubectl("apply", "-f", "-", stdin=WEB.format(namespace=ns, version="1"))
        until(lambda: _web_settled(server, ns, "1"), 90, "v1 available again")
    rss = {
        rs["spec"]["template"]["spec"]["containers"][0]["image"][-1]: rs
        for rs in server.get("replicasets", "-n", ns)["items"]
    }
    assert sorted(rss) == ["1", "2"]
    first, second = rss["1"]["metadata"]["annotations"], rss["2"]["metadata"]["annotations"]
    assert first["deployment.kubernetes.io/revision"] == "3"
    assert first["deployment.kubernetes.io/revision-history"] == "1"
    assert second["deployment.kubernetes.io/revision"] == "2"
    assert "deployment.kubernetes.io/revision-history" not in second
    assert first["example.com/owner"] == second["example.com/owner"] == "media-team"
    deploy = server.get("deployment", "-n", ns, "web")
    assert deploy["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    # v2's pod was being deleted while Recreate waited for it to go.
    assert any(
        e["object"]["metadata"]["name"] == rss["2"]["metadata"]["name"]
        and (e["object"].get("status") or {}).get("terminatingReplicas") == 1
        for e in events
    ), [(e["object"]["metadata"]["name"], e["object"].get("status")) for e in events]
    scaled_down = rss["2"]["status"]
    assert sorted(scaled_down) == ["observedGeneration", "replicas", "terminatingReplicas"]
    assert (scaled_down["replicas"], scaled_down["terminatingReplicas"]) == (0, 0)
    status = deploy["status"]
    assert status["terminatingReplicas"] == 0
    assert "unavailableReplicas" not in status
    assert (status["replicas"], status["readyReplicas"]) == (1, 1)


def test_a_terminating_daemon_pod_still_counts_in_the_status(server: Server) -> None:
    """updateDaemonSetStatus reads each node's oldest pod, one being deleted included: while
    a Ready pod terminates (its grace period, 20 s) the DaemonSet still counts three
    scheduled, Ready and available pods, and no replacement is made until it is gone."""
    ns = server.namespace("counts")
    daemon = AGENT.format(namespace=ns, version=1).replace(
        "terminationGracePeriodSeconds: 2", "terminationGracePeriodSeconds: 20"
    )
    server.kubectl("apply", "-f", "-", stdin=daemon)
    until(lambda: _running_everywhere(server, ns, "1"), 90, "Ready on every node")
    until(lambda: _status(server, ns).get("numberReady") == 3, 30, "three Ready in the status")
    pods = server.get("pods", "-n", ns, "-l", "app=agent")["items"]
    victim = min(pods, key=lambda p: str(p["metadata"]["name"]))["metadata"]["name"]
    server.kubectl("delete", "pod", "-n", ns, victim, "--wait=false")
    looked = 0
    while True:
        current = server.get("pods", "-n", ns, "-l", "app=agent")["items"]
        names = {p["metadata"]["name"] for p in current}
        status = _status(server, ns)
        if victim not in names:
            break
        looked += 1
        # Read after the pod: it was still there (terminating) when the status was read.
        if victim not in {
            p["metadata"]["name"] for p in server.get("pods", "-n", ns, "-l", "app=agent")["items"]
        }:
            break
        assert len(current) == 3, names
        assert (
            status["currentNumberScheduled"],
            status["numberReady"],
            status.get("numberAvailable"),
        ) == (3, 3, 3), status
    assert looked >= 1
    until(lambda: _running_everywhere(server, ns, "1"), 90, "a replacement Ready")
