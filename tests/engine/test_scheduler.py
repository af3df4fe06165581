"""The scheduler loop: queue order, filters, scores, binding and kube-scheduler's messages.

Every expected value below is worked out by hand from kube-scheduler's rules (see the comment
on each test), not taken from a previous run.
"""

from __future__ import annotations

from typing import Any

from gpushift.engine import Simulation, as_list, from_objects, nvidia_device_classes, simulate

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    gpu: int | None = None,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu is not None:
        alloc["nvidia.com/gpu"] = str(gpu)
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "status": {"allocatable": alloc},
    }
    if taints:
        obj["spec"] = {"taints": taints}
    return obj


def pod(
    name: str,
    *,
    gpu: int | None = None,
    cpu: str | None = None,
    spec: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    created: str | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpu is not None:
        resources["limits"] = {"nvidia.com/gpu": gpu}
    if cpu is not None:
        resources["requests"] = {"cpu": cpu}
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {}}
    if created:
        meta["creationTimestamp"] = created
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "resources": resources}], **(spec or {})},
    }


def run(*objs: dict[str, Any]) -> Simulation:
    return simulate(from_objects(list(objs)))


def where(sim: Simulation) -> dict[str, str | None]:
    return {p.name: (p.node.name if p.node else None) for p in sim.outcome.pods}


def message(sim: Simulation, name: str) -> str | None:
    return next(p.message for p in sim.outcome.pods if p.name == name)


def test_insufficient_gpu_message_matches_kube_scheduler() -> None:
    # Three nodes with one GPU each take three pods; the fourth fails NodeResourcesFit on all
    # three ("Insufficient nvidia.com/gpu", Unschedulable), and preemption finds no pod of
    # lower priority on any node.
    sim = run(
        *(node(n, gpu=1) for n in ("a", "b", "c")),
        *(pod(f"p{i}", gpu=1) for i in range(4)),
    )
    assert [p.node is not None for p in sim.outcome.pods] == [True, True, True, False]
    assert message(sim, "p3") == (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. "
        f"preemption: 0/3 nodes are available: 3 {NO_VICTIMS}."
    )
    assert sim.exit_code == 1


def test_reasons_are_counted_and_sorted_as_strings() -> None:
    # a: untolerated NoSchedule taint (TaintToleration runs before NodeAffinity; its reason
    # does not name the taint); b: no gpu label (NodeAffinity); c: GPU taken by p0
    # (NodeResourcesFit). Taints and affinity are UnschedulableAndUnresolvable, so preemption
    # is "not helpful" there.
    gpu_label = {"gpu": "yes"}
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    selector = {"nodeSelector": {"gpu": "yes"}}
    sim = run(
        node("a", gpu=1, labels=gpu_label, taints=taint),
        node("b", gpu=1),
        node("c", gpu=1, labels=gpu_label),
        pod("p0", gpu=1, spec=selector),
        pod("p1", gpu=1, spec=selector),
    )
    assert where(sim) == {"p0": "c", "p1": None}
    assert message(sim, "p1") == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s). "
        f"preemption: 0/3 nodes are available: 1 {NO_VICTIMS}, 2 {NOT_HELPFUL}."
    )


