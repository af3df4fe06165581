"""Properties of the scheduler loop on random clusters of device-plugin nodes."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpushift.engine import (
    AllocatedState,
    GpuInfo,
    Outcome,
    as_list,
    card_rows,
    from_objects,
    ignored_slices,
    nvidia_device_classes,
    nvidia_resource_slice,
    schedule,
    simulate,
)

nodes_st = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(1, 4)),  # gpu, cpu, pods
    min_size=1,
    max_size=4,
)
pods_st = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(-1, 1)),  # gpu, cpu, priority
    max_size=12,
)


def build(nodes: list[tuple[int, int, int]], pods: list[tuple[int, int, int]]) -> list[Any]:
    objs: list[Any] = []
    for i, (gpu, cpu, max_pods) in enumerate(nodes):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"nvidia.com/gpu": gpu, "cpu": cpu, "pods": max_pods}},
            }
        )
    for i, (gpu, cpu, prio) in enumerate(pods):
        res: dict[str, Any] = {"requests": {"cpu": cpu}}
        if gpu:
            res["limits"] = {"nvidia.com/gpu": gpu}
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}"},
                "spec": {"priority": prio, "containers": [{"name": "c", "resources": res}]},
            }
        )
    return objs


@settings(max_examples=60, deadline=None)
@given(nodes=nodes_st, pods=pods_st)
def test_no_node_is_overcommitted_and_no_pod_is_left_out_while_room_remains(
    nodes: list[tuple[int, int, int]], pods: list[tuple[int, int, int]]
) -> None:
    sim = simulate(from_objects(build(nodes, pods)))
    free: dict[str, list[int]] = {}
    for node in sim.outcome.nodes:
        gpu, cpu, max_pods = nodes[int(node.name[1:])]
        bound = [pods[int(p.name[1:])] for p in node.pods]
        used_gpu = sum(g for g, _, _ in bound)
        used_cpu = sum(c for _, c, _ in bound)
        assert used_gpu <= gpu and used_cpu <= cpu and len(bound) <= max_pods
        # Every unit handed out sits on a card of this node, within its replica count.
        assert sum(len(c.tenants) for c in node.gpu.cards) == used_gpu
        assert all(len(c.tenants) <= c.units for c in node.gpu.cards)
        free[node.name] = [gpu - used_gpu, cpu - used_cpu, max_pods - len(bound)]
    for p in sim.pending:
        gpu, cpu, _ = pods[int(p.name[1:])]
        # Use only grows, so a pod that did not fit when tried does not fit at the end.
        assert not any(g >= gpu and c >= cpu and n >= 1 for g, c, n in free.values())
        assert p.message is not None
        assert p.message.startswith(f"0/{len(nodes)} nodes are available: ")
    assert sim.exit_code == (1 if sim.pending else 0)


# --- the shortcuts (classes of pods alike, node groups, cached filters) against the full search

GIB = 2**30
ZONE = "topology.kubernetes.io/zone"
TEMPLATES = {
    # one share of a card, or a share asking for GPU memory too, or a whole card
    "share": {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
    "memory": {
        "name": "g",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "capacity": {"requests": {"memory": "30Gi"}},
        },
    },
    "two": {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
}

dra_nodes_st = st.lists(
    st.tuples(
        st.integers(0, 3),  # cards
        st.sampled_from(["1", "2", "5", "memory", "unlimited", "disabled"]),  # consumableShares
        st.integers(1, 6),  # cpu
        st.integers(1, 12),  # max pods
        st.booleans(),  # labelled pool=a
        st.integers(0, 2),  # device-plugin GPUs
    ),
    min_size=1,
    max_size=5,
)
dra_pod_st = st.tuples(
    st.sampled_from([None, *TEMPLATES]),
    st.integers(0, 2),  # cpu
    st.integers(0, 1),  # priority
    st.booleans(),  # nodeSelector pool=a
    st.integers(0, 1),  # device-plugin GPUs
    st.booleans(),  # spread over zones, DoNotSchedule
)
dra_pods_st = st.lists(dra_pod_st, max_size=30)


def dra_cluster(
    nodes: list[tuple[int, str, int, int, bool, int]],
    pods: list[tuple[str | None, int, int, bool, int, bool]],
) -> list[Any]:
    objs: list[Any] = [*nvidia_device_classes()]
    for i, (cards, shares, cpu, max_pods, pool_a, dp) in enumerate(nodes):
        name = f"n{i}"
        allocatable: dict[str, Any] = {"cpu": cpu, "memory": "64Gi", "pods": max_pods}
        if dp:
            allocatable["nvidia.com/gpu"] = dp
        labels = {ZONE: f"z{i % 2}", **({"pool": "a"} if pool_a else {})}
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": allocatable},
            }
        )
        gpus = [
            GpuInfo(
                minor=m,
                uuid=f"GPU-{i}-{m}",
                product_name="NVIDIA L40S",
                memory_bytes=48 * GIB,
                architecture="Ada Lovelace",
                cuda_compute_capability="8.9",
            )
            for m in range(cards)
        ]
        if gpus:
            objs.append(dict(nvidia_resource_slice(node_name=name, gpus=gpus, sharing=shares)))
    for t, request in TEMPLATES.items():
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": t, "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [request]}}},
            }
        )
    for i, (template, cpu, prio, pool_a, dp, spread) in enumerate(pods):
        resources: dict[str, Any] = {"requests": {"cpu": cpu}} if cpu else {}
        if dp:
            resources["limits"] = {"nvidia.com/gpu": dp}
        spec: dict[str, Any] = {"priority": prio, "containers": [{"name": "c"}]}
        if template is not None:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
            resources["claims"] = [{"name": "gpu"}]
        if resources:
            spec["containers"][0]["resources"] = resources
        if pool_a:
            spec["nodeSelector"] = {"pool": "a"}
        if spread:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "spread"}},
                }
            ]
        labels = {"app": "spread"} if spread else {}
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "labels": labels},
                "spec": spec,
            }
        )
    return objs


def placements(outcome: Outcome) -> list[tuple[Any, ...]]:
    out = []
    for p in outcome.pods:
        devices = sorted(
            (r["pool"], r["device"], repr(sorted((r.get("consumedCapacity") or {}).items())))
            for _, c in p.claims
            for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            )
            or []
        )
        out.append(
            (p.key, p.node.name if p.node else None, p.message, devices, sorted(p.gpu_cards))
        )
    return out


@settings(max_examples=120, deadline=None)
@given(nodes=dra_nodes_st, pods=dra_pods_st)
# A node whose DRA failure was cached fails the spreading filter first once a like pod binds
# elsewhere: kube-scheduler reports the first failing filter, so the message must count it.
@example(
    nodes=[(0, "1", 1, 1, False, 0)] * 3 + [(1, "1", 1, 1, False, 0)],
    pods=[(None, 0, 0, False, 0, False)] * 2 + [(None, 1, 1, False, 1, True)] * 2,
)
def test_shortcuts_place_every_pod_as_the_full_search_does(
    nodes: list[tuple[int, str, int, int, bool, int]],
    pods: list[tuple[str | None, int, int, bool, int, bool]],
) -> None:
    objs = dra_cluster(nodes, pods)
    fast = schedule(from_objects(copy.deepcopy(objs)))
    full = schedule(from_objects(copy.deepcopy(objs)), full_search=True)
    assert placements(fast) == placements(full)


# --- what is running stays, what is gated waits -----------------------------------------------

gates_st = st.lists(st.booleans(), max_size=30)


def _running_and_new(
    nodes: list[tuple[int, str, int, int, bool, int]],
    running: list[tuple[str | None, int, int, bool, int, bool]],
    new: list[tuple[str | None, int, int, bool, int, bool]],
    gated: list[bool],
) -> list[Any]:
    """A cluster where ``running`` was placed already (read back as ``simulate -o json --all``
    prints it: pods bound, claims allocated and reserved; every other one owned by a
    ReplicaSet), and ``new`` pods arrive one priority higher, those ``gated`` with a
    scheduling gate."""
    first = simulate(from_objects(dra_cluster(nodes, running)))
    items = copy.deepcopy(as_list(first, everything=True)["items"])
    objs = [i for i in items if i["kind"] != "Pod" or i["spec"].get("nodeName")]
    for obj in objs:
        if obj["kind"] == "Pod" and int(obj["metadata"]["name"][1:]) % 2 == 0:
            obj["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "rs",
                    "uid": "rs-uid",
                    "controller": True,
                }
            ]
    for obj in dra_cluster(nodes, new):
        if obj["kind"] == "ResourceClaimTemplate":
            objs.append(obj)
        elif obj["kind"] == "Pod":
            i = int(obj["metadata"]["name"][1:])
            obj["metadata"]["name"] = f"q{i}"
            obj["spec"]["priority"] += 1
            if i < len(gated) and gated[i]:
                obj["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
            objs.append(obj)
    return objs


def _allocation(claim: dict[str, Any]) -> Any:
    return copy.deepcopy((claim.get("status") or {}).get("allocation"))


@settings(max_examples=60, deadline=None)
@given(nodes=dra_nodes_st, running=dra_pods_st, new=dra_pods_st, gated=gates_st)
# p0 (owned by a ReplicaSet) runs on n0, the only node labelled pool=a, one pod each; q0 must
# go to pool=a and preempts it. n1 has room, but the evicted p0 is not moved there.
@example(
    nodes=[(0, "1", 1, 1, True, 0), (0, "1", 1, 1, False, 0)],
    running=[(None, 0, 0, False, 0, False)],
    new=[(None, 0, 0, True, 0, False)],
    gated=[],
)
def test_no_bound_pod_changes_node_or_devices_and_gated_pods_hold_nothing(
    nodes: list[tuple[int, str, int, int, bool, int]],
    running: list[tuple[str | None, int, int, bool, int, bool]],
    new: list[tuple[str | None, int, int, bool, int, bool]],
    gated: list[bool],
) -> None:
    objs = _running_and_new(nodes, running, new, gated)
    bound = {
        o["metadata"]["name"]: o["spec"]["nodeName"]
        for o in objs
        if o["kind"] == "Pod" and o["spec"].get("nodeName")
    }
    claims_before = {
        o["metadata"]["name"]: _allocation(o) for o in objs if o["kind"] == "ResourceClaim"
    }
    gated_names = {
        o["metadata"]["name"]
        for o in objs
        if o["kind"] == "Pod" and o["spec"].get("schedulingGates")
    }
    sim = simulate(from_objects(copy.deepcopy(objs)))
    by_name = {p.name: p for p in sim.outcome.pods}
    for name, node in bound.items():
        p = by_name[name]
        if p.node is None:
            # Evicted by a preemption, and not placed again.
            assert p.preempted_by is not None
            continue
        assert p.node.name == node
        for _, claim in p.claims:
            # A pod that keeps running keeps the devices it was allocated.
            assert _allocation(claim) == claims_before[claim["metadata"]["name"]]
    listed = {i["metadata"]["name"]: i for i in as_list(sim)["items"] if i["kind"] == "Pod"}
    for name in gated_names:
        p = by_name[name]
        assert p.node is None and p.preempted_by is None and not p.gpu_cards
        for _, claim in p.claims:
            assert not (claim.get("status") or {}).get("allocation")
            assert not (claim.get("status") or {}).get("reservedFor")
        (cond,) = listed[name]["status"]["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == (
            "PodScheduled",
            "False",
            "SchedulingGated",
        )
    # A gated pod takes no part: the others go where they would without it.
    without = [o for o in objs if o["metadata"]["name"] not in gated_names]
    alone = simulate(from_objects(copy.deepcopy(without)))
    assert [x for x in placements(sim.outcome) if x[0].split("/")[1] not in gated_names] == (
        placements(alone.outcome)
    )


@settings(max_examples=60, deadline=None)
@given(
    nodes=dra_nodes_st,
    running=dra_pods_st,
    new=st.lists(dra_pod_st, min_size=1, max_size=1),
)
# One whole card and room for one pod: p0 holds both. q0 fails NodeResourcesFit (too many
# pods), which preemption could help, but with p0 removed its card is still allocated.
@example(
    nodes=[(1, "disabled", 1, 1, False, 0)],
    running=[("share", 0, 0, False, 0, False)],
    new=[("share", 0, 0, False, 0, False)],
)
def test_a_preemption_never_frees_a_dra_device(
    nodes: list[tuple[int, str, int, int, bool, int]],
    running: list[tuple[str | None, int, int, bool, int, bool]],
    new: list[tuple[str | None, int, int, bool, int, bool]],
) -> None:
    # One pod arrives on a running cluster. If it preempts, its claims fit its node with
    # every device allocated before it came still allocated, the victims' too (DynamicResources
    # has no PreFilterExtensions: removing a pod in the dry run frees nothing).
    objs = _running_and_new(nodes, running, new, [])
    sim = simulate(from_objects(copy.deepcopy(objs)))
    (p,) = [p for p in sim.outcome.pods if p.name == "q0"]
    if p.node is None or not any(v.preempted_by for v in sim.outcome.pods):
        return
    before = AllocatedState()
    for o in objs:
        if o["kind"] == "ResourceClaim" and _allocation(o):
            before.add(o["status"]["allocation"])
    own = [c for _, c in p.claims] + ([p.bridge.claim] if p.bridge is not None else [])
    fresh = [{**c, "status": {}} for c in own]
    assert sim.outcome.allocator.allocate(claims=fresh, node=p.node.obj, state=before) is not None


@settings(max_examples=60, deadline=None)
@given(nodes=dra_nodes_st, pods=dra_pods_st, more=st.integers(1, 3))
# Every node has stale slices here: the allocator must still cache each node's view under
# the node's name. Built again per claim, a view can reuse a freed view's id and read its
# first-fit cursor, and p14 then misses n4's free share.
@example(
    nodes=[
        (0, "1", 1, 1, False, 0),
        (1, "1", 1, 4, False, 0),
        (0, "1", 1, 1, False, 0),
        (1, "1", 1, 5, False, 0),
        (1, "2", 1, 5, False, 0),
    ],
    pods=[(None, 0, 0, False, 0, False)] * 9
    + [
        ("memory", 0, 0, False, 0, True),
        ("share", 0, 0, False, 0, True),
        (None, 0, 0, False, 0, False),
        (None, 0, 1, False, 0, True),
        (None, 0, 1, False, 1, False),
        ("memory", 0, 0, False, 0, False),
    ],
    more=1,
)
def test_older_generations_and_incomplete_pools_change_nothing(
    nodes: list[tuple[int, str, int, int, bool, int]],
    pods: list[tuple[str | None, int, int, bool, int, bool]],
    more: int,
) -> None:
    # Beside each node's pool: the same pool's previous generation with ``more`` cards more,
    # and a pool of its own that says two slices but has one. Their devices cannot be
    # allocated (GatherPools), so placements and the card table are what they were.
    objs = dra_cluster(nodes, pods)
    noise: list[Any] = []
    for o in objs:
        if o["kind"] != "ResourceSlice":
            continue
        spec = o["spec"]
        node_name = spec["nodeName"]
        old = copy.deepcopy(o)
        old["metadata"]["name"] = f"{node_name}-previous"
        old["spec"]["pool"]["generation"] = spec["pool"]["generation"] - 1
        devices = old["spec"]["devices"]
        for k in range(more):
            extra = copy.deepcopy(devices[0])
            extra["name"] = f"gpu-{len(devices) + k}"
            devices.append(extra)
        partial = copy.deepcopy(o)
        partial["metadata"]["name"] = f"{node_name}-partial"
        partial["spec"]["pool"] = {
            "name": f"{node_name}-partial",
            "generation": 1,
            "resourceSliceCount": 2,
        }
        noise += [old, partial]
    plain = simulate(from_objects(copy.deepcopy(objs)))
    noisy = simulate(from_objects(copy.deepcopy(objs) + noise))
    assert placements(noisy.outcome) == placements(plain.outcome)
    assert card_rows(noisy) == card_rows(plain)
    ignored = {name for name, _ in ignored_slices(noisy)}
    assert ignored == {o["metadata"]["name"] for o in noise}
