"""The scheduler loop: queue, filters, scoring and binding, as kube-scheduler does them.

What is modelled, and how it differs from a live kube-scheduler:

* Pods bound in the input (``spec.nodeName``) keep their node and what they hold; pods with
  ``schedulingGates`` are never tried (SchedulingGates PreEnqueue) and hold nothing.
* Queue: higher ``priority`` first (from ``spec.priority``, the PriorityClass named by
  ``spec.priorityClassName``, or the ``globalDefault`` class), then older
  ``creationTimestamp``, then input order. Each pod is tried once (preempted pods go back in
  the queue); pods with required pod affinity are retried after the others, since a later
  pod may satisfy them.
* Filters, in kube-scheduler's plugin order: NodeUnschedulable, TaintToleration, NodeAffinity
  (``nodeSelector`` and required node affinity), NodeResourcesFit (pods, cpu, memory,
  ephemeral-storage, extended resources not delegated to DRA), PodTopologySpread
  (``DoNotSchedule``), InterPodAffinity (required terms, both directions), DynamicResources
  (ResourceClaims, claims from templates, KEP-5004 extended-resource claims).
* Scoring: NodeResourcesFit LeastAllocated and NodeResourcesBalancedAllocation (v1.37: the
  balance with the pod against the node's balance without it) on cpu and memory, NodeAffinity
  (preferred), TaintToleration (``PreferNoSchedule``), PodTopologySpread
  (``ScheduleAnyway`` and the system default constraints, for pods owned by a controller) and
  InterPodAffinity (preferred terms both ways, required affinity of existing pods), with the
  default weights. Every feasible node is scored (kube-scheduler may stop at
  ``percentageOfNodesToScore``); ties go to the first node in name order (kube-scheduler picks
  one at random).
* Preemption (DefaultPreemption): a pod that fits nowhere evicts lower-priority pods from
  one node when that lets it in; victims this run placed that a controller owns return to
  the queue, as their controllers would recreate them; pods bound in the input and victims
  of no controller are gone (kube-scheduler deletes them), and the preemptor binds at once
  (kube-scheduler nominates the node and binds in a later cycle). No DRA device is freed to
  make room: nodes where only DynamicResources failed are not helped by preemption (its
  Filter statuses are UnschedulableAndUnresolvable), and a victim's claims stay allocated in
  the dry run (DynamicResources has no PreFilterExtensions). PodDisruptionBudgets are not
  modelled.
* DynamicResources PostFilter: a pod that fits nowhere because a claim it uses is allocated
  for other nodes, and reserved for no other pod, has that claim deallocated and is tried
  again.

Scale: identical pods (same namespace, labels, priority and spec) form a class. For a class
whose score depends only on cpu/memory use (and on the system default hostname spread, when no
node has a zone label), nodes are grouped by those figures, so a pod scores a few groups
instead of every node; nodes that failed a class's filters are dropped for that class (use
only grows, until a preemption frees room). Spread scores are then normalised over the nodes
not yet known to be infeasible for the class rather than over exactly the feasible ones.
"""

from __future__ import annotations

import copy
import heapq
import math
import random
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from heapq import merge
from itertools import chain
from typing import Any, cast

from gpushift.engine import _bridging, _filters, _ledger, _requests
from gpushift.engine._allocator import AllocatedState, StructuredAllocator, UnknownDeviceClassError
from gpushift.engine._cel import SelectorEvaluationError
from gpushift.engine._dra_types import AllocationResult, Node, ResourceClaim
from gpushift.engine._filters import node_selector_matches
from gpushift.engine._inputs import Inputs, content_key
from gpushift.engine._workloads import stable_suffix, stable_uid

# Status codes, as framework.Code: only the two failure codes matter here.
UNSCHEDULABLE = 1
UNRESOLVABLE = 2

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
NVIDIA_DRIVER = "gpu.nvidia.com"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