def test_request_above_allocatable_is_unresolvable() -> None:
    # 2 GPUs asked on a 1-GPU node: no preemption could ever make room.
    sim = run(node("a", gpu=1), pod("p", gpu=2))
    assert message(sim, "p") == (
        f"0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )


def test_toleration_admits_the_tainted_node() -> None:
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    tol = {
        "tolerations": [
            {
                "key": "nvidia.com/gpu",
                "operator": "Equal",
                "value": "present",
                "effect": "NoSchedule",
            }
        ]
    }
    sim = run(node("a", gpu=1, taints=taint), pod("p", gpu=1, spec=tol))
    assert where(sim) == {"p": "a"}


def test_queue_takes_priority_then_creation_time() -> None:
    # One GPU. "late-high" has the higher PriorityClass, so it goes first although it is the
    # newest; between the two priority-0 pods the older one ("old") is tried first.
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    sim = run(
        node("a", gpu=2),
        pc,
        pod("new", gpu=1, created="2026-01-03T00:00:00Z"),
        pod("old", gpu=1, created="2026-01-01T00:00:00Z"),
        pod("late-high", gpu=1, created="2026-01-05T00:00:00Z", spec={"priorityClassName": "high"}),
    )
    assert where(sim) == {"new": None, "old": "a", "late-high": "a"}


def test_a_random_tie_break_picks_among_the_best_nodes_only() -> None:
    # a and b (8 cpu) score (8000 - 1000) * 100 // 8000 = 87 for a 1-cpu pod, c (4 cpu) 75:
    # kube-scheduler picks a or b at random, never c; so does tie_break.
    import random

    picked = set()
    for seed in range(20):
        objs = [node("a"), node("b"), node("c", cpu="4"), pod("p", cpu="1")]
        sim = simulate(from_objects(objs), tie_break=random.Random(seed))
        picked.add(where(sim)["p"])
    assert picked == {"a", "b"}


def test_least_allocated_spreads_and_ties_go_to_the_first_name() -> None:
    # Empty identical nodes tie, so the first pod goes to "a" (first in name order); then
    # "b" is less allocated, so the second goes there; the third ties again and goes to "a".
    sim = run(node("b"), node("a"), *(pod(f"p{i}", cpu="1") for i in range(3)))
    assert where(sim) == {"p0": "a", "p1": "b", "p2": "a"}


def test_required_node_affinity_and_match_fields() -> None:
    affinity = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "zone", "operator": "NotIn", "values": ["x"]}
                            ]
                        },
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["a"]}
                            ]
                        },
                    ]
                }
            }
        }
    }
    # a matches the second term (by name) although its zone is x; b matches the first term;
    # c (zone x, other name) matches neither.
    sim = run(
        node("a", labels={"zone": "x"}),
        node("b", labels={"zone": "y"}),
        node("c", labels={"zone": "x"}),
        *(pod(f"p{i}", cpu="7", spec=affinity) for i in range(3)),
    )
    assert where(sim) == {"p0": "a", "p1": "b", "p2": None}
    assert message(sim, "p2") == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient cpu. "
        f"preemption: 0/3 nodes are available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}."
    )


def _anti(label: str) -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"role": label}},
                    }
                ]
            }
        }
    }


def test_required_anti_affinity_keeps_models_apart() -> None:
    # Each model repels pods labelled role=model on the same host: two nodes take two models,
    # the third fails the incoming pod's own anti-affinity on both nodes.
    sim = run(
        node("a"),
        node("b"),
        *(pod(f"m{i}", labels={"role": "model"}, spec=_anti("model")) for i in range(3)),
    )
    assert where(sim) == {"m0": "a", "m1": "b", "m2": None}
    assert message(sim, "m2") == (
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. "
        f"preemption: 0/2 nodes are available: 2 {NO_VICTIMS}."
    )


def test_existing_pods_anti_affinity_is_respected() -> None:
    # "m" on a repels role=web; the web pod (no terms of its own) must go to b.
    sim = run(
        node("a"),
        node("b", cpu="4"),
        pod("m", labels={"role": "model"}, spec=_anti("web")),
        pod("w", labels={"role": "web"}),
    )
    assert where(sim) == {"m": "a", "w": "b"}


def test_required_affinity_waits_for_its_target() -> None:
    # "follower" (priority 10) needs a role=leader pod on its host; the leader has priority 0
    # and is scheduled after it, onto b (the node a would be less allocated otherwise:
    # b has more cpu). The follower is retried once the leader is bound and joins it on b.
    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "ten"},
        "value": 10,
    }
    follow = {
        "priorityClassName": "ten",
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"role": "leader"}},
                    }
                ]
            }
        },
    }
    sim = run(
        node("a", cpu="2"),
        node("b", cpu="16"),
        pc,
        pod("leader", cpu="1", labels={"role": "leader"}),
        pod("follower", cpu="1", spec=follow),
    )
    assert where(sim) == {"leader": "b", "follower": "b"}


