"""The health verdict of a snapshot: healthy, degraded or broken, with reasons.

Each check has a stable id (docs/verdict.md lists them) and yields reasons that point at one
object. Any error makes the verdict ``broken``, any warning ``degraded``; info reasons are
listed but change nothing. ``against`` adds the transition judgement
(:func:`gpushift.verdict.transition`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpushift._obj import Obj
from gpushift.reports import Severity
from gpushift.rules import (
    DEFAULT_KUBERNETES_VERSION,
    Ranked,
    parse_kubernetes_version,
    preemption_hazards,
)
from gpushift.verdict._ledgers import DRIVER, GPU, Ledgers, dp_allocatable, ledgers, node_slices
from gpushift.verdict._transition import transition


@dataclass(frozen=True, slots=True)
class Check:
    """A verdict check: stable id, the severity of its reasons, what it looks for."""

    id: str
    severity: Severity
    summary: str


@dataclass(frozen=True, slots=True)
class Reason:
    """Why the verdict is what it is: one problem about one object (``Kind/ns/name``)."""

    check: str
    severity: Severity
    object: str
    message: str

    def body(self) -> Obj:
        """The json form (``severity``, ``object``, ``message``)."""
        return {"severity": self.severity.value, "object": self.object, "message": self.message}


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO

CHECKS: tuple[Check, ...] = (
    Check("both-ledgers", _E, "A card is advertised or allocated through both ledgers."),
    Check(
        "gpu-node-unserved", _E, "A GPU node has neither allocatable nvidia.com/gpu nor a slice."
    ),
    Check("pod-pending", _W, "A GPU pod is Pending, with the scheduler's reason."),
    Check("claim-pending", _W, "A ResourceClaim is not allocated while its pod waits."),
    Check("bridged-unserved", _E, "An nvidia.com/gpu request that only DRA could serve is not."),
    Check("dcgm-unattributed", _W, "dcgm-exporter series of a held card carry no pod labels."),
    Check("agent-unhealthy", _W, "A GPU agent pod is not Ready (crash loop, init, pending)."),
    Check("flux-not-ready", _E, "A Flux object on the GPU path is not Ready."),
    Check("flux-suspended", _W, "A Flux object on the GPU path is left suspended."),
    Check("stale-sharing-labels", _I, "GFD time-slicing labels on a node the plugin left."),
    Check("unused-device-class", _I, "A DeviceClass no claim and no extended resource uses."),
    Check(
        "dra-preemption-lost",
        _I,
        "GPU pods of different priorities share DRA devices, which kube-scheduler does not "
        "preempt for.",
    ),
)
_BY_ID = {c.id: c for c in CHECKS}
_Fn = Callable[[Obj, Ledgers], Iterator[Reason]]
_REGISTRY: list[tuple[str, _Fn]] = []


def _check(check_id: str) -> Callable[[_Fn], _Fn]:
    def wrap(fn: _Fn) -> _Fn:
        _REGISTRY.append((check_id, fn))
        return fn

    return wrap


def _reason(check_id: str, obj: str, message: str) -> Reason:
    return Reason(check_id, _BY_ID[check_id].severity, obj, message)


def _ns(item: Obj) -> str:
    ns = item.get("namespace")
    return f"{ns}/{item.get('name')}" if ns else str(item.get("name"))


@_check("both-ledgers")
def _both_ledgers(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    for node, cards in sorted(books.cards.items()):
        units = books.dp_units.get(node, 0)
        resource = books.dp_resource.get(node, GPU)
        for card in cards:
            dp = [h for h in card.holders if h.ledger == "device-plugin"]
            dra = [h for h in card.holders if h.ledger == "dra"]
            if dp and dra:
                yield _reason(
                    "both-ledgers",
                    f"Node/{node}",
                    f"card {card.label} is held through both ledgers: "
                    + ", ".join(f"{h.pod} ({h.via})" for h in dp)
                    + " through the device plugin and "
                    + ", ".join(f"{h.pod} (claim {h.via})" for h in dra)
                    + " through DRA",
                )
            elif units and card.dra_device:
                yield _reason(
                    "both-ledgers",
                    f"Node/{node}",
                    f"card {card.label} is advertised by the device plugin ({resource}: {units} "
                    f"allocatable on the node) and published by DRA in ResourceSlice "
                    f"{card.dra_slice}",
                )


@_check("gpu-node-unserved")
def _unserved(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    slices = node_slices(snapshot)
    for node in snapshot.get("nodes") or []:
        if not node.get("gpuNode"):
            continue
        if dp_allocatable(node)[1] == 0 and not slices.get(str(node["name"])):
            alloc = (node.get("allocatable") or {}).get(GPU)
            shown = "absent" if alloc is None else alloc
            yield _reason(
                "gpu-node-unserved",
                f"Node/{node['name']}",
                f"GPU node advertises nothing: allocatable nvidia.com/gpu {shown} and no "
                "gpu.nvidia.com ResourceSlice (gpushift doctor --node "
                f"{node['name']} says why)",
            )


def _pending(pod: Obj) -> bool:
    return pod.get("phase") == "Pending" and not pod.get("node") and not pod.get("terminating")


@_check("pod-pending")
def _pods_pending(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    for pod in snapshot.get("pods") or []:
        if _pending(pod):
            why = pod.get("pendingMessage") or "not scheduled yet"
            yield _reason("pod-pending", f"Pod/{_ns(pod)}", f"Pending: {why}")


@_check("claim-pending")
def _claims_pending(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    waiting: dict[tuple[str, str], Obj] = {}
    for pod in snapshot.get("pods") or []:
        if _pending(pod):
            for name in pod.get("claims") or []:
                waiting[(str(pod.get("namespace")), name)] = pod
    for claim in snapshot.get("resourceClaims") or []:
        pod = waiting.get((str(claim.get("namespace")), str(claim.get("name"))))
        if pod is not None and not claim.get("allocated"):
            why = pod.get("pendingMessage") or "not scheduled yet"
            yield _reason(
                "claim-pending",
                f"ResourceClaim/{_ns(claim)}",
                f"not allocated; its pod {_ns(pod)} is Pending: {why}",
            )


@_check("bridged-unserved")
def _bridged(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    nodes = snapshot.get("nodes") or []
    plugin = any(dp_allocatable(n)[1] > 0 for n in nodes)
    if plugin:
        return  # the device plugin still serves nvidia.com/gpu: nothing relies on the bridge
    bridges = [
        d["name"]
        for d in snapshot.get("deviceClasses") or []
        if d.get("extendedResourceName") == GPU
    ]
    for pod in snapshot.get("pods") or []:
        if not (pod.get("requests") or {}).get(GPU) or pod.get("bridged") or not _pending(pod):
            continue
        why = pod.get("pendingMessage") or "not scheduled yet"
        if bridges:
            message = (
                f"nvidia.com/gpu is bridged by DeviceClass {', '.join(bridges)} but this request "
                f"is not served: {why}"
            )
        else:
            message = (
                "nvidia.com/gpu is requested, no node advertises it and no DeviceClass has "
                f"extendedResourceName nvidia.com/gpu: {why}"
            )
        yield _reason("bridged-unserved", f"Pod/{_ns(pod)}", message)


@_check("dcgm-unattributed")
def _dcgm(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    series = snapshot.get("dcgmSeries")
    if series is None:
        return
    by_card: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for lbl in series:
        by_card[(str(lbl.get("Hostname")), str(lbl.get("gpu")))].append(lbl)
    for node, cards in sorted(books.cards.items()):
        for card in cards:
            labels = by_card.get((node, card.card))
            if not labels or not card.holders:
                continue
            named = {lbl.get("pod") for lbl in labels if lbl.get("pod")}
            missing = sorted({h.pod for h in card.holders if h.pod.split("/", 1)[-1] not in named})
            if missing and any(not lbl.get("pod") for lbl in labels):
                yield _reason(
                    "dcgm-unattributed",
                    f"Node/{node}",
                    f"DCGM series of card {card.label} carry no pod labels while "
                    f"{', '.join(missing)} hold it",
                )


@_check("agent-unhealthy")
def _agents(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    for agent in snapshot.get("agents") or []:
        for pod in agent.get("pods") or []:
            if pod.get("ready") or pod.get("reason") == "Terminating":
                continue
            restarts = int(pod.get("restarts") or 0)
            what = pod.get("reason") or pod.get("phase")
            extra = f", {restarts} restarts" if restarts else ""
            yield _reason(
                "agent-unhealthy",
                f"Pod/{_ns(pod)}",
                f"{agent['component']} on {pod.get('node') or 'no node'} is not Ready: "
                f"{what}{extra}",
            )


@_check("flux-not-ready")
def _flux_ready(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    for f in snapshot.get("flux") or []:
        if f.get("ready") != "True" and not f.get("suspended"):
            yield _reason(
                "flux-not-ready",
                f"{f['kind']}/{_ns(f)}",
                f"not Ready ({f.get('reason') or 'Unknown'}): {f.get('message') or 'no status'}",
            )


@_check("flux-suspended")
def _flux_suspended(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    for f in snapshot.get("flux") or []:
        if f.get("suspended"):
            yield _reason(
                "flux-suspended",
                f"{f['kind']}/{_ns(f)}",
                "suspended: Flux no longer applies it (resume it with spec.suspend: null)",
            )


@_check("stale-sharing-labels")
def _stale(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    for node in snapshot.get("nodes") or []:
        labels = node.get("labels") or {}
        shared = labels.get("nvidia.com/gpu.sharing-strategy") == "time-slicing"
        if shared and dp_allocatable(node)[1] == 0:
            yield _reason(
                "stale-sharing-labels",
                f"Node/{node['name']}",
                "GFD still labels time-slicing (nvidia.com/gpu.replicas="
                f"{labels.get('nvidia.com/gpu.replicas', '?')}) but the device plugin does not "
                "advertise here; selectors on these labels match a node that no longer "
                "time-slices",
            )


@_check("unused-device-class")
def _unused(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    used = {c for claim in snapshot.get("resourceClaims") or [] for c in claim["deviceClasses"]}
    requested = {k for pod in snapshot.get("pods") or [] for k in pod.get("requests") or {}}
    for dc in snapshot.get("deviceClasses") or []:
        if dc["name"] in used or dc.get("extendedResourceName") in requested:
            continue
        yield _reason("unused-device-class", f"DeviceClass/{dc['name']}", "nothing uses it")


@_check("dra-preemption-lost")
def _preemption(snapshot: Obj, books: Ledgers) -> Iterator[Reason]:
    if not any(s.get("driver") == DRIVER for s in snapshot.get("resourceSlices") or []):
        return
    ranked = {
        p["owner"]: Ranked(
            p["owner"],
            p.get("priorityClassName"),
            int(p.get("priority") or 0),
            p.get("preemptionPolicy") != "Never",
        )
        for p in snapshot.get("pods") or []
    }
    for hazard in preemption_hazards(ranked.values()):
        yield _reason(
            "dra-preemption-lost",
            hazard.victim.name,
            hazard.message(parse_kubernetes_version(DEFAULT_KUBERNETES_VERSION)),
        )


def reasons(snapshot: Obj) -> list[Reason]:
    """Every reason the checks find, worst first, then by check order and object."""
    books = ledgers(snapshot)
    order = {c.id: i for i, c in enumerate(CHECKS)}
    found = [r for _, fn in _REGISTRY for r in fn(snapshot, books)]
    return sorted(found, key=lambda r: (r.severity.rank, order[r.check], r.object, r.message))


def _already(found: list[Reason], before: Obj) -> list[Reason]:
    """A Flux object that was already not Ready before the transition is not what the
    transition broke: its reason stays, as info, saying so."""
    was = {
        f"{f['kind']}/{_ns(f)}": f.get("reason")
        for f in before.get("flux") or []
        if f.get("ready") != "True" and not f.get("suspended")
    }
    out = []
    for r in found:
        obj = r.object
        if r.check == "flux-not-ready" and obj in was:
            why = f"already not Ready before ({was[obj] or 'Unknown'}); {r.message}"
            r = Reason(r.check, Severity.INFO, obj, why)
        out.append(r)
    order = {c.id: i for i, c in enumerate(CHECKS)}
    return sorted(out, key=lambda r: (r.severity.rank, order[r.check], r.object, r.message))


def judge(snapshot: Obj, *, against: Obj | None = None) -> Obj:
    """The verdict document: ``{"kind": "Verdict", "verdict", "reasons"[, "transition"]}``.

    ``against`` is the snapshot taken before a transition; the result then says what changed
    and whether it is the expected change, and a Flux object already not Ready there for the
    same reason counts as info, not as what the transition broke.
    """
    found = reasons(snapshot)
    if against is not None:
        found = _already(found, against)
    if any(r.severity is Severity.ERROR for r in found):
        word = "broken"
    elif any(r.severity is Severity.WARNING for r in found):
        word = "degraded"
    else:
        word = "healthy"
    doc: Obj = {"kind": "Verdict", "verdict": word, "reasons": [r.body() for r in found]}
    if against is not None:
        doc["transition"] = transition(against, snapshot)
    return doc


def exit_code(verdict: Obj) -> int:
    """0 when healthy (and the transition, if judged, is the expected one); else 1."""
    ok = verdict.get("verdict") == "healthy"
    if "transition" in verdict:
        ok = ok and bool(verdict["transition"].get("expected"))
    return 0 if ok else 1


def format_verdict(verdict: Obj, *, output: str = "text") -> str:
    """The verdict as ``text`` (one line per reason) or ``json``."""
    if output == "json":
        return json.dumps(verdict, indent=2) + "\n"
    lines = [str(verdict["verdict"])]
    for r in verdict.get("reasons") or []:
        lines.append(f"  {r['severity']:<7}  {r['object']}: {r['message']}")
    t = verdict.get("transition")
    if t is not None:
        state = "expected" if t.get("expected") else "NOT the expected change"
        lines.append(f"transition {t.get('from')} -> {t.get('to')}: {state}")
        for u in t.get("unexpected") or []:
            lines.append(f"  unexpected  {u['object']}: {u['message']}")
    return "\n".join(lines) + "\n"