# k8s.io/kubernetes pkg/scheduler/framework/plugins/dynamicresources: Filter reasons.
REASON_DRA_ALLOCATE = "cannot allocate all claims"
REASON_DRA_NODE = "resourceclaim not available on the node"
# pkg/scheduler/framework/preemption and defaultpreemption: PostFilter messages.
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
# pkg/scheduler/apis/config/v1 default_plugins.go: score plugin weights.
_W_FIT, _W_BALANCED, _W_NODE_AFFINITY, _W_TAINT, _W_SPREAD, _W_INTERPOD = 1, 1, 2, 3, 2, 2
# Labels the StatefulSet controller sets to a different value on every pod.
_PER_POD_LABELS = ("statefulset.kubernetes.io/pod-name", "apps.kubernetes.io/pod-index")
# pkg/scheduler/apis/config/v1 defaults.go: system default topology spread constraints.
_DEFAULT_SPREAD = (
    {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
    {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
)


@dataclass(slots=True, eq=False)
class NodeInfo:
    """A node's scheduling state: what is requested, which pods run, its GPU ledger."""

    name: str
    obj: dict[str, Any]
    order: int
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    unschedulable: bool
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    nz_cpu: int = 0
    nz_mem: int = 0
    pods: list[PodInfo] = field(default_factory=list)
    gpu: _ledger.GpuLedger = field(default_factory=lambda: _ledger.GpuLedger([]))
    version: int = 0
    min_priority: int = 2**31
    #: Pods per controller uid, for the default topology spread constraints.
    owners: dict[str, int] = field(default_factory=dict)
    #: Matching pods per (namespace, selector), valid while ``version`` is unchanged.
    counts: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    def usage_key(self) -> tuple[int, ...]:
        """Everything the cpu/memory scores of a node depend on."""
        a, r = self.allocatable, self.requested
        return (
            a.get("cpu", 0),
            a.get("memory", 0),
            self.nz_cpu,
            self.nz_mem,
            r.get("cpu", 0),
            r.get("memory", 0),
        )


@dataclass(slots=True, eq=False)
class PodInfo:
    """A pod and its outcome: the node, or the FailedScheduling-style message."""

    obj: dict[str, Any]
    namespace: str
    name: str
    labels: dict[str, str]
    spec: dict[str, Any]
    priority: int
    created: str
    order: int
    requests: dict[str, int]
    nz_cpu: int
    nz_mem: int
    claims: list[tuple[str, ResourceClaim]] = field(default_factory=list)
    prefilter: str | None = None
    node: NodeInfo | None = None
    message: str | None = None
    bridge: _bridging.BridgeClaim | None = None
    gpu_cards: list[tuple[str, int]] = field(default_factory=list)
    class_key: Any = None
    owner_uid: str | None = None
    prebound: bool = False
    #: The names of the pod's scheduling gates: it is never tried while it has any.
    gates: tuple[str, ...] = ()
    #: Set on a victim: the ``namespace/name`` of the pod that preempted it, and the node.
    preempted_by: tuple[str, str] | None = None

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def has_affinity_terms(self) -> bool:
        """Whether the pod has any pod affinity or anti-affinity term."""
        aff = self.spec.get("affinity") or {}
        return bool(aff.get("podAffinity") or aff.get("podAntiAffinity"))


@dataclass(slots=True)
class Outcome:
    """The result of scheduling every pod."""

    nodes: list[NodeInfo]
    pods: list[PodInfo]
    claims: list[dict[str, Any]]
    allocator: StructuredAllocator
    state: AllocatedState


Failure = tuple[int, list[str]]
#: The view key of every node, grouped by usage key (no class keys are 1-tuples).
_ALL_NODES = ("all nodes",)
_NO_NAMES: frozenset[str] = frozenset()


def _priority(spec: Mapping[str, Any], *, classes: Mapping[str, int], default: int) -> int:
    if isinstance(spec.get("priority"), int):
        return int(spec["priority"])
    name = spec.get("priorityClassName")
    if name and name in classes:
        return classes[name]
    return default


def pod_claim_generate_name(*, pod: str, claim: str) -> str:
    """The ``generateName`` of a pod's claim from a template: ``<pod>-<claim>-``, both parts
    cut in proportion to fit 57 characters."""
    # k8s.io/kubernetes pkg/controller/resourceclaim controller.go handleClaim: both parts are
    # truncated in proportion so that the name plus 5 random characters fits 63 characters.
    generate = f"{pod}-{claim}-"
    max_base = 57
    if len(generate) > max_base:
        total = len(generate)
        generate = (
            pod[: len(pod) * max_base // total] + "-" + claim[: len(claim) * max_base // total]
        )
    return generate


@dataclass(slots=True)
class _Held:
    """What an unbound pod held: its node, claim allocations, extended-resource claim, cards."""

    node: NodeInfo
    results: list[AllocationResult | None]
    bridge: _bridging.BridgeClaim | None
    cards: tuple[list[tuple[str, int]], list[tuple[int, _ledger.Tenant]]]
    #: The claims were left allocated and reserved (a preemption dry run).
    claims_kept: bool = False


def _queue_key(pod: PodInfo) -> tuple[int, str, int]:
    # queuesort/priority_sort.go Less: higher priority first, then the earlier timestamp.
    return (-pod.priority, pod.created, pod.order)


_Entry = tuple[tuple[int, str, int], int]


class _Queue:
    """The scheduling queue: smallest entry first. The pods read in are sorted once and taken
    in turn; only pods put back (preemption victims) go through a heap."""

    __slots__ = ("_heap", "_pos", "_sorted")

    def __init__(self, entries: list[_Entry]) -> None:
        self._sorted = sorted(entries)
        self._pos = 0
        self._heap: list[_Entry] = []

    def __bool__(self) -> bool:
        return self._pos < len(self._sorted) or bool(self._heap)

    def push(self, entry: _Entry) -> None:
        heapq.heappush(self._heap, entry)

    def pop(self) -> _Entry:
        """The smallest entry (raises IndexError when empty)."""
        pos, heap = self._pos, self._heap
        if pos < len(self._sorted) and not (heap and heap[0] < self._sorted[pos]):
            self._pos = pos + 1
            return self._sorted[pos]
        return heapq.heappop(heap)


@dataclass(slots=True)
class _ClassView:
    """Nodes grouped by usage key, without those that can never fit one class of pods."""

    groups: dict[tuple[int, ...], list[tuple[str, int]]]
    node_key: dict[int, tuple[int, ...]]
    log_pos: int
    key_of: Callable[[NodeInfo], tuple[int, ...]]
    #: The class's resource score (:func:`_resource_score`) by group key: pods of one class
    #: request the same, so a group scores the same for all of them.
    scores: dict[tuple[int, ...], int] = field(default_factory=dict)

    def remove(self, node: NodeInfo, key: tuple[int, ...]) -> None:
        group = self.groups[key]
        i = bisect_left(group, (node.name, node.order))
        del group[i]
        if not group:
            del self.groups[key]


class Scheduler:
    """Schedules the pending pods of an ``Inputs`` onto its nodes. Use :func:`schedule`."""

    def __init__(
        self,
        inputs: Inputs,
        *,
        allocator: StructuredAllocator | None = None,
        full_search: bool = False,
        tie_break: random.Random | None = None,
    ) -> None:
        self.inputs = inputs
        #: Picks among equally scored nodes (and equally good preemption candidates) at
        #: random, as kube-scheduler does; None takes the first by name, reproducibly.
        self.tie_break = tie_break
        #: No classes, views or cached filter results: every pod filters and scores every
        #: node (the reference the shortcuts are tested against; same placements, slower).
        self.full_search = full_search
        self.allocator = allocator or StructuredAllocator(
            slices=cast(Any, inputs.slices), classes=cast(Any, inputs.classes)
        )
        self.state = AllocatedState()
        self.mapping = _bridging.class_mapping(inputs.classes)
        self.nodes: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        self.claims: list[dict[str, Any]] = []
        self._queue = _Queue([])
        self._by_order: dict[int, PodInfo] = {}
        #: Bound pods per priority: preemption is only tried when some have lower priority.
        self._bound_priorities: dict[int, int] = {}
        self.claims_by_key: dict[tuple[str, str], dict[str, Any]] = {}
        self.templates = {
            (t["metadata"]["namespace"], t["metadata"]["name"]): t for t in inputs.templates
        }
        self.affinity_pods: list[PodInfo] = []
        self.prefer_no_schedule = False
        self.zones = False
        self._static: dict[Any, dict[int, Failure | None]] = {}
        #: Per class, nodes it can never fit (until a preemption frees room): the failure and
        #: the node's version when it was found. The reason can go stale as use grows (a
        #: node that failed DRA may now have too many pods), so it is found again when read
        #: at a later version. The flag says the failure came from a filter after
        #: PodTopologySpread, which may fail first as the other nodes fill.
        self._dead: dict[Any, dict[int, tuple[Failure, int, bool]]] = {}
        self._views: dict[Any, _ClassView] = {}
        #: The object being read or placed, for error messages.
        self.current: dict[str, Any] | None = None
        self._class_sizes: dict[Any, int] = {}
        self._ignored_labels: frozenset[str] = frozenset()
        #: Nodes named by a node-local ResourceSlice.
        self._slice_nodes: set[str] | None = None
        self._log: list[int] = []
        self._messages: dict[Any, str] = {}
        self._specs: dict[bytes | str, tuple[dict[str, int], int, int, int, bytes | str]] = {}
        self._fit_cache: dict[Any, dict[int, tuple[int, list[AllocationResult] | None]]] = {}
        self._terms: dict[Any, _SpecTerms] = {}
        self._label_keys: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}

    # -- setup --

    def _build_nodes(self) -> None:
        ordered = sorted(self.inputs.nodes, key=lambda n: str(n["metadata"]["name"]))
        for i, n in enumerate(ordered):
            self.current = n
            meta = n.get("metadata") or {}
            spec = n.get("spec") or {}
            alloc_raw = (n.get("status") or {}).get("allocatable") or {}
            allocatable = {str(k): _requests.amount(str(k), v) for k, v in alloc_raw.items()}
            name = str(meta["name"])
            labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
            taints = list(spec.get("taints") or [])
            if any(t.get("effect") == "PreferNoSchedule" for t in taints):
                self.prefer_no_schedule = True
            if ZONE in labels:
                self.zones = True
            info = NodeInfo(
                name=name,
                obj=n,
                order=i,
                labels=labels,
                taints=taints,
                unschedulable=bool(spec.get("unschedulable")),
                allocatable=allocatable,
            )
            info.gpu = _ledger.GpuLedger.for_node(
                allocatable=_ledger.gpu_units(allocatable),
                labels=labels,
                dra_cards=self._dra_cards(n),
            )
            self.nodes.append(info)
            self.by_name[name] = info

    def _dra_cards(self, node: dict[str, Any]) -> int:
        if self._slice_nodes is None:
            self._slice_nodes = {
                str(s["spec"]["nodeName"]) for s in self.inputs.slices if s["spec"].get("nodeName")
            }
        name = str(node["metadata"]["name"])
        if name not in self._slice_nodes:
            return 0
        n = 0
        # Devices that can be allocated only: complete pools at their newest generation.
        for s in self.allocator.pools(node=cast(Node, node)).slices:
            spec = s["spec"]
            if spec.get("driver") != NVIDIA_DRIVER or spec.get("nodeName") != name:
                continue
            # Full GPUs only: gpu-<minor>, not MIG (gpu-0-mig-…) or VFIO devices.
            n += sum(
                1
                for d in spec.get("devices") or []
                if str(d.get("name", "")).removeprefix("gpu-").isdigit()
            )
        return n

    def _build_claims(self) -> None:
        for c in self.inputs.claims:
            claim = copy.deepcopy(c)
            meta = claim["metadata"]
            meta.setdefault("uid", stable_uid("ResourceClaim", meta["namespace"], meta["name"]))
            self.claims.append(claim)
            self.claims_by_key[(meta["namespace"], meta["name"])] = claim
            if (claim.get("status") or {}).get("allocation"):
                self.state.add_claim(cast(ResourceClaim, claim))

    # -- pods --

    def make_pod(self, obj: dict[str, Any], order: int, priorities: Mapping[str, int]) -> PodInfo:
        """A PodInfo with requests, priority and (template) claims resolved."""
        self.current = obj
        meta = obj.setdefault("metadata", {})
        ns = str(meta.get("namespace") or "default")
        name = str(meta.get("name"))
        if "uid" not in meta:
            meta["uid"] = stable_uid("Pod", ns, name)
        spec = obj.setdefault("spec", {})
        # Pods from one template have equal specs: what follows from the spec alone is worked
        # out once per distinct spec (same content, same key order).
        text = content_key(spec)
        shared = self._specs.get(text)
        if shared is None:
            shared = self._spec_state(spec, text, priorities)
            self._specs[text] = shared
        requests, nz_cpu, nz_mem, priority, class_text = shared
        refs = meta.get("ownerReferences")
        owners = [o for o in refs if o.get("controller")] if refs else None
        labels = meta.get("labels")
        pod = PodInfo(
            obj=obj,
            namespace=ns,
            name=name,
            labels={str(k): str(v) for k, v in labels.items()} if labels else {},
            spec=spec,
            priority=priority,
            created=str(meta.get("creationTimestamp") or ""),
            order=order,
            requests=dict(requests),
            nz_cpu=nz_cpu,
            nz_mem=nz_mem,
            owner_uid=str(owners[0].get("uid")) if owners else None,
        )
        self._resolve_claims(pod, class_text)
        return pod

    def _spec_state(
        self, spec: dict[str, Any], text: bytes | str, priorities: Mapping[str, int]
    ) -> tuple[dict[str, int], int, int, int, bytes | str]:
        """Requests, non-zero cpu and memory, priority, and the spec's part of the class key
        (the spec without ``nodeName``)."""
        requests = _requests.pod_requests(spec)
        nz = _requests.pod_non_zero_requests(spec)
        priority = _priority(spec, classes=priorities, default=priorities.get("", 0))
        if "nodeName" in spec:
            text = content_key({k: v for k, v in spec.items() if k != "nodeName"})
        return requests, nz.get("cpu", 0), nz.get("memory", 0), priority, text

    def _resolve_claims(self, pod: PodInfo, class_text: bytes | str) -> None:
        statuses: list[dict[str, str]] = []
        shared = False
        for pc in pod.spec.get("resourceClaims") or []:
            pc_name = str(pc.get("name"))
            if pc.get("resourceClaimName"):
                claim = self.claims_by_key.get((pod.namespace, str(pc["resourceClaimName"])))
                if claim is None:
                    pod.prefilter = f'resourceclaim "{pc["resourceClaimName"]}" not found'
                    continue
                shared = True
                pod.claims.append((pc_name, cast(ResourceClaim, claim)))
            elif pc.get("resourceClaimTemplateName"):
                tname = str(pc["resourceClaimTemplateName"])
                # The resourceclaim controller looks for the claim it already generated
                # (pod.status.resourceClaimStatuses) before creating one from the template.
                made = None
                status = pod.obj.get("status")
                for st in (status.get("resourceClaimStatuses") or []) if status else ():
                    if isinstance(st, dict) and st.get("name") == pc_name:
                        made = self.claims_by_key.get(
                            (pod.namespace, str(st.get("resourceClaimName")))
                        )
                        break
                if made is not None:
                    pod.claims.append((pc_name, cast(ResourceClaim, made)))
                    statuses.append(
                        {"name": pc_name, "resourceClaimName": made["metadata"]["name"]}
                    )
                    continue
                template = self.templates.get((pod.namespace, tname))
                if template is None:
                    pod.prefilter = f'resourceclaimtemplate "{tname}" not found'
                    continue
                claim = self._claim_from_template(pod, pc_name, template)
                pod.claims.append((pc_name, cast(ResourceClaim, claim)))
                statuses.append({"name": pc_name, "resourceClaimName": claim["metadata"]["name"]})
        if statuses:
            pod.obj.setdefault("status", {})["resourceClaimStatuses"] = statuses
        if not shared and pod.prefilter is None and not self.full_search:
            # Pods of one workload carry the same labels: their part of the key is made once.
            items = tuple(pod.labels.items())
            labels = self._label_keys.get(items)
            if labels is None:
                labels = tuple(sorted((k, v) for k, v in items if k not in self._ignored_labels))
                self._label_keys[items] = labels
            pod.class_key = (pod.namespace, labels, pod.priority, class_text)

    def _claim_from_template(
        self, pod: PodInfo, pc_name: str, template: dict[str, Any]
    ) -> dict[str, Any]:
        tspec = template.get("spec") or {}
        tmeta = tspec.get("metadata") or {}
        generate = pod_claim_generate_name(pod=pod.name, claim=pc_name)
        name = generate + stable_suffix(f"{pod.key}/{pc_name}")
        annotations = dict(tmeta.get("annotations") or {})
        annotations[POD_CLAIM_NAME_ANNOTATION] = pc_name
        meta: dict[str, Any] = {
            "name": name,
            "generateName": generate,
            "namespace": pod.namespace,
            "uid": stable_uid("ResourceClaim", pod.namespace, name),
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod.name,
                    "uid": pod.obj["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if tmeta.get("labels"):
            meta["labels"] = dict(tmeta["labels"])
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": meta,
            # Claims never change their spec, so claims from one template share it.
            "spec": tspec.get("spec") or {},
        }
        self.claims.append(claim)
        self.claims_by_key[(pod.namespace, name)] = claim
        return claim

    # -- filters --

    def _static_filter(self, pod: PodInfo, node: NodeInfo) -> Failure | None:
        tolerations = pod.spec.get("tolerations") or []
        if node.unschedulable and not any(
            _filters.tolerates(
                t, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
            )
            for t in tolerations
        ):
            return UNRESOLVABLE, [_filters.REASON_UNSCHEDULABLE_NODE]
        taint = _filters.untolerated_taint(node.taints, tolerations)
        if taint is not None:
            return UNRESOLVABLE, [_filters.taint_reason(taint)]
        if not _filters.node_matches_pod(pod.spec, node_name=node.name, labels=node.labels):
            return UNRESOLVABLE, [_filters.REASON_NODE_AFFINITY]
        return None

    def _delegated(self, pod: PodInfo, node: NodeInfo) -> dict[str, int]:
        if not self.mapping or not pod.requests:
            return {}
        return _bridging.delegated(
            requests={k: v for k, v in pod.requests.items() if _requests.is_extended(k)},
            allocatable=node.allocatable,
            mapping=self.mapping,
        )

    def _fit(self, pod: PodInfo, node: NodeInfo, delegated: Mapping[str, int]) -> Failure | None:
        # k8s.io/kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go fitsRequest.
        reasons: list[str] = []
        code = UNSCHEDULABLE
        alloc = node.allocatable
        if "pods" in alloc and len(node.pods) + 1 > alloc["pods"]:
            reasons.append("Too many pods")
        if not pod.requests:
            return (code, reasons) if reasons else None
        names = [n for n in ("cpu", "memory", "ephemeral-storage") if pod.requests.get(n)]
        names += sorted(
            n
            for n in pod.requests
            if n not in ("cpu", "memory", "ephemeral-storage", "pods") and n not in delegated
        )
        for name in names:
            want = pod.requests[name]
            if want <= 0:
                continue
            have = alloc.get(name, 0)
            if want > have - node.requested.get(name, 0):
                reasons.append(f"Insufficient {name}")
                if want > have:
                    code = UNRESOLVABLE
        return (code, reasons) if reasons else None

    def _dra(
        self, pod: PodInfo, node: NodeInfo, delegated: Mapping[str, int]
    ) -> tuple[Failure | None, list[AllocationResult] | None, _bridging.BridgeClaim | None]:
        claims: list[ResourceClaim] = []
        labels = node.labels
        allocated = 0
        for _, claim in pod.claims:
            status = claim.get("status")
            alloc = status.get("allocation") if status else None
            if alloc:
                allocated += 1
                ns = alloc.get("nodeSelector")
                if ns is not None and not node_selector_matches(ns, name=node.name, labels=labels):
                    return (UNRESOLVABLE, [REASON_DRA_NODE]), None, None
            claims.append(claim)
        bridge = None
        if delegated:
            bridge = _bridging.bridge_claim(pod=pod.obj, resources=delegated, mapping=self.mapping)
            claims.append(cast(ResourceClaim, bridge.claim))
            if (bridge.claim.get("status") or {}).get("allocation"):
                allocated += 1
        if not claims:
            return None, [], None
        if allocated == len(claims):
            return None, [], bridge
        try:
            result = self.allocator.allocate(
                claims=claims, node=cast(Node, node.obj), state=self.state
            )
        except (SelectorEvaluationError, UnknownDeviceClassError) as err:
            # Inputs read from files are checked up front (exit 2); live objects (the twin)
            # are not, and a missing class leaves only this pod unschedulable, as upstream.
            reason = err.message if isinstance(err, UnknownDeviceClassError) else str(err)
            return (UNRESOLVABLE, [reason]), None, None
        if result is None:
            # dynamicresources Filter: statusUnschedulable is UnschedulableAndUnresolvable, so
            # DefaultPreemption never evicts pods to make room for claims.
            return (UNRESOLVABLE, [REASON_DRA_ALLOCATE]), None, None
        return None, result, bridge

    def _filter(
        self, pod: PodInfo, node: NodeInfo, ctx: _Context
    ) -> tuple[Failure | None, list[AllocationResult] | None, _bridging.BridgeClaim | None]:
        key = pod.class_key
        stale = False
        if key is not None and not ctx.needs_affinity:
            dead = self._dead.setdefault(key, {})
            hit = dead.get(node.order)
            if hit is not None:
                if hit[1] == node.version:
                    if hit[2] and ctx.spread_hard:
                        # The skew depends on the other nodes' pods: the spreading filter,
                        # which runs first, may fail now where it passed then.
                        spread = ctx.spread_filter(node)
                        if spread is not None:
                            return spread, None, None
                    return hit[0], None, None
                stale = True
        static_cache = self._static.setdefault(key, {}) if key is not None else {}
        if node.order in static_cache:
            failure = static_cache[node.order]
        else:
            failure = self._static_filter(pod, node)
            if key is not None:
                static_cache[node.order] = failure
        late = False
        if failure is None:
            delegated = self._delegated(pod, node)
            failure = self._fit(pod, node, delegated)
            late = failure is None
            if failure is None and ctx.spread_hard:
                failure = ctx.spread_filter(node)
                if failure is not None:
                    # The skew depends on every node's pods (the smallest domain grows), so a
                    # node that fails it may pass later: not a failure for good.
                    if stale:
                        del self._dead[key][node.order]
                    return failure, None, None
            if failure is None and ctx.checks_affinity:
                failure = ctx.affinity_filter(node)
            if failure is None:
                cache = self._fit_cache.setdefault(key, {}) if key is not None else None
                if cache is not None and not delegated:
                    hit2 = cache.get(node.order)
                    if hit2 is not None and hit2[0] == node.version:
                        return None, hit2[1], None
                failure, results, bridge = self._dra(pod, node, delegated)
                if failure is None:
                    if cache is not None and not delegated:
                        cache[node.order] = (node.version, results)
                    if stale:
                        del self._dead[key][node.order]
                    return None, results, bridge
        if key is not None and not ctx.needs_affinity:
            self._dead.setdefault(key, {})[node.order] = (failure, node.version, late)
        return failure, None, None

    def _dead_failures(self, pod: PodInfo, ctx: _Context) -> dict[int, Failure]:
        """The failures of the nodes the pod's class can never fit, each as of now."""
        dead = self._dead.get(pod.class_key, {})
        out: dict[int, Failure] = {}
        for order, (failure, version, late) in list(dead.items()):
            node = self.nodes[order]
            if version != node.version or (late and ctx.spread_hard):
                found = self._filter(pod, node, ctx)[0]
                if found is None:
                    continue
                failure = found
            out[order] = failure
        return out

    # -- the loop --

    def run(self) -> Outcome:
        """Schedule every pod without ``spec.nodeName``; returns nodes, pods and claims."""
        self._build_nodes()
        self._build_claims()
        priorities: dict[str, int] = {}
        for pc in self.inputs.priority_classes:
            priorities[str(pc["metadata"]["name"])] = int(pc["value"])
            if pc.get("globalDefault"):
                priorities[""] = int(pc["value"])
        # Labels unique to each pod keep identical StatefulSet pods apart; unless some pod
        # selects on them, they do not change where a pod may go.
        text = repr([(p.get("spec") or {}).get("affinity") for p in self.inputs.pods])
        text += repr(
            [(p.get("spec") or {}).get("topologySpreadConstraints") for p in self.inputs.pods]
        )
        self._ignored_labels = frozenset(k for k in _PER_POD_LABELS if k not in text)
        pods = [self.make_pod(p, i, priorities) for i, p in enumerate(self.inputs.pods)]
        for p in pods:
            gates = p.spec.get("schedulingGates")
            if gates and not p.spec.get("nodeName"):
                # kube-scheduler SchedulingGates PreEnqueue: the pod never enters the queue.
                p.gates = tuple(str(g.get("name")) for g in gates)
                p.message = f"waiting for scheduling gates: [{' '.join(p.gates)}]"
            elif p.class_key is not None and not p.spec.get("nodeName"):
                self._class_sizes[p.class_key] = self._class_sizes.get(p.class_key, 0) + 1
        for pod in pods:
            node_name = pod.spec.get("nodeName")
            if node_name and node_name in self.by_name:
                pod.prebound = True
                node = self.by_name[node_name]
                _, results, bridge = self._dra(pod, node, self._delegated(pod, node))
                self._bind(pod, node, results=results, bridge=bridge)
            elif node_name:
                # The scheduler never touches a pod that names its node; without that node in
                # the input nothing can run it.
                pod.prebound = True
                pod.message = f'bound to node "{node_name}", which is not in the input'
        self._queue = _Queue(
            [(_queue_key(p), p.order) for p in pods if not p.prebound and not p.gates]
        )
        self._by_order = {p.order: p for p in pods}
        retry: list[PodInfo] = []
        self._drain(retry)
        progress = True
        while retry and progress:
            progress = False
            for pod in list(retry):
                if self._schedule_one(pod):
                    retry.remove(pod)
                    progress = True
            self._drain(retry)  # pods preempted by the retried ones
        return Outcome(self.nodes, pods, self.claims, self.allocator, self.state)

    def _drain(self, retry: list[PodInfo]) -> None:
        # Pods with required pod affinity that fail wait in ``retry`` for later pods.
        while self._queue:
            _, order = self._queue.pop()
            pod = self._by_order[order]
            if (
                not self._schedule_one(pod)
                and _filters.required_terms(pod.spec, "podAffinity")
                and pod not in retry
            ):
                retry.append(pod)

    def _schedule_one(self, pod: PodInfo) -> bool:
        self.current = pod.obj
        n = len(self.nodes)
        if pod.prefilter is not None:
            pod.message = (
                f"0/{n} nodes are available: {pod.prefilter}. "
                f"preemption: 0/{n} nodes are available: {n} {NOT_HELPFUL}."
            )
            return False
        ctx = _Context(self, pod)
        plain = ctx.plain and not self.full_search
        chosen = self._pick_plain(pod, ctx) if plain else self._pick_scored(pod, ctx)
        if chosen is None:
            chosen = self._preempt(pod, ctx)
        if chosen is None and self._deallocate_unavailable(pod, ctx):
            # The claim's update requeues the pod: it is tried again, with the claim free.
            return self._schedule_one(pod)
        if chosen is None:
            pod.message = self._fit_error(pod, ctx)
            return False
        node, results, bridge = chosen
        self._bind(pod, node, results=results, bridge=bridge)
        pod.message = None
        return True

    def _deallocate_unavailable(self, pod: PodInfo, ctx: _Context) -> bool:
        """DynamicResources PostFilter: deallocate one claim of the pod that is allocated for
        other nodes than some it was filtered on, when no other pod has it reserved. Returns
        whether one was."""
        # k8s.io/kubernetes pkg/scheduler/framework/plugins/dynamicresources PostFilter,
        # deallocateOrDeletePodClaims: the claims Filter found "not available on the node".
        failures = self._dead_failures(pod, ctx) if ctx.all_dead else ctx.failures
        tried = [self.nodes[order] for order, f in failures.items() if REASON_DRA_NODE in f[1]]
        if not tried:
            return False
        uid = pod.obj["metadata"]["uid"]
        for _, claim in pod.claims:
            status = cast(dict[str, Any], claim).get("status") or {}
            alloc = status.get("allocation")
            selector = alloc.get("nodeSelector") if alloc else None
            if selector is None or all(
                node_selector_matches(selector, name=n.name, labels=n.labels) for n in tried
            ):
                continue
            if any(r.get("uid") != uid for r in status.get("reservedFor") or []):
                continue
            status.pop("allocation")
            status.pop("reservedFor", None)
            self.state.remove(cast(AllocationResult, alloc))
            return True
        return False

    def _view(self, key: Any, key_of: Callable[[NodeInfo], tuple[int, ...]]) -> _ClassView:
        view = self._views.get(key)
        if view is None:
            groups: dict[tuple[int, ...], list[tuple[str, int]]] = {}
            node_key: dict[int, tuple[int, ...]] = {}
            for n in self.nodes:  # in name order, so every group list starts sorted
                k = key_of(n)
                node_key[n.order] = k
                groups.setdefault(k, []).append((n.name, n.order))
            view = _ClassView(groups, node_key, len(self._log), key_of)
            self._views[key] = view
        # Replay the binds since this class last looked, moving changed nodes between groups.
        log = self._log
        while view.log_pos < len(log):
            order = log[view.log_pos]
            view.log_pos += 1
            old = view.node_key.get(order)
            if old is None:
                continue
            node = self.nodes[order]
            new = view.key_of(node)
            if new != old:
                view.remove(node, old)
                view.node_key[order] = new
                insort(view.groups.setdefault(new, []), (node.name, order))
        return view

    def _pick_plain(
        self, pod: PodInfo, ctx: _Context
    ) -> tuple[NodeInfo, list[AllocationResult] | None, _bridging.BridgeClaim | None] | None:
        # Nodes are grouped by everything the cpu/memory scores depend on, so one score per
        # group orders all nodes; a class of identical pods drops nodes that can never fit it.
        view = None
        if pod.class_key is not None and self._class_sizes.get(pod.class_key, 0) > 1:
            if ctx.spread_default:
                owner = pod.owner_uid or ""
                view = self._view(pod.class_key, lambda n: (*n.usage_key(), n.owners.get(owner, 0)))
            else:
                view = self._view(pod.class_key, NodeInfo.usage_key)
        # Pods of no class (or a class of one) see every node, grouped the same way.
        groups = (view or self._view(_ALL_NODES, NodeInfo.usage_key)).groups
        spread: dict[tuple[int, ...], int] = {}
        if ctx.spread_default and view is not None:
            # podtopologyspread scoring for the system default hostname constraint (maxSkew 3)
            # when no node has a zone label: raw = round(count * ln(nodes + 2) + 2), then
            # normalised over the nodes not known to be infeasible for this class.
            weight = math.log(len(view.node_key) + 2)
            raw = {k: round(k[-1] * weight + 2) for k in groups}
            hi, lo = (max(raw.values()), min(raw.values())) if raw else (0, 0)
            spread = {k: 100 if hi == 0 else 100 * (hi + lo - r) // hi for k, r in raw.items()}
        scored: dict[int, list[tuple[int, ...]]] = {}
        known = view.scores if view is not None else None
        for key in groups:
            if known is None:
                score = _resource_score(pod, key[:6])
            else:
                score = known.get(key, -1)
                if score < 0:
                    score = known[key] = _resource_score(pod, key[:6])
            if spread:
                score += spread.get(key, 0) * _W_SPREAD
            scored.setdefault(score, []).append(key)
        dead: list[int] = []
        chosen = None
        for score in sorted(scored, reverse=True):
            lists = [groups[k] for k in scored[score]]
            walk: Iterable[tuple[str, int]] = lists[0]
            if self.tie_break is not None:
                # The first feasible node of a random order: uniform among the feasible ones.
                shuffled = [e for group in lists for e in group]
                self.tie_break.shuffle(shuffled)
                walk = shuffled
            elif len(lists) > 1:
                # Name order across the groups; the first node usually fits, so it is tried
                # before any merging. Groups are never empty and a node is in one group.
                first = min(lists)[0]
                walk = chain((first,), (e for e in merge(*lists) if e != first))
            for _name, order in walk:
                node = self.nodes[order]
                failure, results, bridge = self._filter(pod, node, ctx)
                if failure is None:
                    chosen = (node, results, bridge)
                    break
                ctx.failures[order] = failure
                dead.append(order)
            if chosen is not None:
                break
        if view is not None:
            # Removed after the walk: the group lists must not change while being iterated.
            for order in dead:
                view.remove(self.nodes[order], view.node_key.pop(order))
            if chosen is None:
                ctx.all_dead = True
        return chosen

    def _pick_scored(
        self, pod: PodInfo, ctx: _Context
    ) -> tuple[NodeInfo, list[AllocationResult] | None, _bridging.BridgeClaim | None] | None:
        feasible: list[tuple[NodeInfo, list[AllocationResult] | None, Any]] = []
        nodes = self.nodes
        if ctx.only_nodes is not None:
            # nodeaffinity PreFilter: a pod pinned by metadata.name (a DaemonSet pod) is only
            # filtered on the nodes it names.
            nodes = [self.by_name[n] for n in sorted(ctx.only_nodes) if n in self.by_name]
        for node in nodes:
            failure, results, bridge = self._filter(pod, node, ctx)
            if failure is None:
                feasible.append((node, results, bridge))
            else:
                ctx.failures[node.order] = failure
        if not feasible:
            return None
        scores = ctx.scores([f[0] for f in feasible])
        if self.tie_break is not None:
            top = max(scores)
            return self.tie_break.choice(
                [f for f, s in zip(feasible, scores, strict=True) if s == top]
            )
        best = max(range(len(feasible)), key=lambda i: (scores[i], -feasible[i][0].order))
        return feasible[best]

    def _fit_error(self, pod: PodInfo, ctx: _Context) -> str:
        # k8s.io/kubernetes pkg/scheduler/framework types.go FitError.Error: reasons counted,
        # formatted "<count> <reason>" and sorted as strings; then DefaultPreemption's message.
        memo = (
            (pod.class_key, len(self._log)) if pod.class_key is not None and not ctx.post else None
        )
        if memo is not None and memo in self._messages:
            return self._messages[memo]
        message = self._fit_error_text(pod, ctx)
        if memo is not None:
            self._messages[memo] = message
        return message

    def _fit_error_text(self, pod: PodInfo, ctx: _Context) -> str:
        if ctx.all_dead:
            ctx.failures = self._dead_failures(pod, ctx)
        n = len(self.nodes)
        if n == 0:
            return "no nodes available to schedule pods"
        counts: dict[str, int] = {}
        post: dict[str, int] = {}
        for node in self.nodes:
            failure = ctx.failures.get(node.order)
            if failure is None and ctx.only_nodes is not None and node.name not in ctx.only_nodes:
                failure = (UNRESOLVABLE, [_filters.REASON_PREFILTER_NODE_AFFINITY])
            if failure is None:
                continue
            code, reasons = failure
            for r in reasons:
                counts[r] = counts.get(r, 0) + 1
            if code == UNRESOLVABLE:
                msgs = [NOT_HELPFUL]
            elif node.order in ctx.post:
                msgs = ctx.post[node.order][1]
            else:
                msgs = [NO_VICTIMS]
            for msg in msgs:
                post[msg] = post.get(msg, 0) + 1
        filt = ", ".join(sorted(f"{v} {k}" for k, v in counts.items()))
        pre = ", ".join(sorted(f"{v} {k}" for k, v in post.items()))
        return f"0/{n} nodes are available: {filt}. preemption: 0/{n} nodes are available: {pre}."

    # -- binding --

    def _bind(
        self,
        pod: PodInfo,
        node: NodeInfo,
        *,
        results: Sequence[AllocationResult | None] | None,
        bridge: _bridging.BridgeClaim | None,
        held_cards: tuple[list[tuple[str, int]], list[tuple[int, _ledger.Tenant]]] | None = None,
        claims_kept: bool = False,
    ) -> None:
        delegated = {m["resourceName"] for m in bridge.mappings} if bridge else _NO_NAMES
        if pod.requests:
            requested = node.requested
            for name, amount in pod.requests.items():
                if name in delegated:
                    continue
                requested[name] = requested.get(name, 0) + amount
        node.nz_cpu += pod.nz_cpu
        node.nz_mem += pod.nz_mem
        node.pods.append(pod)
        node.version += 1
        priority = pod.priority
        if priority < node.min_priority:
            node.min_priority = priority
        bound = self._bound_priorities
        bound[priority] = bound.get(priority, 0) + 1
        if pod.owner_uid is not None:
            node.owners[pod.owner_uid] = node.owners.get(pod.owner_uid, 0) + 1
        self._log.append(node.order)
        if pod.has_affinity_terms:
            self.affinity_pods.append(pod)
        pod.node = node
        if held_cards is not None:
            # Given back after a preemption dry run: the same units on the same cards.
            pod.gpu_cards, tenants = held_cards
            for i, tenant in tenants:
                node.gpu.cards[i].tenants.append(tenant)
        elif pod.requests and any(
            pod.requests.get(r) and r not in delegated for r in _ledger.GPU_RESOURCES
        ):
            self._assign_cards(pod, node)
        if not claims_kept:
            self._bind_claims(pod, results, bridge)
        spec = pod.obj["spec"]
        spec["nodeName"] = node.name
        status = pod.obj.setdefault("status", {})
        status.setdefault("phase", "Pending")
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]

    def _bind_claims(
        self,
        pod: PodInfo,
        results: Sequence[AllocationResult | None] | None,
        bridge: _bridging.BridgeClaim | None,
    ) -> None:
        claims = [c for _, c in pod.claims]
        if bridge is not None:
            # A pod read back from a dump names the claim made for it already
            # (status.extendedResourceClaimStatus): that claim, allocated, is the pod's.
            named = ((pod.obj.get("status") or {}).get("extendedResourceClaimStatus") or {}).get(
                "resourceClaimName"
            )
            made = self.claims_by_key.get((pod.namespace, str(named))) if named else None
            if made is not None:
                bridge = _bridging.BridgeClaim(made, bridge.mappings)
                claims.append(cast(ResourceClaim, made))
            else:
                claims.append(cast(ResourceClaim, bridge.claim))
                self.claims.append(bridge.claim)
            pod.bridge = bridge
            pod.obj.setdefault("status", {})["extendedResourceClaimStatus"] = (
                _bridging.status_entry(bridge)
            )
        uid = pod.obj["metadata"]["uid"]
        for i, claim in enumerate(claims):
            status = cast(dict[str, Any], claim).setdefault("status", {})
            result = results[i] if results is not None and i < len(results) else None
            if result is not None and not status.get("allocation"):
                status["allocation"] = result
                self.state.add(result)
                # dynamicresources PreBind: an allocated claim is protected from deletion.
                finalizers = cast(dict[str, Any], claim)["metadata"].setdefault("finalizers", [])
                if _bridging.FINALIZER not in finalizers:
                    finalizers.append(_bridging.FINALIZER)
            reserved = status.get("reservedFor")
            if reserved is None:
                reserved = status["reservedFor"] = []
            # A claim read back from a dump is already reserved for its pod: reserve once.
            if not reserved or not any(
                r.get("uid") == uid for r in reserved if isinstance(r, dict)
            ):
                reserved.append({"resource": "pods", "name": pod.name, "uid": uid})

    def _unbind(self, pod: PodInfo, *, keep_claims: bool = False) -> _Held:
        """Take a bound pod off its node, releasing what it holds; returns what to give back.

        With ``keep_claims`` (a preemption dry run) its claims stay allocated and reserved:
        DynamicResources has no PreFilterExtensions, so removing a pod frees no device.
        """
        node = pod.node
        assert node is not None
        bridge = pod.bridge
        delegated = {m["resourceName"] for m in bridge.mappings} if bridge else set()
        for name, amount in pod.requests.items():
            if name not in delegated:
                node.requested[name] = node.requested.get(name, 0) - amount
        node.nz_cpu -= pod.nz_cpu
        node.nz_mem -= pod.nz_mem
        node.pods.remove(pod)
        node.version += 1
        node.min_priority = min((p.priority for p in node.pods), default=2**31)
        self._bound_priorities[pod.priority] -= 1
        if pod.owner_uid is not None:
            node.owners[pod.owner_uid] -= 1
        self._log.append(node.order)
        if pod in self.affinity_pods:
            self.affinity_pods.remove(pod)
        cards = list(pod.gpu_cards)
        pod.gpu_cards = []
        tenants: list[tuple[int, _ledger.Tenant]] = []
        for card in node.gpu.cards:
            tenants += [(card.index, t) for t in card.tenants if t.pod == pod.key]
            card.tenants = [t for t in card.tenants if t.pod != pod.key]
        if keep_claims:
            pod.node = None
            self._invalidate(node)
            return _Held(node, [], bridge, (cards, tenants), claims_kept=True)
        claims = [c for _, c in pod.claims]
        if bridge is not None:
            claims.append(cast(ResourceClaim, bridge.claim))
            self.claims = [c for c in self.claims if c is not bridge.claim]
            pod.bridge = None
            pod.obj.get("status", {}).pop("extendedResourceClaimStatus", None)
        released: list[AllocationResult | None] = []
        uid = pod.obj["metadata"]["uid"]
        for claim in claims:
            status = cast(dict[str, Any], claim).setdefault("status", {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            status["reservedFor"] = reserved
            alloc = None
            # The resourceclaim controller deallocates a claim nobody reserves any more.
            if not reserved and status.get("allocation"):
                alloc = status.pop("allocation")
                self.state.remove(alloc)
                del status["reservedFor"]
            released.append(alloc)
        pod.node = None
        pod.obj["spec"].pop("nodeName", None)
        pod.obj.get("status", {}).pop("conditions", None)
        self._invalidate(node)
        return _Held(node, released, bridge, (cards, tenants))

    def _restore(self, pod: PodInfo, held: _Held) -> None:
        self._bind(
            pod,
            held.node,
            results=held.results,
            bridge=held.bridge,
            held_cards=held.cards,
            claims_kept=held.claims_kept,
        )

    def _invalidate(self, node: NodeInfo) -> None:
        # Use fell, so what could not fit this node before may fit now.
        for dead in self._dead.values():
            dead.pop(node.order, None)
        for view in self._views.values():
            if node.order not in view.node_key:
                k = view.key_of(node)
                view.node_key[node.order] = k
                insort(view.groups.setdefault(k, []), (node.name, node.order))

    def _check(
        self, pod: PodInfo, node: NodeInfo
    ) -> tuple[Failure | None, list[AllocationResult] | None, _bridging.BridgeClaim | None]:
        """Every filter on one node, from the current state and without caches."""
        ctx = _Context(self, pod)
        failure = self._static_filter(pod, node)
        if failure is None:
            delegated = self._delegated(pod, node)
            failure = (
                self._fit(pod, node, delegated)
                or ctx.spread_filter(node)
                or ctx.affinity_filter(node)
            )
            if failure is None:
                return self._dra(pod, node, delegated)
        return failure, None, None

    def _preempt(
        self, pod: PodInfo, ctx: _Context
    ) -> tuple[NodeInfo, list[AllocationResult] | None, _bridging.BridgeClaim | None] | None:
        """DefaultPreemption: evict lower-priority pods from one node if that lets ``pod`` in.

        Per node (defaultpreemption SelectVictimsOnNode): remove every pod of lower priority;
        if the pod then fits, add them back most important first while it still fits; the
        rest are victims. The node whose victims have the lowest highest priority, then the
        lowest priority sum, then the fewest victims, then the first name, is chosen
        (pickOneNodeForPreemption). The dry run frees no DRA device: the victims' claims stay
        allocated (DynamicResources has no PreFilterExtensions to remove a pod), so a pod
        that needs a device only a victim holds preempts nobody. Victims this run placed and
        a controller owns go back to the queue, as their controllers would recreate them; a
        pod bound in the input is evicted, never placed again, and so is a victim of no
        controller.
        """
        if not any(n and prio < pod.priority for prio, n in self._bound_priorities.items()):
            return None
        if ctx.all_dead:
            # Dry runs release pods and so clear the class's cached failures: keep a copy.
            ctx.failures = self._dead_failures(pod, ctx)
            ctx.all_dead = False
        failures = ctx.failures
        candidates: list[tuple[tuple[int, int, int, int], NodeInfo, list[PodInfo]]] = []
        for node in self.nodes:
            failure = failures.get(node.order)
            if failure is None or failure[0] == UNRESOLVABLE:
                continue
            lower = [p for p in node.pods if p.priority < pod.priority]
            if not lower:
                continue
            important = sorted(lower, key=lambda p: (-p.priority, p.order))
            held = {p.order: self._unbind(p, keep_claims=True) for p in important}
            dry, _, _ = self._check(pod, node)
            victims: list[PodInfo] = []
            if dry is None:
                for p in important:
                    self._restore(p, held.pop(p.order))
                    if self._check(pod, node)[0] is not None:
                        held[p.order] = self._unbind(p, keep_claims=True)
                        victims.append(p)
            else:
                ctx.post[node.order] = dry
            for p in reversed(important):
                if p.order in held:
                    self._restore(p, held.pop(p.order))
            if dry is None and victims:
                prios = [v.priority for v in victims]
                key = (max(prios), sum(prios), len(victims), node.order)
                candidates.append((key, node, victims))
        if not candidates:
            return None
        if self.tie_break is not None:
            # pickOneNodeForPreemption takes the first of equal candidates, found from a
            # random offset.
            least = min(c[0][:3] for c in candidates)
            _, node, victims = self.tie_break.choice([c for c in candidates if c[0][:3] == least])
        else:
            _, node, victims = min(candidates, key=lambda c: c[0])
        for v in victims:
            self._unbind(v)
            v.message = f"preempted by {pod.key} on {node.name}"
            v.preempted_by = (pod.key, node.name)
            # preemption executor: the victim is deleted. A controller makes a pod in its
            # place, which queues like the victim; a pod of no controller is gone. A pod that
            # was running (bound in the input) is not moved: it stays evicted.
            if v.owner_uid is not None and not v.prebound:
                self._queue.push((_queue_key(v), v.order))
        failure, results, bridge = self._check(pod, node)
        if failure is not None:
            return None
        return node, results, bridge

    def _assign_cards(self, pod: PodInfo, node: NodeInfo) -> None:
        shared: list[int] = []
        init_names: list[str] = []
        for c in _requests.all_containers(pod.spec):
            want = _ledger.gpu_units(_requests.container_requests(c))
            if want <= 0:
                continue
            name = str(c.get("name"))
            is_init = c in (pod.spec.get("initContainers") or []) and not _requests.is_sidecar(c)
            if is_init:
                init_names.append(name)
                continue
            cards = node.gpu.assign(pod=pod.key, container=name, count=want)
            shared.extend(cards)
            pod.gpu_cards.extend((name, i) for i in cards)
        # Classic init containers run before the app containers and reuse their devices.
        for name in init_names:
            if shared:
                pod.gpu_cards.append((name, shared[0]))
            else:
                cards = node.gpu.assign(pod=pod.key, container=name, count=1)
                pod.gpu_cards.extend((name, i) for i in cards)


def _pinned_nodes(spec: Mapping[str, Any]) -> set[str] | None:
    """Node names every required node-affinity term pins with ``metadata.name In``, or None."""
    # pkg/scheduler/framework/plugins/nodeaffinity PreFilter: the In requirements of a term
    # intersect, the terms unite; a term without one leaves every node.
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return None
    names: set[str] = set()
    for term in terms:
        pinned = [
            {str(v) for v in f.get("values") or []}
            for f in term.get("matchFields") or []
            if f.get("key") == "metadata.name" and f.get("operator") == "In"
        ]
        if not pinned:
            return None
        names |= set.intersection(*pinned)
    return names


def _least_allocated(requested: int, capacity: int) -> int:
    # noderesources/least_allocated.go leastRequestedScore.
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * 100 // capacity


def _balanced(fractions: Sequence[float]) -> int:
    # noderesources/balanced_allocation.go balancedResourceScore.
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * 100)


def _resource_score(pod: PodInfo, key: tuple[int, ...]) -> int:
    """LeastAllocated + BalancedAllocation (weighted) for a node with this usage key."""
    a_cpu, a_mem, nz_cpu, nz_mem, r_cpu, r_mem = key
    least = (
        _least_allocated(nz_cpu + pod.nz_cpu, a_cpu) + _least_allocated(nz_mem + pod.nz_mem, a_mem)
    ) // 2
    score = least * _W_FIT
    p_cpu, p_mem = pod.requests.get("cpu", 0), pod.requests.get("memory", 0)
    if p_cpu or p_mem:
        # noderesources/balanced_allocation.go balancedResourceScorer (v1.37): the balance with
        # the pod against the balance without it, brought back to [50, 100]; about 75 when
        # the pod changes little.
        usage = ((r_cpu, p_cpu, a_cpu), (r_mem, p_mem, a_mem))
        with_pod = _balanced([min((r + p) / a, 1.0) for r, p, a in usage if a])
        without = _balanced([min(r / a, 1.0) for r, _, a in usage if a])
        score += (50 + (50 + with_pod - without) // 2) * _W_BALANCED
    return score


@dataclass(frozen=True, slots=True)
class _SpecTerms:
    """The affinity, spreading and pinning terms of a pod spec (read, never changed)."""

    req_aff: list[Mapping[str, Any]]
    req_anti: list[Mapping[str, Any]]
    pref_aff: list[tuple[int, Mapping[str, Any]]]
    pref_anti: list[tuple[int, Mapping[str, Any]]]
    pref_node: list[Mapping[str, Any]]
    explicit: list[Mapping[str, Any]]
    spread_hard: list[Mapping[str, Any]]
    spread_soft: list[Mapping[str, Any]]
    only_nodes: set[str] | None

    @staticmethod
    def of(spec: Mapping[str, Any]) -> _SpecTerms:
        explicit = list(spec.get("topologySpreadConstraints") or [])
        return _SpecTerms(
            req_aff=_filters.required_terms(spec, "podAffinity"),
            req_anti=_filters.required_terms(spec, "podAntiAffinity"),
            pref_aff=_filters.preferred_terms(spec, "podAffinity"),
            pref_anti=_filters.preferred_terms(spec, "podAntiAffinity"),
            pref_node=list(
                ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                    "preferredDuringSchedulingIgnoredDuringExecution"
                )
                or []
            ),
            explicit=explicit,
            spread_hard=[c for c in explicit if c.get("whenUnsatisfiable") == "DoNotSchedule"],
            spread_soft=[
                c
                for c in explicit
                if c.get("whenUnsatisfiable", "DoNotSchedule") == "ScheduleAnyway"
            ],
            only_nodes=_pinned_nodes(spec),
        )


class _Context:
    """Per-pod data for one scheduling attempt: affinity and spreading state, failures."""

    # One is made per pod and attempt: slots make that and every read cheaper.
    __slots__ = (
        "_aff_domains",
        "_anti_domains",
        "_existing_anti",
        "all_dead",
        "checks_affinity",
        "failures",
        "needs_affinity",
        "only_nodes",
        "plain",
        "pod",
        "post",
        "pref_aff",
        "pref_anti",
        "pref_node",
        "req_aff",
        "req_anti",
        "sched",
        "spread_default",
        "spread_hard",
        "spread_soft",
    )

    def __init__(self, sched: Scheduler, pod: PodInfo) -> None:
        self.sched = sched
        self.pod = pod
        self.failures: dict[int, Failure] = {}
        self.all_dead = False
        #: Preemption dry-run failures by node (the filter status with victims removed).
        self.post: dict[int, Failure] = {}
        # What follows from the spec alone is shared by the pods of a class.
        terms = sched._terms.get(pod.class_key) if pod.class_key is not None else None
        if terms is None:
            terms = _SpecTerms.of(pod.spec)
            if pod.class_key is not None:
                sched._terms[pod.class_key] = terms
        self.req_aff = terms.req_aff
        self.req_anti = terms.req_anti
        self.pref_aff = terms.pref_aff
        self.pref_anti = terms.pref_anti
        self.pref_node = terms.pref_node
        explicit = terms.explicit
        self.spread_hard = terms.spread_hard
        self.spread_soft = terms.spread_soft
        self.spread_default = not explicit and pod.owner_uid is not None
        self.needs_affinity = bool(self.req_aff)
        #: Whether the InterPodAffinity filter can fail at all.
        self.checks_affinity = bool(self.req_aff or self.req_anti or sched.affinity_pods)
        self.only_nodes = terms.only_nodes
        self.plain = not (
            self.req_aff
            or self.req_anti
            or self.pref_aff
            or self.pref_anti
            or self.pref_node
            or explicit
            or (
                self.spread_default
                and (sched.zones or sched._class_sizes.get(pod.class_key, 0) < 2)
            )
            or sched.affinity_pods
            or sched.prefer_no_schedule
        )
        self._aff_domains: list[tuple[str, set[str], bool]] | None = None
        self._anti_domains: list[tuple[str, set[str]]] | None = None
        self._existing_anti: list[tuple[str, str]] | None = None

    # -- InterPodAffinity filter --

    def _domains(self, term: Mapping[str, Any]) -> tuple[set[str], bool]:
        key = str(term.get("topologyKey", ""))
        values: set[str] = set()
        any_match = False
        for node in self.sched.nodes:
            for p in node.pods:
                if _filters.term_matches_pod(
                    term, owner_namespace=self.pod.namespace, namespace=p.namespace, labels=p.labels
                ):
                    any_match = True
                    if key in node.labels:
                        values.add(node.labels[key])
                    break
        return values, any_match

    def affinity_filter(self, node: NodeInfo) -> Failure | None:
        """Required pod affinity, anti-affinity, and existing pods' anti-affinity."""
        if not (self.req_aff or self.req_anti or self.sched.affinity_pods):
            return None
        pod = self.pod
        if self._aff_domains is None:
            self._aff_domains = []
            for t in self.req_aff:
                values, any_match = self._domains(t)
                self_match = _filters.term_matches_pod(
                    t, owner_namespace=pod.namespace, namespace=pod.namespace, labels=pod.labels
                )
                self._aff_domains.append(
                    (str(t.get("topologyKey", "")), values, any_match or not self_match)
                )
            self._anti_domains = [
                (str(t.get("topologyKey", "")), self._domains(t)[0]) for t in self.req_anti
            ]
            self._existing_anti = []
            for p in self.sched.affinity_pods:
                assert p.node is not None
                for t in _filters.required_terms(p.spec, "podAntiAffinity"):
                    k = str(t.get("topologyKey", ""))
                    if k in p.node.labels and _filters.term_matches_pod(
                        t, owner_namespace=p.namespace, namespace=pod.namespace, labels=pod.labels
                    ):
                        self._existing_anti.append((k, p.node.labels[k]))
        # filtering.go: satisfyPodAffinity; a pod matching its own terms may start a group.
        for k, values, strict in self._aff_domains:
            if k not in node.labels or (strict and node.labels[k] not in values):
                return UNRESOLVABLE, [_filters.REASON_POD_AFFINITY]
        for k, values in self._anti_domains or []:
            if k in node.labels and node.labels[k] in values:
                return UNSCHEDULABLE, [_filters.REASON_POD_ANTI_AFFINITY]
        for k, v in self._existing_anti or []:
            if node.labels.get(k) == v:
                return UNSCHEDULABLE, [_filters.REASON_EXISTING_ANTI_AFFINITY]
        return None

    # -- PodTopologySpread --

    def _eligible(self, node: NodeInfo, constraints: Sequence[Mapping[str, Any]]) -> bool:
        return _filters.node_matches_pod(
            self.pod.spec, node_name=node.name, labels=node.labels
        ) and all(str(c.get("topologyKey")) in node.labels for c in constraints)

    def _count(self, node: NodeInfo, selector: Mapping[str, Any] | None) -> int:
        if selector is None:
            return node.owners.get(self.pod.owner_uid or "", 0)
        ns = self.pod.namespace
        key = (ns, repr(selector))
        hit = node.counts.get(key)
        if hit is not None and hit[0] == node.version:
            return hit[1]
        n = sum(
            1
            for p in node.pods
            if p.namespace == ns and _filters.match_label_selector(selector, p.labels)
        )
        node.counts[key] = (node.version, n)
        return n

    def _domain_counts(
        self, c: Mapping[str, Any], constraints: Sequence[Mapping[str, Any]], default: bool
    ) -> dict[str, int]:
        key = str(c.get("topologyKey"))
        selector = None if default else (c.get("labelSelector") or {})
        counts: dict[str, int] = {}
        for node in self.sched.nodes:
            if key not in node.labels:
                continue
            if not default and not self._eligible(node, constraints):
                continue
            v = node.labels[key]
            counts[v] = counts.get(v, 0) + self._count(node, selector)
        return counts

    def spread_filter(self, node: NodeInfo) -> Failure | None:
        """``DoNotSchedule`` constraints (podtopologyspread/filtering.go)."""
        if not self.spread_hard:
            return None
        for c in self.spread_hard:
            key = str(c.get("topologyKey"))
            if key not in node.labels:
                return UNRESOLVABLE, [_filters.REASON_TOPOLOGY_SPREAD_LABEL]
            counts = self._domain_counts(c, self.spread_hard, False)
            min_match = min(counts.values()) if counts else 0
            if len(counts) < int(c.get("minDomains") or 1):
                min_match = 0
            self_match = int(
                _filters.match_label_selector(c.get("labelSelector") or {}, self.pod.labels)
            )
            skew = counts.get(node.labels[key], 0) + self_match - min_match
            if skew > int(c.get("maxSkew", 1)):
                return UNSCHEDULABLE, [_filters.REASON_TOPOLOGY_SPREAD]
        return None

    # -- scores --

    def scores(self, feasible: Sequence[NodeInfo]) -> list[float]:
        """Weighted total score of each feasible node."""
        pod = self.pod
        total = [float(_resource_score(pod, n.usage_key())) for n in feasible]
        if self.pref_node:
            raw = []
            for n in feasible:
                s = 0
                for t in self.pref_node:
                    pref = t.get("preference") or {}
                    if _filters.match_node_selector_term(pref, n.labels, {"metadata.name": n.name}):
                        s += int(t.get("weight", 0))
                raw.append(s)
            top = max(raw)
            for i, r in enumerate(raw):
                total[i] += (r * 100 // top if top else 0) * _W_NODE_AFFINITY
        if self.sched.prefer_no_schedule:
            tol = pod.spec.get("tolerations") or []
            raw = [
                sum(
                    1
                    for t in n.taints
                    if t.get("effect") == "PreferNoSchedule"
                    and not any(_filters.tolerates(x, t) for x in tol)
                )
                for n in feasible
            ]
            top = max(raw)
            for i, r in enumerate(raw):
                total[i] += (100 - r * 100 // top if top else 100) * _W_TAINT
        spread = self._spread_scores(feasible)
        for i, s in enumerate(spread):
            total[i] += s * _W_SPREAD
        inter = self._interpod_scores(feasible)
        for i, s in enumerate(inter):
            total[i] += s * _W_INTERPOD
        return total

    def _spread_scores(self, feasible: Sequence[NodeInfo]) -> list[int]:
        # podtopologyspread/scoring.go: Score then NormalizeScore.
        if self.spread_soft:
            constraints: Sequence[Mapping[str, Any]] = self.spread_soft
            default = False
        elif self.spread_default:
            constraints = _DEFAULT_SPREAD
            default = True
        else:
            return []
        active = [
            c for c in constraints if any(str(c["topologyKey"]) in n.labels for n in feasible)
        ]
        if not active:
            return []
        ignored = set()
        if not default:
            ignored = {
                n.order
                for n in feasible
                if not all(str(c["topologyKey"]) in n.labels for c in active)
            }
        weights = []
        counts_by = []
        for c in active:
            key = str(c["topologyKey"])
            if key == HOSTNAME:
                size = len([n for n in feasible if n.order not in ignored])
            else:
                size = len({n.labels[key] for n in feasible if key in n.labels})
            weights.append(math.log(size + 2))
            counts_by.append(self._domain_counts(c, active, default))
        raw: list[int | None] = []
        for n in feasible:
            if n.order in ignored:
                raw.append(None)
                continue
            s = 0.0
            for c, w, counts in zip(active, weights, counts_by, strict=True):
                key = str(c["topologyKey"])
                if key in n.labels:
                    s += counts.get(n.labels[key], 0) * w + (int(c.get("maxSkew", 1)) - 1)
            raw.append(round(s))
        vals = [r for r in raw if r is not None]
        lo, hi = (min(vals), max(vals)) if vals else (0, 0)
        out = []
        for r in raw:
            if r is None:
                out.append(0)
            elif hi == 0:
                out.append(100)
            else:
                out.append(100 * (hi + lo - r) // hi)
        return out

    def _interpod_scores(self, feasible: Sequence[NodeInfo]) -> list[int]:
        # interpodaffinity/scoring.go: topology scores from both pods' terms, min-max scaled.
        pod = self.pod
        contributions: list[tuple[str, str, int]] = []
        own = [*((w, t, 1) for w, t in self.pref_aff), *((w, t, -1) for w, t in self.pref_anti)]
        if own:
            for node in self.sched.nodes:
                for p in node.pods:
                    for weight, term, sign in own:
                        k = str(term.get("topologyKey", ""))
                        if k in node.labels and _filters.term_matches_pod(
                            term,
                            owner_namespace=pod.namespace,
                            namespace=p.namespace,
                            labels=p.labels,
                        ):
                            contributions.append((k, node.labels[k], sign * weight))
        for p in self.sched.affinity_pods:
            if p.node is None:
                continue
            labels = p.node.labels
            # Existing pods' terms about the incoming pod; required affinity counts with
            # hardPodAffinityWeight 1.
            for weight, term, sign in (
                *((1, t, 1) for t in _filters.required_terms(p.spec, "podAffinity")),
                *((w, t, 1) for w, t in _filters.preferred_terms(p.spec, "podAffinity")),
                *((w, t, -1) for w, t in _filters.preferred_terms(p.spec, "podAntiAffinity")),
            ):
                k = str(term.get("topologyKey", ""))
                if k in labels and _filters.term_matches_pod(
                    term, owner_namespace=p.namespace, namespace=pod.namespace, labels=pod.labels
                ):
                    contributions.append((k, labels[k], sign * weight))
        if not contributions:
            return []
        raw = [sum(w for k, v, w in contributions if n.labels.get(k) == v) for n in feasible]
        lo, hi = min(raw), max(raw)
        if hi == lo:
            return [0] * len(raw)
        return [int(100 * (r - lo) / (hi - lo)) for r in raw]


def schedule(
    inputs: Inputs,
    *,
    allocator: StructuredAllocator | None = None,
    full_search: bool = False,
    tie_break: random.Random | None = None,
) -> Outcome:
    """Schedule every unscheduled pod of ``inputs`` and return the outcome.

    Pods with ``spec.nodeName`` are taken as already running there. Objects in ``inputs`` are
    updated in place (pods get ``spec.nodeName`` and status; claims get status).
    Raises InputError (from the allocator) for a CEL selector that does not compile.
    ``full_search`` filters and scores every node for every pod, with no shortcut for pods
    alike (the reference for tests; the same placements, much slower). ``tie_break`` picks
    among equally scored nodes at random, as kube-scheduler does, instead of by name.
    """
    return Scheduler(
        inputs, allocator=allocator, full_search=full_search, tie_break=tie_break
    ).run()


def iter_results(claim: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    """The ``status.allocation.devices.results`` of a claim (empty when unallocated)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return (alloc.get("devices") or {}).get("results") or []
