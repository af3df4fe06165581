"""simulate's outcome beside kube-scheduler's, modulo what kube-scheduler leaves to chance.

Both outcomes are v1 Lists of Pods, ResourceClaims and Events (``simulate -o json``, and
:func:`._outcome.read`). kube-scheduler picks at random among nodes of equal score, and a
controller names its pods at random, so the two are compared as summaries (docs/simulate.md):

* **pods, by group**: a workload's pods form one group (its controller names them), bare pods
  of the input that are equal (namespace, labels and spec, but for ``nodeName``) another; per
  group the multiset of each pod's state: ``Scheduled``, ``Scheduled on <node>`` when the node
  is forced (its node selector, required affinity and the taints leave one node; a pod bound
  in the input stays where it was, so it is just ``Scheduled``), ``Pending (<reasons>)`` with
  the reasons of the scheduler's message without their node counts, ``Pending
  (SchedulingGated)`` for a pod with scheduling gates, or ``Preempted`` for a bare pod, or one
  bound in the input, that the scheduler evicted (nothing makes it again);
* **GPU use, by node shape**: nodes alike in all but their name (labels but the hostname,
  taints, allocatable, the devices of their ResourceSlices) are interchangeable; per shape,
  the multiset of each node's use: device-plugin units held by its pods, and per DRA device the
  claims allocated and the capacity (shares, memory) they consume. Where scores tie, which
  node a pod lands on changes these uses; they agree when simulate reaches kube-scheduler's
  under one of its seeded random choices among equal nodes (``_run.tie_breaks``);
* **preemption victims**: the multiset of the victims' priorities.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpushift import _quantity, engine
from gpushift._obj import Obj

#: Set on a preemption victim in the upstream List: it was deleted, and this is it as last
#: seen (:mod:`._outcome`).
VICTIM_ANNOTATION = "gpushift.dev/preempted"
#: A Pending pod kube-scheduler never tried: a claim it needs does not exist (its
#: DynamicResources PreEnqueue holds it back, writing no condition), as simulate's
#: ``resourceclaim "…" not found`` says.
WAITING_FOR_CLAIM = "waiting for a ResourceClaim"
NOT_TRIED = "not tried"
PREEMPTING = "preempting"
SCHEDULED = "Scheduled"
PREEMPTED = "Preempted"
#: The PodScheduled reason kube-apiserver gives a pod created with scheduling gates.
SCHEDULING_GATED = "SchedulingGated"
_HOSTNAME = "kubernetes.io/hostname"
#: The extended resources the device plugin's ledger counts (the engine's GpuLedger).
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
_NUMBERED = re.compile(r"^\d+ ")
_MESSAGE = re.compile(
    r"^\d+/\d+ nodes are available:? (?P<filter>.*?)(?:\.(?: (?P<post>.*))?)?$", re.S
)
_PREEMPTION = "preemption: "
_CLAIM_MISSING = re.compile(r'^resourceclaim(template)? ".*" not found$')


def _key(value: Any) -> str:
    """A text equal for two JSON-like values exactly when their content is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True, order=True)