def _dra_objects(shares: int | str = 5) -> list[dict[str, Any]]:
    from gpushift.engine import GpuInfo, nvidia_resource_slice

    gpu = GpuInfo(
        minor=0,
        uuid="GPU-0",
        product_name="NVIDIA L4",
        memory_bytes=24 * 2**30,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )
    return [
        node("n1"),
        dict(nvidia_resource_slice(node_name="n1", gpus=[gpu], sharing=shares)),
        *(dict(c) for c in nvidia_device_classes()),
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                }
            },
        },
    ]


def _claim_pod(name: str, claim: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "resourceClaims": [{"name": "gpu", **claim}],
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
        },
    }


def test_template_claims_are_created_like_the_resourceclaim_controller() -> None:
    sim = run(*_dra_objects(), _claim_pod("web", {"resourceClaimTemplateName": "gpu"}))
    (claim,) = sim.outcome.claims
    meta = claim["metadata"]
    # <pod>-<podClaimName>-<5 random characters>, owned by the pod.
    assert meta["generateName"] == "web-gpu-"
    assert meta["name"].startswith("web-gpu-") and len(meta["name"]) == len("web-gpu-") + 5
    assert meta["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    # Allocated by the scheduler, so protected by its finalizer.
    assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "web",
            "uid": "uid-web",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    status = claim["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": "web", "uid": "uid-web"}]
    (result,) = status["allocation"]["devices"]["results"]
    # shares 5: default 1 share and 0 memory; shareID because the device is multi-allocatable.
    assert (result["request"], result["driver"], result["pool"], result["device"]) == (
        "g",
        "gpu.nvidia.com",
        "n1",
        "gpu-0",
    )
    assert result["consumedCapacity"] == {"memory": "0", "shares": "1"}
    assert result["shareID"]
    pod_obj = sim.outcome.pods[0].obj
    assert pod_obj["spec"]["nodeName"] == "n1"
    assert pod_obj["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": meta["name"]}
    ]


def test_shares_run_out_after_n_claims() -> None:
    # consumableShares 2: two claims fit one card, the third cannot be allocated. The
    # DynamicResources filter's statuses are UnschedulableAndUnresolvable, so preemption is
    # "not helpful" (kube-scheduler v1.37 does not preempt to make room for claims).
    sim = run(
        *_dra_objects(2),
        *(_claim_pod(f"p{i}", {"resourceClaimTemplateName": "gpu"}) for i in range(3)),
    )
    assert where(sim) == {"p0": "n1", "p1": "n1", "p2": None}
    assert message(sim, "p2") == (
        "0/1 nodes are available: 1 cannot allocate all claims. "
        f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )


def test_a_shared_claim_is_allocated_once_and_reserved_for_each_pod() -> None:
    # Exclusive mode: one card; both pods use the same named claim, so the card is enough.
    shared = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    sim = run(
        *_dra_objects("disabled"),
        shared,
        _claim_pod("a", {"resourceClaimName": "shared"}),
        _claim_pod("b", {"resourceClaimName": "shared"}),
    )
    assert where(sim) == {"a": "n1", "b": "n1"}
    (claim,) = sim.outcome.claims
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["a", "b"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert "shareID" not in result and "consumedCapacity" not in result


def _pinned_claim(node_name: str, *, reserved_for: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocation": {
            "devices": {"results": []},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}
                        ]
                    }
                ]
            },
        }
    }
    if reserved_for is not None:
        status["reservedFor"] = [
            {"resource": "pods", "name": reserved_for, "uid": f"uid-{reserved_for}"}
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "pinned", "namespace": "default"},
        "spec": {"devices": {"requests": []}},
        "status": status,
    }


def test_an_allocated_claim_in_use_pins_its_node() -> None:
    # The claim is allocated for n0 and reserved for "holder", which runs there; n0 is
    # tainted, so p fails n0 on the taint and n1 on the claim. DynamicResources' PostFilter
    # leaves a claim another pod has reserved alone.
    holder = _claim_pod("holder", {"resourceClaimName": "pinned"})
    holder["spec"]["nodeName"] = "n0"
    taint = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    sim = run(
        node("n0", taints=taint),
        node("n1"),
        _pinned_claim("n0", reserved_for="holder"),
        holder,
        _claim_pod("p", {"resourceClaimName": "pinned"}),
    )
    assert where(sim) == {"holder": "n0", "p": None}
    assert message(sim, "p") == (
        "0/2 nodes are available: 1 node(s) had untolerated taint(s), "
        "1 resourceclaim not available on the node. "
        f"preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}."
    )


