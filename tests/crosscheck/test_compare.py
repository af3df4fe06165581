"""The comparison alone, on Lists built by hand: what counts as a difference and what is
kube-scheduler's free choice. No control plane."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift.crosscheck import VICTIM_ANNOTATION, Cluster, compare, reasons, workload_of

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
TAIL = f" preemption: 0/2 nodes are available: 2 {NO_VICTIMS}."


def node(name: str, *, gpu: int = 4, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpu)}},
    }


def pod(
    name: str,
    *,
    gpu: int = 1,
    node_name: str | None = None,
    spec: dict[str, Any] | None = None,
    owner: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if labels:
        meta["labels"] = dict(labels)
    if owner is not None:
        h = "abc12"
        meta["labels"] = {**meta.get("labels", {}), "pod-template-hash": h}
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"{owner}-{h}",
                "controller": True,
            }
        ]
    body: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpu}}}],
        **(spec or {}),
    }
    if node_name:
        body["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def pending(p: dict[str, Any], message: str) -> dict[str, Any]:
    p = copy.deepcopy(p)
    p["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        ],
    }
    return p


def as_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


def test_reasons_drop_counts_and_keep_preemption_apart() -> None:
    message = (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated "
        f"taint(s). preemption: 0/3 nodes are available: 1 {NO_VICTIMS}, 2 {NOT_HELPFUL}."
    )
    assert reasons(message) == (
        "Insufficient nvidia.com/gpu",
        "node(s) had untolerated taint(s)",
        f"preemption: {NO_VICTIMS}",
        f"preemption: {NOT_HELPFUL}",
    )


def test_reasons_of_a_postfilter_message_and_of_a_missing_claim() -> None:
    # DynamicResources' PostFilter message comes before DefaultPreemption's.
    dealloc = (
        "0/1 nodes are available: 1 resourceclaim not available on the node. deallocation of "
        f"ResourceClaim completed, preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )
    assert reasons(dealloc) == (
        "deallocation of ResourceClaim completed",
        f"preemption: {NOT_HELPFUL}",
        "resourceclaim not available on the node",
    )
    # simulate words a missing claim as a PreFilter failure; kube-scheduler never tries the pod.
    missing = (
        '0/1 nodes are available: resourceclaim "nope" not found. '
        f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )
    assert reasons(missing) == ("waiting for a ResourceClaim",)
    assert reasons("no nodes available to schedule pods") == (
        "no nodes available to schedule pods",
    )


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "Insufficient cpu",
                "Insufficient nvidia.com/gpu",
                "cannot allocate all claims",
                "node(s) had untolerated taint(s)",
                "node(s) didn't match Pod's node affinity/selector",
                "Too many pods",
            ]
        ),
        st.integers(1, 40),
        min_size=1,
    ),
    st.dictionaries(st.sampled_from([NO_VICTIMS, NOT_HELPFUL]), st.integers(1, 40), min_size=1),
)
def test_reasons_are_the_reasons_whatever_their_counts(
    filters: dict[str, int], post: dict[str, int]
) -> None:
    # Written as FitError.Error writes it: "<count> <reason>" sorted as strings.
    n = sum(filters.values())
    body = ", ".join(sorted(f"{c} {r}" for r, c in filters.items()))
    tail = ", ".join(sorted(f"{c} {r}" for r, c in post.items()))
    message = f"0/{n} nodes are available: {body}. preemption: 0/{n} nodes are available: {tail}."
    want = set(filters) | {f"preemption: {r}" for r in post}
    assert reasons(message) == tuple(sorted(want))


def test_workload_of_follows_the_deployment_naming() -> None:
    assert workload_of(pod("web-abc12-x7k2p", owner="web")) == ("Deployment", "default/web")
    sts = pod("db-0")
    sts["metadata"]["ownerReferences"] = [{"kind": "StatefulSet", "name": "db", "controller": True}]
    assert workload_of(sts) == ("StatefulSet", "default/db")
    rs = pod("plain-q9z")
    rs["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "plain", "controller": True}
    ]
    assert workload_of(rs) == ("ReplicaSet", "default/plain")
    assert workload_of(pod("bare")) is None


def test_equal_nodes_are_interchangeable() -> None:
    # Two alike nodes: kube-scheduler put the pod on b, simulate on a. Same use, permuted.
    nodes = [node("a"), node("b")]
    cluster = Cluster.of([*nodes, pod("p")])
    sim = as_list(pod("p", node_name="a"))
    up = as_list(pod("p", node_name="b"))
    assert compare(sim, up, cluster) == []


def test_use_on_nodes_that_differ_is_a_difference() -> None:
    # a has 4 GPUs, b 2: which one holds the pod is no longer a free choice.
    cluster = Cluster.of([node("a", gpu=4), node("b", gpu=2), pod("p", gpu=2)])
    sim = as_list(pod("p", gpu=2, node_name="a"))
    up = as_list(pod("p", gpu=2, node_name="b"))
    diffs = compare(sim, up, cluster)
    assert sorted((d.object, d.field, d.simulate, d.upstream) for d in diffs) == [
        ("Node a", "gpu", ["nvidia.com/gpu 2"], ["none"]),
        ("Node b", "gpu", ["none"], ["nvidia.com/gpu 2"]),
    ]


def test_a_forced_node_is_compared_by_name() -> None:
    # Only b carries the label the pod selects: its node is forced, and named.
    nodes = [node("a"), node("b", labels={"pool": "x"}), node("c")]
    selector = {"nodeSelector": {"pool": "x"}}
    cluster = Cluster.of([*nodes, pod("p", spec=selector)])
    sim = as_list(pod("p", spec=selector, node_name="b"))
    assert compare(sim, sim, cluster) == []
    (d,) = [d for d in compare(sim, as_list(pod("p", spec=selector)), cluster)][:1]
    assert (d.object, d.simulate) == ("Pod default/p", ["Scheduled on b"])


def test_a_workloads_pods_are_compared_as_a_multiset() -> None:
    # Controllers name their pods at random: the Deployment's three pods agree by state.
    cluster = Cluster.of([node("a"), node("b")])
    msg = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu." + TAIL
    sim = as_list(
        pod("web-abc12-aaaaa", owner="web", node_name="a"),
        pod("web-abc12-bbbbb", owner="web", node_name="b"),
        pending(pod("web-abc12-ccccc", owner="web"), msg),
    )
    up = as_list(
        pending(pod("web-abc12-zzzzz", owner="web"), msg),
        pod("web-abc12-yyyyy", owner="web", node_name="a"),
        pod("web-abc12-xxxxx", owner="web", node_name="b"),
    )
    assert compare(sim, up, cluster) == []
    up["items"].pop()  # one pod fewer upstream
    (d,) = compare(sim, up, cluster)[:1]
    assert d.object == "Deployment default/web" and d.field == "state"
    assert d.simulate == [
        f"Pending (Insufficient nvidia.com/gpu, preemption: {NO_VICTIMS})",
        "2 × Scheduled",
    ]


def test_a_different_reason_is_a_difference_a_different_count_is_not() -> None:
    cluster = Cluster.of([node("a"), node("b"), pod("p")])
    one = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu." + TAIL
    fewer = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu." + TAIL
    other = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 Too many pods." + TAIL
    assert (
        compare(as_list(pending(pod("p"), one)), as_list(pending(pod("p"), fewer)), cluster) == []
    )
    (d,) = compare(as_list(pending(pod("p"), one)), as_list(pending(pod("p"), other)), cluster)
    assert d.upstream == [
        f"Pending (Insufficient nvidia.com/gpu, Too many pods, preemption: {NO_VICTIMS})"
    ]


def _gated_condition(p: dict[str, Any]) -> dict[str, Any]:
    # What kube-apiserver sets on a pod created with gates; it stays once they are lifted.
    p = copy.deepcopy(p)
    p["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
            }
        ],
    }
    return p


def test_a_gated_pod_is_pending_scheduling_gated_by_its_spec() -> None:
    gates = {"schedulingGates": [{"name": "example.com/wait"}]}
    cluster = Cluster.of([node("a"), pod("g", spec=gates)])
    diffs = compare(
        as_list(_gated_condition(pod("g", spec=gates))),
        as_list(pod("g", node_name="a")),
        cluster,
    )
    (d,) = [d for d in diffs if d.field == "state"]
    assert (d.simulate, d.upstream) == (["Pending (SchedulingGated)"], ["Scheduled on a"])
    # The crosscheck's own gate lifted from a pod whose claim is missing: kube-scheduler never
    # tries it, and the condition from its creation is still there.
    claim = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "missing"}]}
    cluster = Cluster.of([node("a"), pod("w", spec=claim)])
    (d,) = compare(
        as_list(_gated_condition(pod("w", spec=claim))),
        as_list(_gated_condition(pod("w", spec={**claim, **gates}))),
        cluster,
    )
    assert (d.simulate, d.upstream) == (
        ["Pending (waiting for a ResourceClaim)"],
        ["Pending (SchedulingGated)"],
    )


def _victims_cluster() -> list[dict[str, Any]]:
    low = {"priorityClassName": "low"}
    return [
        node("a", gpu=1),
        node("b", gpu=1),
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "low"},
            "value": -5,
        },
        pod("x", node_name="a", spec=low),
        pod("y", node_name="b", spec=low),
        pod("new"),
    ]


def _preempted_event(victim: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "reason": "Preempted",
        "involvedObject": {
            "kind": "Pod",
            "name": victim["metadata"]["name"],
            "uid": victim["metadata"]["uid"],
        },
        "message": "Preempted by pod uid-new on node a",
    }


def test_equal_victims_agree_by_class_not_by_name() -> None:
    # x and y are equal pods on alike nodes: simulate evicts x (first node), kube-scheduler
    # may evict y. simulate keeps its victim in its List with the Preempted event; upstream's
    # victim is deleted and listed as last seen, annotated.
    objs = _victims_cluster()
    cluster = Cluster.of(objs)
    low = {"priorityClassName": "low"}
    gone_x = pod("x", spec=low)
    gone_x["status"] = {"phase": "Failed"}
    sim = as_list(
        gone_x,
        pod("y", node_name="b", spec=low),
        pod("new", node_name="a"),
        _preempted_event(gone_x),
    )
    gone_y = pod("y", node_name="b", spec={**low, "priority": -5})
    gone_y["metadata"]["annotations"] = {VICTIM_ANNOTATION: "true"}
    up = as_list(
        pod("x", node_name="a", spec={**low, "priority": -5}), gone_y, pod("new", node_name="b")
    )
    assert compare(sim, up, cluster) == []


def test_a_victim_too_many_is_a_difference() -> None:
    objs = _victims_cluster()
    cluster = Cluster.of(objs)
    low = {"priorityClassName": "low"}
    gone_x = pod("x", spec=low)
    sim = as_list(
        gone_x,
        pod("y", node_name="b", spec=low),
        pod("new", node_name="a"),
        _preempted_event(gone_x),
    )
    up = as_list(
        pod("x", node_name="a", spec=low),
        pod("y", node_name="b", spec=low),
        pending(pod("new"), "0/2 nodes are available: 2 Insufficient nvidia.com/gpu." + TAIL),
    )
    fields = {(d.object, d.field) for d in compare(sim, up, cluster)}
    assert ("Preemption victims", "priority") in fields
    assert ("Pods default/x, default/y (equal)", "state") in fields


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 6),
    st.lists(st.integers(0, 3), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
)
def test_any_permutation_of_alike_nodes_agrees(
    n_nodes: int, gpus: list[int], rnd: random.Random
) -> None:
    # Pods placed on alike nodes, then the nodes' names shuffled: the same outcome up to the
    # choice among equal nodes.
    names = [f"n{i}" for i in range(n_nodes)]
    objs: list[dict[str, Any]] = [node(n, gpu=64) for n in names]
    placed = []
    for i, g in enumerate(gpus):
        objs.append(pod(f"p{i}", gpu=g))
        placed.append(pod(f"p{i}", gpu=g, node_name=rnd.choice(names)))
    shuffled = names[:]
    rnd.shuffle(shuffled)
    rename = dict(zip(names, shuffled, strict=True))
    moved = copy.deepcopy(placed)
    for p in moved:
        p["spec"]["nodeName"] = rename[p["spec"]["nodeName"]]
    assert compare(as_list(*placed), as_list(*moved), Cluster.of(objs)) == []


def test_gpu_use_reached_under_another_tie_break_agrees() -> None:
    # examples/cluster: the pods ask no CPU or memory, so after the llm (2 units) lands, the
    # three transcodes (1 unit each) score alike on both nodes. Taking the first node of a
    # tie gives 4 and 1 units; a random choice can give 3 and 2, as kube-scheduler's
    # selectHost may. That is a tie, not a difference.
    import json
    from pathlib import Path

    import yaml

    from gpushift import engine
    from gpushift.crosscheck import rows, tie_breaks

    path = Path(__file__).resolve().parents[2] / "examples" / "cluster" / "cluster.yaml"
    objects = [d for d in yaml.safe_load_all(path.read_text()) if d]

    def listed(seed: int | None) -> Any:
        rng = None if seed is None else random.Random(seed)
        sim = engine.simulate(engine.from_objects(copy.deepcopy(objects)), tie_break=rng)
        return json.loads(json.dumps(engine.as_list(sim)))

    def gpu(row_list: Any) -> list[Any]:
        return [r for r in row_list if r.field == "gpu"]

    first = listed(None)
    spread = next(
        x
        for x in (listed(s) for s in range(64))
        if gpu(rows(x, x, Cluster.of(objects)))[0].simulate
        != gpu(rows(first, first, Cluster.of(objects)))[0].simulate
    )
    cluster = Cluster.of(objects)
    (plain,) = gpu(rows(first, spread, cluster))
    assert plain.simulate != plain.upstream
    (tied,) = gpu(rows(first, spread, cluster, alternatives=tie_breaks(objects)))
    assert tied.simulate == tied.upstream
