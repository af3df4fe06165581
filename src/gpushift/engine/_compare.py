"""``--compare``: the homelab example under each sharing setup, side by side."""

from __future__ import annotations

from typing import Any, cast

from gpushift import _quantity
from gpushift.engine._example import (
    AI_NAMESPACE,
    COMPARE,
    MEDIA_NAMESPACE,
    NODES,
    Setup,
    burst,
    homelab,
)
from gpushift.engine._inputs import from_objects
from gpushift.engine._report import as_list, placement, table
from gpushift.engine._scheduler import PodInfo
from gpushift.engine._simulation import Simulation, simulate


def _app(pod: PodInfo) -> str:
    # Pod names differ between setups only in their generated suffixes; compare by workload.
    owners = pod.obj["metadata"].get("ownerReferences") or []
    name = str(owners[0]["name"]) if owners else pod.name
    if owners and owners[0].get("kind") == "ReplicaSet":
        name = name.rsplit("-", 1)[0]
    return f"{pod.namespace}/{name}"


def _cell(pod: PodInfo) -> str:
    p = placement(pod)
    if p.node is None:
        return "Pending"
    return f"{p.node}/{','.join(p.cards) or '-'}"


def whole_card_claims(sim: Simulation) -> list[str]:
    """Pods whose claim took a card's whole memory without asking for any memory.

    Under ``consumableShares: memory`` a claim without ``capacity.requests.memory`` consumes
    the policy default, which is the whole card.
    """
    out = []
    for pod in sim.outcome.pods:
        claims: list[dict[str, Any]] = [cast(dict[str, Any], c) for _, c in pod.claims]
        if pod.bridge is not None:
            claims.append(pod.bridge.claim)
        for claim in claims:
            asked = any(
                "memory" in ((r.get("exactly") or {}).get("capacity") or {}).get("requests", {})
                for r in (claim.get("spec") or {}).get("devices", {}).get("requests") or []
            )
            alloc = (claim.get("status") or {}).get("allocation") or {}
            for r in (alloc.get("devices") or {}).get("results") or []:
                used = (r.get("consumedCapacity") or {}).get("memory")
                if not asked and used and _quantity.parse(used) > 0:
                    where = f"{pod.node.name if pod.node else '?'}/{r.get('device')}"
                    out.append(f"{where} held by {pod.key}: memory {used}, none requested")
    return out


def compare(setups: tuple[Setup, ...] = COMPARE) -> tuple[str, list[Simulation]]:
    """The comparison table and notes, and each setup's simulation."""
    sims = [simulate(from_objects(homelab(s))) for s in setups]
    apps: list[str] = []
    cells: dict[tuple[str, int], str] = {}
    for i, sim in enumerate(sims):
        for pod in sim.outcome.pods:
            app = _app(pod)
            if app not in apps:
                apps.append(app)
            cells[(app, i)] = _cell(pod)
    rows = [[app, *(cells.get((app, i), "-") for i in range(len(sims)))] for app in apps]
    rows.append(
        [
            "scheduled / pending / hazards",
            *(
                f"{len(s.outcome.pods) - len(s.pending)} / {len(s.pending)} / {len(s.hazards)}"
                for s in sims
            ),
        ]
    )
    parts = [table(["workload", *(s.label for s in setups)], rows)]
    notes = []
    for s, sim in zip(setups, sims, strict=True):
        if not sim.pending:
            continue
        lines = [f"{s.label}: {len(sim.pending)} pod(s) Pending."]
        whole = whole_card_claims(sim)
        if whole:
            lines.append(
                "  A claim without capacity.requests.memory consumes the memory policy default, "
                "which is the whole card, so each card takes one claim:"
            )
            lines += [f"    {w}" for w in whole]
            for pod in sim.pending:
                if pod.namespace == AI_NAMESPACE:
                    lines.append(
                        f"  So the model {pod.key} stays Pending: media pods landed on every "
                        "card it could use, and each of them holds its card whole."
                    )
        for pod in sim.pending:
            lines.append(f"  {pod.key}: {pod.message}")
        notes.append("\n".join(lines))
    parts += notes
    if setups == COMPARE:
        parts.append(preemption_note())
    return "\n\n".join(parts) + "\n", sims


#: The setups the preemption probe runs: the device plugin's and DRA's, at 5 per card.
PREEMPTION = (COMPARE[0], COMPARE[1])


def preemption_probe(s: Setup) -> tuple[Simulation, Simulation, int]:
    """The homelab running under ``s`` (its pods bound, as ``-o yaml --all`` leaves them),
    then one more default-priority transcode than the cards have free slots.

    Returns the running simulation, the one with the burst, and the burst's size.
    """
    running = simulate(from_objects(homelab(s)))
    placed = as_list(running, everything=True)["items"]
    # One card per node, each taking ``sharing`` pods; every homelab pod asks for one slot.
    per_card = s.sharing if isinstance(s.sharing, int) else 1
    used = sum(1 for p in running.outcome.pods if p.node is not None)
    free = len(NODES) * per_card - used
    extra = burst(s, replicas=free + 1)
    templates = [o for o in homelab(s) if o.get("kind") == "ResourceClaimTemplate"]
    after = simulate(from_objects([*placed, *templates, extra]))
    return running, after, free + 1


def preemption_note(setups: tuple[Setup, ...] = PREEMPTION) -> str:
    """What happens to the model when default-priority transcodes fill the cards: preempted
    under the device plugin; under DRA kube-scheduler does not preempt for a device, so the
    transcode waits (``dra-preemption-lost``, docs/rules.md)."""
    lines = []
    size = 0
    for s in setups:
        _, after, size = preemption_probe(s)
        model = next(p for p in after.outcome.pods if p.namespace == AI_NAMESPACE)
        waiting = [p for p in after.pending if p.namespace == MEDIA_NAMESPACE]
        if model.preempted_by is not None:
            by, node = model.preempted_by
            lines.append(
                f"  {s.label}: {by} preempts {model.key} (PriorityClass gpu-preemptible, "
                f"priority {model.priority}) on {node}."
            )
        elif waiting:
            lines.append(
                f"  {s.label}: {waiting[0].key} stays Pending beside {model.key} (priority "
                f"{model.priority}): kube-scheduler does not preempt for DRA devices up to "
                "1.37 (dra-preemption-lost)."
            )
        else:
            lines.append(f"  {s.label}: every transcode fits; nothing is preempted.")
    head = (
        f"Preemption: the homelab running, then {size} default-priority transcodes, one more "
        "than the free slots:"
    )
    return "\n".join([head, *lines])


def compare_homelab() -> tuple[str, int]:
    """The ``--compare`` output and its exit code (1 if any setup leaves a pod Pending)."""
    text, sims = compare()
    return text, max(s.exit_code for s in sims)