def test_an_allocated_claim_nobody_uses_is_deallocated_for_the_pod() -> None:
    # The claim is allocated for a node that is gone and reserved for no pod: p fails n1 on
    # it, DynamicResources' PostFilter deallocates it ("deallocation of ResourceClaim
    # completed"), the claim's update requeues p, and p gets it allocated anew on n1.
    sim = run(node("n1"), _pinned_claim("gone"), _claim_pod("p", {"resourceClaimName": "pinned"}))
    assert where(sim) == {"p": "n1"}
    (claim,) = sim.outcome.claims
    assert "gone" not in repr(claim["status"]["allocation"])
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]


def test_missing_claim_fails_before_filtering() -> None:
    sim = run(node("n1"), _claim_pod("p", {"resourceClaimName": "nope"}))
    assert message(sim, "p") == (
        '0/1 nodes are available: resourceclaim "nope" not found. '
        f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )


def test_device_plugin_wins_where_it_advertises_and_dra_serves_elsewhere() -> None:
    # n0 advertises nvidia.com/gpu: 1 (device plugin wins there); n1 has none, so the
    # gpu.nvidia.com class (extendedResourceName nvidia.com/gpu) serves the second pod.
    objs = _dra_objects()
    objs.insert(0, node("n0", gpu=1))
    sim = run(*objs, pod("a", gpu=1), pod("b", gpu=1))
    assert where(sim) == {"a": "n0", "b": "n1"}
    a, b = sim.outcome.pods
    assert a.gpu_cards == [("main", 0)] and a.bridge is None
    assert b.bridge is not None
    claim = b.bridge.claim
    assert claim["metadata"]["generateName"] == "b-extended-resources-"
    assert claim["metadata"]["annotations"] == {
        "resource.kubernetes.io/extended-resource-claim": "true"
    }
    assert claim["metadata"]["ownerReferences"][0]["controller"] is True
    assert claim["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-0",
            "exactly": {
                "deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount",
                "count": 1,
            },
        }
    ]
    assert b.obj["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [
            {
                "containerName": "main",
                "resourceName": "nvidia.com/gpu",
                "requestName": "container-0-request-0",
            }
        ],
        "resourceClaimName": claim["metadata"]["name"],
    }
    # Not counted in the node's requests: DRA-backed names are not in allocatable.
    assert "nvidia.com/gpu" not in b.node.requested  # type: ignore[union-attr]


def test_zero_allocatable_delegates_absent_mapping_does_not() -> None:
    # allocatable 0 (a departed device plugin's stale key) no longer blocks DRA; without a
    # mapping DeviceClass the same pod is plainly Insufficient.
    objs = _dra_objects()
    objs[0] = node("n1", gpu=0)
    assert where(run(*objs, pod("a", gpu=1))) == {"a": "n1"}
    sim = run(node("n1", gpu=0), pod("a", gpu=1))
    assert message(sim, "a") == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )


def test_prebound_pods_hold_their_share() -> None:
    # A pod that already has spec.nodeName is not scheduled again but uses the GPU.
    bound = pod("bound", gpu=1, spec={"nodeName": "a"})
    sim = run(node("a", gpu=1), bound, pod("new", gpu=1))
    assert where(sim) == {"bound": "a", "new": None}


def test_a_pod_bound_to_an_unknown_node_is_reported_not_moved() -> None:
    sim = run(node("a", gpu=1), pod("p", gpu=1, spec={"nodeName": "elsewhere"}))
    (p,) = sim.pending
    assert p.obj["spec"]["nodeName"] == "elsewhere"
    assert p.message == 'bound to node "elsewhere", which is not in the input'