class Difference:
    """One way the two outcomes differ: what, which field, and each side's value."""

    object: str
    field: str
    simulate: Any
    upstream: Any

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"object", "field", "simulate", "upstream"}``."""
        return {
            "object": self.object,
            "field": self.field,
            "simulate": self.simulate,
            "upstream": self.upstream,
        }


def _counted(body: str) -> set[str]:
    """``1 a, 2 b`` without the counts."""
    out = set()
    for part in re.split(r", (?=\d+ )", body.strip().rstrip(".")):
        text = _NUMBERED.sub("", part.strip())
        if text:
            out.add(WAITING_FOR_CLAIM if _CLAIM_MISSING.match(text) else text)
    return out


def reasons(message: str) -> tuple[str, ...]:
    """The reasons of a FailedScheduling message without their node counts, sorted; those of
    DefaultPreemption prefixed ``preemption:``. ``0/3 nodes are available: 1 Insufficient
    nvidia.com/gpu, 2 node(s) had untolerated taint(s). preemption: 0/3 nodes are available:
    3 Preemption is not helpful for scheduling.`` gives ``("Insufficient nvidia.com/gpu",
    "node(s) had untolerated taint(s)", "preemption: Preemption is not helpful for
    scheduling")``."""
    # pkg/scheduler/framework types.go FitError.Error: "0/N nodes are available: ", the
    # PreFilter message or the filter reasons as "<count> <reason>" sorted and joined with
    # ", ", ". ", then the PostFilter plugins' messages joined with ", ".
    text = message.strip()
    m = _MESSAGE.match(text)
    if m is None:
        return (text,)
    out = _counted(m.group("filter"))
    post = m.group("post") or ""
    pre, sep, preemption = post.partition(_PREEMPTION)
    for item in pre.split(", "):
        if item.strip().rstrip(","):
            out.add(item.strip().rstrip(",").rstrip("."))
    if sep:
        body = re.sub(r"^\d+/\d+ nodes are available: ", "", preemption.strip())
        out |= {f"preemption: {r}" for r in _counted(body)}
    if WAITING_FOR_CLAIM in out:
        # kube-scheduler never tries such a pod (PreEnqueue), so there is nothing more to say.
        return (WAITING_FOR_CLAIM,)
    return tuple(sorted(out))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _pod_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _meta(obj)
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


@dataclass(frozen=True, slots=True)
class Cluster:
    """What the comparison needs of the input: nodes, slices, priorities, pods by name."""

    nodes: tuple[Obj, ...]
    slices: tuple[Obj, ...]
    classes: Mapping[str, int]
    default_priority: int
    #: Input pods by (namespace, name): their equality class key and a label for it.
    pod_groups: Mapping[tuple[str, str], tuple[str, str]]
    #: Input pods that name their node.
    bound: frozenset[tuple[str, str]]

    @classmethod
    def of(cls, objects: Iterable[Mapping[str, Any]]) -> Cluster:
        """The parts of ``objects`` (as simulate reads them) the comparison uses."""
        nodes, slices, pods = [], [], []
        classes: dict[str, int] = {}
        default = 0
        for obj in objects:
            kind = obj.get("kind")
            if kind == "Node":
                nodes.append(dict(obj))
            elif kind == "ResourceSlice":
                slices.append(dict(obj))
            elif kind == "Pod":
                pods.append(obj)
            elif kind == "PriorityClass":
                name = str(_meta(obj).get("name"))
                classes[name] = int(obj.get("value") or 0)
                if obj.get("globalDefault"):
                    default = classes[name]
        members: dict[str, list[tuple[str, str]]] = {}
        keys: dict[tuple[str, str], str] = {}
        bound = set()
        for p in pods:
            ns, name = _pod_key(p)
            if (p.get("spec") or {}).get("nodeName"):
                bound.add((ns, name))
            spec = {k: v for k, v in (p.get("spec") or {}).items() if k != "nodeName"}
            key = _key([ns, _meta(p).get("labels") or {}, spec])
            keys[(ns, name)] = key
            members.setdefault(key, []).append((ns, name))
        groups: dict[tuple[str, str], tuple[str, str]] = {}
        for (ns, name), key in keys.items():
            same = members[key]
            label = (
                f"Pod {ns}/{name}"
                if len(same) == 1
                else "Pods " + ", ".join(f"{n}/{m}" for n, m in same) + " (equal)"
            )
            groups[(ns, name)] = (f"pods:{same[0][0]}/{same[0][1]}", label)
        return cls(tuple(nodes), tuple(slices), classes, default, groups, frozenset(bound))

    def priority(self, pod: Mapping[str, Any]) -> int:
        """The pod's priority (``spec.priority``, its class, the global default)."""
        spec = pod.get("spec") or {}
        if isinstance(spec.get("priority"), int):
            return int(spec["priority"])
        name = spec.get("priorityClassName")
        if name and name in self.classes:
            return self.classes[str(name)]
        return self.default_priority


def workload_of(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(kind, namespace/name)`` of the workload whose controller made the pod: a
    ReplicaSet's pod with the ``pod-template-hash`` label the Deployment controller sets
    belongs to the Deployment whose name the ReplicaSet's name continues."""
    meta = _meta(pod)
    ns = str(meta.get("namespace") or "default")
    for ref in meta.get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        kind, name = str(ref.get("kind")), str(ref.get("name"))
        h = (meta.get("labels") or {}).get("pod-template-hash")
        if kind == "ReplicaSet" and h and name.endswith(f"-{h}"):
            return "Deployment", f"{ns}/{name[: -len(h) - 1]}"
        return kind, f"{ns}/{name}"
    return None


def _forced_node(pod: Mapping[str, Any], cluster: Cluster) -> str | None:
    """The only node the pod's node selector, required affinity, taints and the nodes'
    ``unschedulable`` allow; None when several (or none) do."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    fits = []
    for n in cluster.nodes:
        meta = _meta(n)
        name = str(meta.get("name"))
        nspec = n.get("spec") or {}
        if nspec.get("unschedulable") and not any(
            t.get("key") == "node.kubernetes.io/unschedulable" or t.get("operator") == "Exists"
            for t in tolerations
        ):
            continue
        if not engine.node_matches_pod(spec, node_name=name, labels=meta.get("labels") or {}):
            continue
        if engine.untolerated_taint(nspec.get("taints") or [], tolerations):
            continue
        fits.append(name)
        if len(fits) > 1:
            return None
    return fits[0] if fits else None


@dataclass(frozen=True, slots=True)
class Summary:
    """One outcome, reduced to what the comparison compares."""

    #: Group key -> (label, multiset of pod states).
    groups: Mapping[str, tuple[str, Counter[str]]]
    #: Node shape -> (label, multiset of node uses).
    nodes: Mapping[str, tuple[str, Counter[str]]]
    #: Multiset of the victims' priorities.
    victims: Counter[int]


def _claims_missing(pod: Mapping[str, Any], claims: set[tuple[str, str]]) -> bool:
    ns = _pod_key(pod)[0]
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = pc.get("resourceClaimName") or statuses.get(pc.get("name"))
        if not name or (ns, str(name)) not in claims:
            return True
    return False


def pod_state(pod: Mapping[str, Any], cluster: Cluster, claims: set[tuple[str, str]]) -> str:
    """One pod's state as the comparison sees it (see the module docstring)."""
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    if node:
        if _pod_key(pod) not in cluster.bound and _forced_node(pod, cluster) == node:
            return f"{SCHEDULED} on {node}"
        return SCHEDULED
    if (pod.get("status") or {}).get("nominatedNodeName"):
        return f"Pending ({PREEMPTING})"
    if spec.get("schedulingGates"):
        # Read from the spec: kube-apiserver's SchedulingGated condition stays once the gates
        # are lifted, until kube-scheduler tries the pod (never, when a claim is missing).
        return f"Pending ({SCHEDULING_GATED})"
    cond = _condition(pod, "PodScheduled")
    if cond is not None and cond.get("reason") in ("Unschedulable", "SchedulerError"):
        return "Pending (" + ", ".join(reasons(str(cond.get("message") or ""))) + ")"
    if _claims_missing(pod, claims):
        return f"Pending ({WAITING_FOR_CLAIM})"
    return f"Pending ({NOT_TRIED})"


def _shape(node: Mapping[str, Any], devices: Sequence[tuple[str, Any]]) -> str:
    meta = _meta(node)
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != _HOSTNAME}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    return str(
        _key(
            [
                labels,
                spec.get("taints") or [],
                bool(spec.get("unschedulable")),
                status.get("allocatable") or {},
                sorted(devices),
            ]
        )
    )


def _shape_of(node: Mapping[str, Any], devices: Mapping[str, list[tuple[str, Any]]]) -> str:
    return _shape(node, devices.get(str(_meta(node).get("name")), []))


def _nodes_label(names: Sequence[str]) -> str:
    """``Node a``, ``Nodes a, b, c`` or ``Nodes a, b, … (12 alike)``."""
    if len(names) == 1:
        return f"Node {names[0]}"
    if len(names) <= 3:
        return "Nodes " + ", ".join(names)
    return f"Nodes {names[0]}, {names[1]}, … ({len(names)} alike)"


def _fmt(name: str, v: Fraction) -> str:
    return _quantity.format_quantity(v, binary=name == "memory")


def summarize(result: Mapping[str, Any], cluster: Cluster) -> Summary:
    """The :class:`Summary` of one outcome List."""
    items = list(result.get("items") or [])
    pods = [i for i in items if i.get("kind") == "Pod"]
    claims = [i for i in items if i.get("kind") == "ResourceClaim"]
    events = [i for i in items if i.get("kind") == "Event"]
    claim_keys = {_pod_key(c) for c in claims}
    by_uid = {str(_meta(p).get("uid")): p for p in pods}

    victims: Counter[int] = Counter()
    victim_uids: set[str] = set()
    for p in pods:
        if (_meta(p).get("annotations") or {}).get(VICTIM_ANNOTATION) == "true":
            victim_uids.add(str(_meta(p).get("uid")))
    for e in events:
        if e.get("reason") == "Preempted":
            uid = str((e.get("involvedObject") or {}).get("uid"))
            if uid in by_uid:
                victim_uids.add(uid)
    for uid in victim_uids:
        victims[cluster.priority(by_uid[uid])] += 1

    groups: dict[str, tuple[str, Counter[str]]] = {}
    for p in pods:
        meta = _meta(p)
        key = _pod_key(p)
        deleted = (meta.get("annotations") or {}).get(VICTIM_ANNOTATION) == "true"
        if key in cluster.pod_groups:
            gkey, label = cluster.pod_groups[key]
        else:
            w = workload_of(p)
            if w is None:
                gkey, label = f"pod:{key[0]}/{key[1]}", f"Pod {key[0]}/{key[1]}"
            else:
                gkey, label = f"{w[0]}:{w[1]}", f"{w[0]} {w[1]}"
            if deleted:
                continue  # a controller's pod: the new pod it made stands for it
        state = PREEMPTED if deleted else pod_state(p, cluster, claim_keys)
        if (
            not deleted
            and (workload_of(p) is None or key in cluster.bound)
            and str(meta.get("uid")) in victim_uids
        ):
            # simulate keeps a bare victim, and a pod bound in the input, in its List; nothing
            # makes it again (the input holds no controller of a bound pod).
            state = PREEMPTED
        groups.setdefault(gkey, (label, Counter()))[1][state] += 1

    # GPU use per node.
    pool_node: dict[tuple[str, str], str] = {}
    devices: dict[str, list[tuple[str, Any]]] = {}
    for s in cluster.slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            continue
        pool_node[(str(spec.get("driver")), str((spec.get("pool") or {}).get("name")))] = node
        for d in spec.get("devices") or []:
            caps = {k: str((v or {}).get("value")) for k, v in (d.get("capacity") or {}).items()}
            devices.setdefault(str(node), []).append(
                (f"{spec.get('driver')}/{d.get('name')}", sorted(caps.items()))
            )
    dp: dict[str, Counter[str]] = {}
    alloc_of = {
        str(_meta(n).get("name")): (n.get("status") or {}).get("allocatable") or {}
        for n in cluster.nodes
    }
    for p in pods:
        if (_meta(p).get("annotations") or {}).get(VICTIM_ANNOTATION) == "true":
            continue
        node = (p.get("spec") or {}).get("nodeName")
        if not node or node not in alloc_of:
            continue
        for res, amount in engine.pod_requests(p.get("spec") or {}).items():
            if res in GPU_RESOURCES and _quantity.parse(alloc_of[node].get(res, 0)) > 0:
                dp.setdefault(node, Counter())[res] += amount
    # Per node and device: the allocations, and the capacity they consume.
    dra: dict[str, dict[str, tuple[int, dict[str, Fraction]]]] = {}
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            node = pool_node.get((str(r.get("driver")), str(r.get("pool"))))
            if node is None:
                continue
            dev = f"{r.get('driver')}/{r.get('device')}"
            count, used = dra.setdefault(node, {}).get(dev, (0, {}))
            for cname, q in (r.get("consumedCapacity") or {}).items():
                used[cname] = used.get(cname, Fraction(0)) + _quantity.parse(q)
            dra[node][dev] = (count + 1, used)
    nodes: dict[str, tuple[str, Counter[str]]] = {}
    names: dict[str, list[str]] = {}
    for n in cluster.nodes:
        names.setdefault(_shape_of(n, devices), []).append(str(_meta(n).get("name")))
    for n in cluster.nodes:
        name = str(_meta(n).get("name"))
        shape = _shape(n, devices.get(name, []))
        parts = [f"{res} {units}" for res, units in sorted(dp.get(name, Counter()).items())]
        for dev, (count, consumed) in sorted(dra.get(name, {}).items()):
            text = ", ".join(f"{k} {_fmt(k, v)}" for k, v in sorted(consumed.items()))
            parts.append(f"{dev}: {count} claim(s)" + (f" ({text})" if text else ""))
        use = "; ".join(parts) or "none"
        label, counter = nodes.setdefault(shape, (_nodes_label(names[shape]), Counter()))
        counter[use] += 1
    return Summary(groups, nodes, victims)


def _sorted(counter: Counter[Any]) -> list[str]:
    return [f"{n} × {k}" if n > 1 else str(k) for k, n in sorted(counter.items(), key=str)]


def rows(
    simulate: Mapping[str, Any],
    upstream: Mapping[str, Any],
    cluster: Cluster,
    *,
    alternatives: Sequence[Mapping[str, Any]] = (),
) -> list[Difference]:
    """Every compared value side by side: per pod group its ``state``, per node shape its
    ``gpu`` use, and the victims' ``priority``; each as a sorted list (``2 × Scheduled``).

    ``alternatives`` are simulate's Lists under other random choices among nodes of equal
    score: a node shape's GPU use agrees when one of them reaches kube-scheduler's."""
    a, b = summarize(simulate, cluster), summarize(upstream, cluster)
    others = [summarize(x, cluster) for x in alternatives]
    out: list[Difference] = []
    for key in sorted(set(a.groups) | set(b.groups)):
        label = (a.groups.get(key) or b.groups[key])[0]
        sa = a.groups.get(key, (label, Counter()))[1]
        sb = b.groups.get(key, (label, Counter()))[1]
        out.append(Difference(label, "state", _sorted(sa), _sorted(sb)))
    for key in sorted(set(a.nodes) | set(b.nodes)):
        label = (a.nodes.get(key) or b.nodes[key])[0]
        na = a.nodes.get(key, (label, Counter()))[1]
        nb = b.nodes.get(key, (label, Counter()))[1]
        if _sorted(na) != _sorted(nb):
            # Where kube-scheduler chose at random among nodes of equal score, the GPU use
            # it reached is one simulate reaches under another such choice.
            for other in others:
                nc = other.nodes.get(key, (label, Counter()))[1]
                if _sorted(nc) == _sorted(nb):
                    na = nc
                    break
        out.append(Difference(label, "gpu", _sorted(na), _sorted(nb)))
    if a.victims or b.victims:
        out.append(
            Difference("Preemption victims", "priority", _sorted(a.victims), _sorted(b.victims))
        )
    return out


def compare(
    simulate: Mapping[str, Any], upstream: Mapping[str, Any], cluster: Cluster
) -> list[Difference]:
    """Every difference between the two outcomes (see the module docstring); none when they
    agree."""
    return [r for r in rows(simulate, upstream, cluster) if r.simulate != r.upstream]
