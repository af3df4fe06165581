"""What a simulation shows: placements, card ledgers, Pending pods, hazards; and a List.

Tables are laid out like ``kubectl get`` (upper-case headers, columns three spaces apart).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, cast

from gpushift import _quantity
from gpushift.engine._allocator import device_key
from gpushift.engine._core_types import Event, KubeList, ObjectReference
from gpushift.engine._dra_types import Node
from gpushift.engine._hazards import card_of
from gpushift.engine._ledger import GPU_RESOURCE
from gpushift.engine._scheduler import NVIDIA_DRIVER, PodInfo
from gpushift.engine._simulation import Simulation
from gpushift.engine._workloads import stable_suffix

VIA_DEVICE_PLUGIN = "device-plugin"
VIA_DRA = "dra"
VIA_BRIDGED = f"dra ({GPU_RESOURCE})"


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod went and what GPU share it holds (``node`` None when Pending)."""

    pod: str
    node: str | None
    via: str
    cards: tuple[str, ...]
    share: str


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows under an upper-case header, columns padded to their widest cell."""
    cells = [tuple(h.upper() for h in header), *(tuple(map(str, r)) for r in rows)]
    widths = [max(map(len, column)) for column in zip(*cells, strict=True)]
    # One format per table: padding every cell with ljust costs a call per cell.
    line = "   ".join(f"%-{w}s" for w in widths)
    return "\n".join([(line % r).rstrip() for r in cells])


_CONSUMED_TEXT: dict[tuple[tuple[str, str], ...], str] = {}


def _consumed_text(consumed: dict[str, str]) -> str:
    key = tuple(consumed.items())
    text = _CONSUMED_TEXT.get(key)
    if text is None:
        text = ", ".join(
            f"{k} {v}" for k, v in sorted(consumed.items(), key=lambda kv: kv[0] != "shares")
        )
        _CONSUMED_TEXT[key] = text
    return text


def _claim_results(claim: Any) -> Any:
    """:func:`iter_results` of one claim, inline for the per-pod loop."""
    status = claim.get("status")
    alloc = status.get("allocation") if status else None
    if not alloc:
        return ()
    return (alloc.get("devices") or {}).get("results") or ()


def _placement(pod: PodInfo) -> tuple[str | None, str, list[str], str]:
    """Node, via, cards and share of :func:`placement`."""
    node = pod.node.name if pod.node else None
    cards: list[str] = []
    shares: list[str] = []
    via = "-"
    if pod.gpu_cards and pod.node is not None:
        via = VIA_DEVICE_PLUGIN
        units = {c.index: c.units for c in pod.node.gpu.cards}
        for _, i in pod.gpu_cards:
            name = f"gpu-{i}"
            if name not in cards:
                cards.append(name)
                n = units.get(i, 1)
                shares.append("whole card" if n <= 1 else f"1 of {n} replicas")
    bridged = pod.bridge.claim if pod.bridge is not None else None
    for _, claim in pod.claims:
        for r in _claim_results(claim):
            via = VIA_BRIDGED if claim is bridged else VIA_DRA
            cards.append(str(r.get("device")))
            consumed = r.get("consumedCapacity")
            if not consumed:
                shares.append("whole device")
            else:
                shares.append(
                    _consumed_text(consumed if type(consumed) is dict else dict(consumed))
                )
    if pod.bridge is not None:
        for r in _claim_results(pod.bridge.claim):
            via = VIA_BRIDGED
            cards.append(str(r.get("device")))
            consumed = r.get("consumedCapacity")
            shares.append(_consumed_text(dict(consumed)) if consumed else "whole device")
    return node, via, cards, "; ".join(shares) or "-"


def placement(pod: PodInfo) -> Placement:
    """The placement of one pod (see :class:`Placement`)."""
    node, via, cards, share = _placement(pod)
    return Placement(pod.key, node, via, tuple(cards), share)


def _fmt(name: str, v: Fraction | int | str) -> str:
    q = _quantity.parse(v) if isinstance(v, str) else Fraction(v)
    return _quantity.format_quantity(q, binary=name == "memory")


def card_rows(sim: Simulation) -> list[list[str]]:
    """One row per (node, card, ledger): who holds the card and how much is used."""
    outcome = sim.outcome
    tenants = sim.tenants
    formatted: dict[tuple[str, Any], str] = {}

    def fmt(name: str, v: Any) -> str:
        text = formatted.get((name, v))
        if text is None:
            text = formatted[(name, v)] = _fmt(name, v)
        return text

    # Only devices that can be allocated: a complete pool at its newest generation.
    capacities: dict[tuple[str, int], tuple[str, dict[str, Any]]] = {}
    by_node: dict[str, set[int]] = {}
    if sim.inputs.slices:
        for node in outcome.nodes:
            for s in outcome.allocator.pools(node=cast(Node, node.obj)).slices:
                spec = s.get("spec") or {}
                if spec.get("driver") != NVIDIA_DRIVER or spec.get("nodeName") != node.name:
                    continue
                for d in spec.get("devices") or []:
                    i = card_of(str(d.get("name", "")))
                    if i is not None:
                        key = device_key(NVIDIA_DRIVER, str(spec["pool"]["name"]), str(d["name"]))
                        capacities[(node.name, i)] = (key, cast(dict[str, Any], d))
                        by_node.setdefault(node.name, set()).add(i)
    rows: list[list[str]] = []
    for node in outcome.nodes:
        cards = {c.index for c in node.gpu.cards} | by_node.get(node.name, set())
        for i in sorted(cards):
            ledger = next((c for c in node.gpu.cards if c.index == i), None)
            if ledger is not None and ledger.units > 0:
                holders = ", ".join(t.pod for t in ledger.tenants) or "-"
                used = f"{len(ledger.tenants)}/{ledger.units} replicas"
                rows.append([node.name, f"gpu-{i}", VIA_DEVICE_PLUGIN, used, holders])
            if (node.name, i) in capacities:
                key, dev = capacities[(node.name, i)]
                dra = tenants.get((node.name, i), [])
                holders = ", ".join(p for t in dra for p in (t.pods or [t.claim])) or "-"
                if dev.get("allowMultipleAllocations"):
                    agg = outcome.state.consumed.get(key, {})
                    parts = []
                    for cname, cap in sorted(
                        (dev.get("capacity") or {}).items(), key=lambda kv: kv[0] != "shares"
                    ):
                        total = fmt(cname, cap["value"])
                        parts.append(f"{cname} {fmt(cname, agg.get(cname, 0))}/{total}")
                    used = ", ".join(parts) or f"{len(dra)} shares"
                else:
                    used = "whole device" if dra else "free"
                rows.append([node.name, f"gpu-{i}", VIA_DRA, used, holders])
    return rows


def ignored_slices(sim: Simulation) -> list[tuple[str, str]]:
    """ResourceSlices offered to some node whose devices cannot be allocated, with the reason
    (an older generation of their pool, or an incomplete pool), by slice name."""
    if not sim.inputs.slices:
        return []
    out: set[tuple[str, str]] = set()
    for node in sim.outcome.nodes:
        out.update(sim.outcome.allocator.pools(node=cast(Node, node.obj)).ignored)
    return sorted(out)


#: How many ignored slices the text output names.
_IGNORED_SHOWN = 5


def human(sim: Simulation) -> str:
    """The default output: placements, card ledgers, Pending pods and hazards."""
    out = []
    rows: list[tuple[str, ...]] = []
    for pod in sim.outcome.pods:
        node, via, held, share = _placement(pod)
        rows.append((pod.key, node or "<pending>", via, ",".join(held) or "-", share))
    out.append(table(["pod", "node", "via", "card", "share"], rows))
    cards = card_rows(sim)
    if cards:
        out.append(table(["node", "card", "ledger", "used", "holders"], cards))
    ignored = ignored_slices(sim)
    if ignored:
        named = "; ".join(f"{n} ({why})" for n, why in ignored[:_IGNORED_SHOWN])
        if len(ignored) > _IGNORED_SHOWN:
            named += f"; and {len(ignored) - _IGNORED_SHOWN} more"
        out.append(
            f"ignored {len(ignored)} ResourceSlice(s), whose devices cannot be allocated: {named}"
        )
    pending = sim.pending
    if pending:
        out.append(table(["pending pod", "reason"], [[p.key, pending_reason(p)] for p in pending]))
    if sim.hazards:
        out.append(
            table(
                ["hazard", "node", "message"], [[h.reason, h.node, h.message] for h in sim.hazards]
            )
        )
    summary = f"{len(sim.outcome.pods) - len(pending)} scheduled, {len(pending)} pending, "
    summary += f"{len(sim.hazards)} hazard(s)"
    out.append(summary)
    return "\n\n".join(out) + "\n"


# k8s.io/kubernetes pkg/scheduler/framework/preemption executor.go: what a victim is marked
# with before it is deleted, and the Event about it.
PREEMPTED_CONDITION = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "default-scheduler: preempting to accommodate a higher priority pod",
}


# k8s.io/kubernetes pkg/registry/core/pod/strategy.go applySchedulingGatedCondition: what
# kube-apiserver sets on a pod created with scheduling gates (v1.PodReasonSchedulingGated).
SCHEDULING_GATED = "SchedulingGated"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def gone(pod: PodInfo) -> bool:
    """Whether the pod was preempted and is not placed again: no controller owns it, or it
    was bound in the input (a running pod is evicted, not moved)."""
    return (
        pod.node is None
        and pod.preempted_by is not None
        and (pod.owner_uid is None or pod.prebound)
    )


def pending_reason(pod: PodInfo) -> str:
    """Why a pod without a node is Pending, as the text output says it."""
    if pod.gates:
        return f"{SCHEDULING_GATED}: {pod.message}"
    return pod.message or ""


def _pod_object(pod: PodInfo) -> dict[str, Any]:
    obj = pod.obj
    if gone(pod):
        # Deleted by kube-scheduler: as last seen, failed with the condition it was given.
        status = obj.setdefault("status", {})
        status["phase"] = "Failed"
        status["conditions"] = [dict(PREEMPTED_CONDITION)]
    elif pod.gates:
        status = obj.setdefault("status", {})
        status["phase"] = "Pending"
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": SCHEDULING_GATED,
                "message": SCHEDULING_GATED_MESSAGE,
            }
        ]
    elif pod.node is None and (not pod.prebound or pod.preempted_by is not None):
        status = obj.setdefault("status", {})
        status["phase"] = "Pending"
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": pod.message or "",
            }
        ]
    return obj


def events(sim: Simulation) -> list[Event]:
    """Preemptions as kube-scheduler's Normal ``Preempted`` Events about each victim, then
    hazards as Warning Events about the node concerned."""
    out: list[Event] = []
    by_key = {p.key: p for p in sim.outcome.pods}
    for p in sim.outcome.pods:
        if p.preempted_by is None:
            continue
        preemptor, node_name = p.preempted_by
        by = by_key.get(preemptor)
        uid = (by.obj.get("metadata") or {}).get("uid", "") if by is not None else ""
        victim: ObjectReference = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": p.name,
            "namespace": p.namespace,
            "uid": str(p.obj["metadata"]["uid"]),
        }
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{p.name}.{stable_suffix('Preempted' + preemptor, 10)}",
                    "namespace": p.namespace,
                },
                "type": "Normal",
                "reason": "Preempted",
                "message": f"Preempted by pod {uid} on node {node_name}",
                "involvedObject": victim,
                "source": {"component": "default-scheduler"},
                "reportingComponent": "default-scheduler",
                "count": 1,
            }
        )
    by_name = {n.name: n for n in sim.outcome.nodes}
    for h in sim.hazards:
        node = by_name.get(h.node)
        involved: ObjectReference = {"apiVersion": "v1", "kind": "Node", "name": h.node}
        uid = (node.obj.get("metadata") or {}).get("uid") if node else None
        if uid:
            involved["uid"] = uid
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    # Node events live in "default", named <object>.<unique suffix>.
                    "name": f"{h.node}.{stable_suffix(h.reason + h.message, 10)}",
                    "namespace": "default",
                },
                "type": "Warning",
                "reason": h.reason,
                "message": h.message,
                "involvedObject": involved,
                "source": {"component": "gpushift"},
                "reportingComponent": "gpushift",
                "count": 1,
            }
        )
    return out


def as_list(sim: Simulation, *, everything: bool = False) -> KubeList:
    """A ``v1`` List of the pods, every ResourceClaim (generated ones too) and hazard Events.

    With ``everything``, the cluster the pods were placed on comes first (Nodes,
    ResourceSlices, DeviceClasses, PriorityClasses) and Events are left out, so the List is
    an input that ``simulate`` reads back to the same placements: pods bound, claims
    allocated.
    """
    items: list[Any] = []
    if everything:
        i = sim.inputs
        items += [*i.nodes, *i.slices, *i.classes, *i.priority_classes]
    items += [_pod_object(p) for p in sim.outcome.pods]
    items += sim.outcome.claims
    if not everything:
        items += events(sim)
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