def test_topology_spread_do_not_schedule() -> None:
    # maxSkew 1 over hostname. p0: every node has 0 matching pods, LeastAllocated prefers the
    # big node a. p1: a would reach 1 + 1 - min(0) = 2 > 1, so b (b and c tie, name order).
    # p2: a and b would reach 2, only c keeps the skew at 1.
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
            }
        ]
    }
    sim = run(
        node("a", cpu="64"),
        node("b", cpu="2"),
        node("c", cpu="2"),
        *(pod(f"p{i}", cpu="1", labels={"app": "x"}, spec=spread) for i in range(3)),
    )
    assert where(sim) == {"p0": "a", "p1": "b", "p2": "c"}


def _deployment(replicas: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                    **(extra or {}),
                },
            },
        },
    }


def test_default_spreading_applies_to_controller_pods_only() -> None:
    # a: 64 cpu, b: 4 cpu. Bare pods follow LeastAllocated + BalancedAllocation alone: a
    # scores 197, 195, 193, 191 against b's 174, so all four go to a. Pods of one Deployment
    # also get the system default spread (hostname, maxSkew 3, weight 2): with k pods on a
    # node its raw score is round(k * ln(2 + 2) + 2); normalised, the emptier node gets 100
    # and a with 1 pod (vs 0) gets 66, with 2 (vs 1) gets 60. Totals: p1 a 197+200 vs
    # b 174+200; p2 a 195+132 vs b 174+200; p3 a 195+200 vs b 149+200; p4 a 193+120 vs
    # b 149+200. So a, b, a, b.
    nodes = [node("a", cpu="64"), node("b", cpu="4")]
    bare = run(*nodes, *(pod(f"p{i}", cpu="1") for i in range(4)))
    assert list(where(bare).values()) == ["a", "a", "a", "a"]
    deployed = run(*nodes, _deployment(4))
    assert [p.node.name for p in deployed.outcome.pods if p.node] == ["a", "b", "a", "b"]


def test_indexed_and_full_scoring_agree_on_default_spreading() -> None:
    # A preferred node-affinity term that both nodes match scores them equally (100 each)
    # but sends the pods through full per-node scoring instead of the grouped index.
    prefer = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "Exists"}
                            ]
                        },
                    }
                ]
            }
        }
    }
    sim = run(node("a", cpu="64"), node("b", cpu="4"), _deployment(4, prefer))
    assert [p.node.name for p in sim.outcome.pods if p.node] == ["a", "b", "a", "b"]


def _prio(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def test_preemption_evicts_the_lower_priority_pod() -> None:
    # The model (priority -100) holds the only GPU. The media pod (0) does not fit; without
    # the model it does, and giving the model back makes it fail again: the model is the
    # victim. No controller owns it, so kube-scheduler's deletion is the end of it: it is
    # not queued again. The List shows it as kube-scheduler left it (DisruptionTarget) and
    # the Preempted Event kube-scheduler records.
    sim = run(
        node("a", gpu=1),
        _prio("gpu-preemptible", -100),
        pod("model", gpu=1, spec={"nodeName": "a", "priorityClassName": "gpu-preemptible"}),
        pod("media", gpu=1),
    )
    assert where(sim) == {"model": None, "media": "a"}
    assert message(sim, "model") == "preempted by default/media on a"
    (card,) = sim.outcome.nodes[0].gpu.cards
    assert [t.pod for t in card.tenants] == ["default/media"]
    items = as_list(sim)["items"]
    model = next(i for i in items if i["metadata"]["name"] == "model")
    assert "nodeName" not in model["spec"]
    assert model["status"] == {
        "phase": "Failed",
        "conditions": [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "message": "default-scheduler: preempting to accommodate a higher priority pod",
            }
        ],
    }
    media_uid = next(i for i in items if i["metadata"]["name"] == "media")["metadata"]["uid"]
    (event,) = [i for i in items if i["kind"] == "Event"]
    assert (event["reason"], event["type"], event["involvedObject"]["name"]) == (
        "Preempted",
        "Normal",
        "model",
    )
    assert event["message"] == f"Preempted by pod {media_uid} on node a"


