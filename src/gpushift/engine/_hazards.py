"""Hazards: a physical card that two ledgers can hand out, or that is handed out too often.

* ``DualAdvertiser``: a node advertises ``nvidia.com/gpu`` through the device plugin
  (allocatable > 0) while the NVIDIA DRA driver publishes a ``gpu.nvidia.com`` ResourceSlice
  for it. Nothing coordinates the two, so both can hand out the same card.
* ``DoubleAllocation``: one card has tenants of both ledgers (device-plugin units on card ``i``
  and DRA allocations of device ``gpu-<i>``), or more tenants than its own ledger allows
  (device-plugin units beyond the replica count, or a whole-device DRA allocation beside any
  other allocation of that device).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpushift.engine._ledger import GPU_RESOURCES, gpu_units
from gpushift.engine._scheduler import NVIDIA_DRIVER, Outcome

DUAL_ADVERTISER = "DualAdvertiser"
DOUBLE_ALLOCATION = "DoubleAllocation"


@dataclass(frozen=True, slots=True)
class Hazard:
    """One hazard about a node (and a card of it, for DoubleAllocation)."""

    reason: str
    node: str
    message: str
    card: int | None = None


@dataclass(slots=True)
class DraTenant:
    """A DRA allocation of a device: the claim and the pods it is reserved for."""

    claim: str
    shared: bool
    consumed: dict[str, str]
    pods: list[str] = field(default_factory=list)


def card_of(device: str) -> int | None:
    """The card index of a full-GPU device name ``gpu-<minor>``, else None."""
    head, _, minor = device.partition("-")
    return int(minor) if head == "gpu" and minor.isdigit() else None


def _allocated_node(alloc: dict[str, Any]) -> str | None:
    """The node an allocation's ``nodeSelector`` pins (``metadata.name In [node]``), if one."""
    terms = (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
    for term in terms if isinstance(terms, list) else []:
        for req in (term or {}).get("matchFields") or []:
            values = req.get("values") or []
            if (
                req.get("key") == "metadata.name"
                and req.get("operator") == "In"
                and len(values) == 1
            ):
                return str(values[0])
    return None


def dra_tenants(
    outcome: Outcome, pools: dict[tuple[str, str], str]
) -> dict[tuple[str, int], list[DraTenant]]:
    """DRA allocations of NVIDIA full GPUs, by (node, card index).

    ``pools`` maps (driver, pool) to the node whose slice publishes it.
    """
    out: dict[tuple[str, int], list[DraTenant]] = {}
    cards: dict[str, int | None] = {}
    # The node of each NVIDIA pool, looked up once per pool name.
    pool_nodes: dict[str, str | None] = {}
    for claim in outcome.claims:
        status = claim.get("status")
        if not status:
            continue
        alloc = status.get("allocation")
        if not alloc:
            continue
        results = (alloc.get("devices") or {}).get("results")
        if not results:
            continue
        meta = claim["metadata"]
        ns = meta.get("namespace", "")
        name = f"{ns}/{meta.get('name', '')}"
        pods = [f"{ns}/{r.get('name', '')}" for r in status.get("reservedFor") or ()]
        for r in results:
            # KEP-5018: admin access (a monitor watching every card) is not an allocation.
            if r.get("driver") != NVIDIA_DRIVER or r.get("adminAccess") is True:
                continue
            pool = str(r.get("pool"))
            if pool in pool_nodes:
                node = pool_nodes[pool]
            else:
                node = pool_nodes[pool] = pools.get((NVIDIA_DRIVER, pool))
            if node is None:
                # The slice may be gone (the driver was removed without draining): the claim
                # still holds the card, on the node its allocation is pinned to.
                node = _allocated_node(alloc)
            device = str(r.get("device", ""))
            card = cards[device] if device in cards else cards.setdefault(device, card_of(device))
            if node is None or card is None:
                continue
            tenant = DraTenant(name, "shareID" in r, r.get("consumedCapacity") or {}, pods)
            held = out.get((node, card))
            if held is None:
                out[(node, card)] = [tenant]
            else:
                held.append(tenant)
    return out


def node_pools(slices: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(driver, pool) → node name, for node-local slices."""
    out: dict[tuple[str, str], str] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("nodeName"):
            out[(str(spec.get("driver")), str((spec.get("pool") or {}).get("name")))] = str(
                spec["nodeName"]
            )
    return out


def find(
    outcome: Outcome,
    slices: list[dict[str, Any]],
    tenants: dict[tuple[str, int], list[DraTenant]] | None = None,
) -> list[Hazard]:
    """Every hazard of the outcome, nodes in name order, cards in index order.

    ``tenants`` is ``dra_tenants(outcome, node_pools(slices))`` if already computed.
    """
    pools = node_pools(slices)
    dra_nodes = {node for (driver, _), node in pools.items() if driver == NVIDIA_DRIVER}
    if tenants is None:
        tenants = dra_tenants(outcome, pools)
    by_node: dict[str, set[int]] = {}
    for n, c in tenants:
        by_node.setdefault(n, set()).add(c)
    hazards: list[Hazard] = []
    for node in outcome.nodes:
        units = gpu_units(node.allocatable)
        if units > 0 and node.name in dra_nodes:
            advertised = ", ".join(
                f"{r}: {node.allocatable[r]}" for r in GPU_RESOURCES if node.allocatable.get(r)
            )
            hazards.append(
                Hazard(
                    DUAL_ADVERTISER,
                    node.name,
                    f"node {node.name} advertises {advertised} through the device "
                    f"plugin and publishes its GPUs through the DRA driver {NVIDIA_DRIVER}; "
                    "both ledgers can hand out the same card",
                )
            )
        cards = {c.index for c in node.gpu.cards} | by_node.get(node.name, set())
        for i in sorted(cards):
            ledger = next((c for c in node.gpu.cards if c.index == i), None)
            dp = [f"{t.pod} ({t.container})" for t in ledger.tenants] if ledger else []
            dra = tenants.get((node.name, i), [])
            problems = []
            if dp and dra:
                holders = ", ".join(
                    sorted({p for t in dra for p in t.pods} or {t.claim for t in dra})
                )
                problems.append(
                    f"held by the device plugin for {', '.join(dp)} and by DRA for {holders}"
                )
            if ledger and len(ledger.tenants) > ledger.units:
                problems.append(
                    f"{len(ledger.tenants)} device-plugin tenants but {ledger.units} replicas"
                )
            whole = [t for t in dra if not t.shared]
            if whole and len(dra) > 1:
                problems.append(
                    f"allocated whole to {', '.join(t.claim for t in whole)} and also to "
                    f"{len(dra) - 1} other claim(s)"
                )
            if problems:
                hazards.append(
                    Hazard(
                        DOUBLE_ALLOCATION,
                        node.name,
                        f"card gpu-{i} of node {node.name}: " + "; ".join(problems),
                        i,
                    )
                )
    return hazards