def test_a_bound_pod_of_a_controller_is_evicted_not_moved() -> None:
    # A ReplicaSet owns the running model, bound to a (one GPU) at priority -100; b's GPU is
    # held at priority 10; c has a free GPU behind a taint only the model tolerates. media
    # (priority 0) fails a and b on NodeResourcesFit and c on the taint; DefaultPreemption
    # finds a lower-priority pod only on a, so the model is the victim. kube-scheduler deletes
    # it; it is not placed again (its controller would make a new pod, which is not the model),
    # so c's card stays free.
    model = pod(
        "model",
        gpu=1,
        spec={
            "nodeName": "a",
            "priorityClassName": "gpu-preemptible",
            "tolerations": [{"key": "spare", "operator": "Exists", "effect": "NoSchedule"}],
        },
    )
    model["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "m",
            "uid": "rs",
            "controller": True,
        }
    ]
    model["status"] = {"phase": "Running"}
    sim = run(
        node("a", gpu=1),
        node("b", gpu=1),
        node("c", gpu=1, taints=[{"key": "spare", "value": "x", "effect": "NoSchedule"}]),
        _prio("gpu-preemptible", -100),
        _prio("ten", 10),
        model,
        pod("busy", gpu=1, spec={"nodeName": "b", "priorityClassName": "ten"}),
        pod("media", gpu=1),
    )
    assert where(sim) == {"model": None, "busy": "b", "media": "a"}
    assert message(sim, "model") == "preempted by default/media on a"
    assert [c.tenants for c in sim.outcome.nodes[2].gpu.cards] == [[]]
    listed = next(i for i in as_list(sim)["items"] if i["metadata"]["name"] == "model")
    assert "nodeName" not in listed["spec"]
    assert listed["status"]["phase"] == "Failed"
    assert [c["type"] for c in listed["status"]["conditions"]] == ["DisruptionTarget"]


def test_a_claim_that_does_not_fit_preempts_nobody() -> None:
    # consumableShares=memory, one card. The running model's extended-resource claim took
    # the whole memory (no memory request). The media pod has the higher priority, but
    # DynamicResources' "cannot allocate all claims" is UnschedulableAndUnresolvable
    # (statusUnschedulable in dynamicresources.go), so DefaultPreemption does not try the
    # node: the model keeps its card and the media pod stays Pending.
    objs = _dra_objects("memory")
    objs += [
        _prio("gpu-preemptible", -100),
        pod("model", gpu=1, spec={"nodeName": "n1", "priorityClassName": "gpu-preemptible"}),
        _claim_pod("media", {"resourceClaimTemplateName": "gpu"}),
    ]
    sim = run(*objs)
    assert where(sim) == {"model": "n1", "media": None}
    assert message(sim, "media") == (
        "0/1 nodes are available: 1 cannot allocate all claims. "
        f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
    )
    allocated = [c for c in sim.outcome.claims if c.get("status", {}).get("allocation")]
    assert [c["metadata"]["generateName"] for c in allocated] == ["model-extended-resources-"]
    assert allocated[0]["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"] == {
        "memory": "24Gi"
    }


def test_preemption_that_would_not_help_reports_the_filter_again() -> None:
    # Two GPUs: one held at priority 10, one at -1. A priority-5 pod wants both: evicting the
    # -1 pod frees one, still "Insufficient nvidia.com/gpu", so no preemption happens.
    sim = run(
        node("a", gpu=2),
        _prio("ten", 10),
        _prio("five", 5),
        _prio("low", -1),
        pod("high", gpu=1, spec={"nodeName": "a", "priorityClassName": "ten"}),
        pod("low", gpu=1, spec={"nodeName": "a", "priorityClassName": "low"}),
        pod("new", gpu=2, spec={"priorityClassName": "five"}),
    )
    assert where(sim) == {"high": "a", "low": "a", "new": None}
    assert message(sim, "new") == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "preemption: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )


def test_preemption_picks_the_node_with_the_least_important_victims() -> None:
    # a holds a -5 pod, b a -1 pod: the lowest highest-victim priority is on a.
    sim = run(
        node("a", gpu=1),
        node("b", gpu=1),
        _prio("m5", -5),
        _prio("m1", -1),
        pod("on-a", gpu=1, spec={"nodeName": "a", "priorityClassName": "m5"}),
        pod("on-b", gpu=1, spec={"nodeName": "b", "priorityClassName": "m1"}),
        pod("new", gpu=1),
    )
    assert where(sim) == {"on-a": None, "on-b": "b", "new": "a"}
    assert message(sim, "on-a") == "preempted by default/new on a"


def test_daemonset_pod_is_only_tried_on_its_node() -> None:
    # One pod per node, pinned by metadata.name. On c a running pod leaves 1 of 4 cpu, so
    # c's daemon pod (2 cpu) fails there; the other two nodes are left out by NodeAffinity's
    # PreFilter result ("didn't satisfy plugin(s) [NodeAffinity]", schedule_one.go).
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
            }
        },
    }
    sim = run(
        node("a", cpu="4"),
        node("b", cpu="4"),
        node("c", cpu="4"),
        pod("busy", cpu="3", spec={"nodeName": "c"}),
        ds,
    )
    placed = {p.obj["spec"].get("nodeName") for p in sim.outcome.pods if p.name != "busy"}
    assert placed == {"a", "b", None}
    (stuck,) = sim.pending
    assert stuck.message == (
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        f"preemption: 0/3 nodes are available: 1 {NO_VICTIMS}, 2 {NOT_HELPFUL}."
    )


def _preferred_anti(app: str, weight: int = 100) -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": weight,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app": app}},
                        },
                    }
                ]
            }
        }
    }


def test_preferred_anti_affinity_outweighs_least_allocated() -> None:
    # x (100m) runs on the big node a. For y (1 cpu): a scores 98 + 99 = 197 and b (4 cpu)
    # 87 + 87 = 174 on cpu/memory, so y alone goes to a. With a preferred anti-affinity of
    # weight 100 to x, InterPodAffinity gives a -100 and b 0, scaled to 0 and 100 and
    # weighted 2: b wins 374 to 197. The same holds when x carries the term about y.
    a, b = node("a", cpu="64"), node("b", cpu="4")
    x = pod("x", cpu="100m", labels={"app": "x"}, spec={"nodeName": "a"})
    assert where(run(a, b, x, pod("y", cpu="1", labels={"app": "y"})))["y"] == "a"
    y = pod("y", cpu="1", labels={"app": "y"}, spec=_preferred_anti("x"))
    assert where(run(a, b, x, y))["y"] == "b"
    x_avoids_y = pod(
        "x", cpu="100m", labels={"app": "x"}, spec={"nodeName": "a", **_preferred_anti("y")}
    )
    assert where(run(a, b, x_avoids_y, pod("y", cpu="1", labels={"app": "y"})))["y"] == "b"


def test_preferred_node_affinity_scores() -> None:
    # Weight 1 on zone=b: NodeAffinity gives b 100 and a 0, weighted 2 (+200): enough to
    # beat a's cpu/memory lead of 197 vs 174.
    prefer_b = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {
                            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]
                        },
                    }
                ]
            }
        }
    }
    sim = run(
        node("a", cpu="64", labels={"zone": "a"}),
        node("b", cpu="4", labels={"zone": "b"}),
        pod("x", cpu="100m", spec={"nodeName": "a"}),
        pod("y", cpu="1", spec=prefer_b),
    )
    assert where(sim)["y"] == "b"


def test_long_names_are_truncated_in_proportion() -> None:
    # pod 50 chars, claim 20: "<pod>-<claim>-" is 72 > 57, so the pod part keeps
    # 50 * 57 // 72 = 39 characters and the claim part 20 * 57 // 72 = 15, joined by "-"
    # (and, as upstream, without a trailing "-").
    from gpushift.engine import pod_claim_generate_name

    pod_name, claim = "p" * 50, "c" * 20
    assert pod_claim_generate_name(pod=pod_name, claim=claim) == "p" * 39 + "-" + "c" * 15
    assert pod_claim_generate_name(pod="web", claim="gpu") == "web-gpu-"


def test_live_claim_with_a_missing_class_leaves_only_its_pod_unschedulable() -> None:
    # The twin hands the scheduler live objects that were never validated as files: a claim
    # naming a DeviceClass that does not exist must not stop the other pods.
    from gpushift.engine import Inputs, schedule

    objs = _dra_objects()
    nodes = [o for o in objs if o["kind"] == "Node"]
    slices = [o for o in objs if o["kind"] == "ResourceSlice"]
    classes = [o for o in objs if o["kind"] == "DeviceClass"]

    def claim(name: str, cls: str) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": cls}}]}},
        }

    inputs = Inputs(
        nodes=nodes,
        slices=slices,
        classes=classes,
        claims=[claim("bad", "no-such-class"), claim("good", "gpu.nvidia.com")],
        pods=[
            _claim_pod("a", {"resourceClaimName": "bad"}),
            _claim_pod("b", {"resourceClaimName": "good"}),
        ],
    )
    outcome = schedule(inputs)
    placed = {p.name: (p.node.name if p.node else None) for p in outcome.pods}
    assert placed == {"a": None, "b": "n1"}
    msg = next(p.message for p in outcome.pods if p.name == "a")
    assert msg is not None and msg.startswith("0/1 nodes are available: 1 ")
    assert "no-such-class" in msg


def test_a_node_failing_the_spread_filter_is_tried_again_once_the_other_domains_catch_up() -> None:
    # maxSkew 1 over two zones of one node each; b1 takes two pods. p1 cannot join p0 in zone
    # a (skew 2), p3 cannot either (a holds p0 and p2), but once b holds two, p4 can (skew
    # 3 - 2 = 1) and b1 is full: p4 goes to a1, as kube-scheduler's filter says.
    def zone_node(name: str, zone: str, pods: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": "8", "pods": pods}},
        }

    def spread_pod(i: int, cpu: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "labels": {"app": "x"}},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "x"}},
                    }
                ],
            },
        }

    objs = [zone_node("a1", "a", "10"), zone_node("b1", "b", "2")]
    objs += [spread_pod(i, cpu) for i, cpu in enumerate(["1", "1", "2", "1", "1"])]
    sim = simulate(from_objects(objs))
    placed = {p.name: p.node.name if p.node else None for p in sim.outcome.pods}
    assert placed == {"p0": "a1", "p1": "b1", "p2": "a1", "p3": "b1", "p4": "a1"}


def test_a_cached_dra_failure_gives_way_to_the_spread_filter_that_runs_first() -> None:
    # Zone a holds a1 (one GPU, room for one pod) and a2, zone b holds b1; neither a2 nor b1
    # has a device. p0 goes to a1; its class learns that a2 and b1 cannot allocate the claim.
    # For p1, zone a holds one matching pod and b none: on a2 the skew is 1 + 1 - 0 = 2 >
    # maxSkew 1, and PodTopologySpread runs before DynamicResources, so a2 fails spreading
    # (not DRA, as the cache had it); b1 passes spreading and fails DRA; a1 is full. DRA's
    # failure is UnschedulableAndUnresolvable: preemption is "not helpful" on b1 only.
    from gpushift.engine import GpuInfo, nvidia_resource_slice

    def zone_node(name: str, zone: str, pods: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": "8", "pods": pods}},
        }

    gpu = GpuInfo(
        minor=0,
        uuid="GPU-0",
        product_name="NVIDIA L4",
        memory_bytes=24 * 2**30,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
            }
        ]
    }
    objs = [
        zone_node("a1", "a", "1"),
        zone_node("a2", "a", "10"),
        zone_node("b1", "b", "10"),
        dict(nvidia_resource_slice(node_name="a1", gpus=[gpu], sharing=5)),
        *_dra_objects()[2:],  # the DeviceClasses and the "gpu" template
    ]
    for name in ("p0", "p1"):
        p = _claim_pod(name, {"resourceClaimTemplateName": "gpu"})
        p["metadata"]["labels"] = {"app": "x"}
        p["spec"].update(spread)
        objs.append(p)
    sim = simulate(from_objects(objs))
    assert where(sim) == {"p0": "a1", "p1": None}
    assert message(sim, "p1") == (
        "0/3 nodes are available: 1 Too many pods, 1 cannot allocate all claims, "
        "1 node(s) didn't match pod topology spread constraints. preemption: 0/3 nodes are "
        f"available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}."
    )
