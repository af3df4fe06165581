"""Both ledgers of a snapshot, per physical card: who advertises it and who holds it.

The device plugin's ledger is per node (``nvidia.com/gpu`` = cards × replicas); which card a
pod holds is known from the dcgm-exporter series (``gpu`` and ``pod`` labels) or, on a node
with one card, from the node alone. DRA's ledger is per device: a claim's allocation names
the pool (the node) and the device ``gpu-<minor>``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from gpushift import _quantity
from gpushift._errors import InputError
from gpushift._obj import Obj

Ledger = Literal["device-plugin", "dra"]
GPU = "nvidia.com/gpu"
DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True, slots=True)
class Holder:
    """One tenant of a card: the pod (``namespace/name``), through which ledger and what."""

    pod: str
    ledger: Ledger
    via: str  # the resource name, or the claim ``namespace/name``
    share: str | None = None


@dataclass(slots=True)
class Card:
    """One physical card (by minor number) of a node, in both ledgers."""

    node: str
    card: str
    dp_slots: int = 0  # device-plugin units on this card while the plugin advertises
    dra_device: str | None = None  # the ResourceSlice device, when DRA publishes it
    dra_slice: str | None = None
    dra_slots: int | None = None  # the ``shares`` capacity (None: exclusive or by memory)
    multi: bool = False
    holders: list[Holder] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``gpu-0``: the name both ledgers agree on (the DRA device name)."""
        return f"gpu-{self.card}"


@dataclass(slots=True)
class Ledgers:
    """Every GPU node's cards, and device-plugin tenants whose card is not known."""

    cards: dict[str, list[Card]]
    unplaced: dict[str, list[Holder]]
    dp_units: dict[str, int]
    dp_resource: dict[str, str]


def _units(text: Any) -> int:
    if isinstance(text, int):
        return text
    if isinstance(text, str) and text.isdigit():
        return int(text)  # the common case, without parsing a quantity
    try:
        return int(_quantity.value(str(text)))
    except (InputError, ValueError, TypeError):
        return 0


def dp_allocatable(node: Obj) -> tuple[str, int]:
    """The device plugin's resource on a node and its allocatable units (0 when gone)."""
    alloc = node.get("allocatable") or {}
    for resource in (GPU, GPU + ".shared"):
        if _units(alloc.get(resource, 0)) > 0:
            return resource, _units(alloc[resource])
    return GPU, 0


def node_slices(snapshot: Obj) -> dict[str, list[Obj]]:
    """The ``gpu.nvidia.com`` ResourceSlices by node."""
    out: dict[str, list[Obj]] = defaultdict(list)
    for s in snapshot.get("resourceSlices") or []:
        if s.get("driver") == DRIVER and s.get("node"):
            out[str(s["node"])].append(s)
    return out


def _minor(device: str) -> str | None:
    head, _, minor = device.partition("-")
    return minor if head == "gpu" and minor.isdigit() else None


def ledgers(snapshot: Obj) -> Ledgers:
    """Both ledgers of a snapshot, card by card."""
    slices = node_slices(snapshot)
    pools = {
        str(s.get("pool")): str(s.get("node"))
        for s in snapshot.get("resourceSlices") or []
        if s.get("driver") == DRIVER and s.get("node")
    }
    series = snapshot.get("dcgmSeries") or []
    series_cards: dict[str, set[str]] = defaultdict(set)
    dp_card: dict[str, str] = {}
    for lbl in series:
        host, gpu = lbl.get("Hostname"), lbl.get("gpu")
        if host and gpu is not None:
            series_cards[host].add(str(gpu))
            if lbl.get("pod") and not lbl.get("dra_claim_name"):
                dp_card[f"{lbl.get('namespace')}/{lbl['pod']}"] = str(gpu)
    cards: dict[str, list[Card]] = {}
    dp_units: dict[str, int] = {}
    dp_resource: dict[str, str] = {}
    for node in snapshot.get("nodes") or []:
        if not node.get("gpuNode"):
            continue
        name = str(node["name"])
        resource, units = dp_allocatable(node)
        dp_units[name], dp_resource[name] = units, resource
        minors: set[str] = set(series_cards.get(name, set()))
        devices: dict[str, tuple[Obj, str]] = {}
        for s in slices.get(name, []):
            for d in s.get("devices") or []:
                m = _minor(str(d.get("name", "")))
                if m is not None:
                    minors.add(m)
                    devices[m] = (d, str(s.get("name")))
        count = _units((node.get("labels") or {}).get("nvidia.com/gpu.count", 0))
        minors.update(str(i) for i in range(count))
        if not minors and units:
            minors.add("0")
        ordered = sorted(minors, key=int)
        per_card = units // len(ordered) if ordered else 0
        node_cards = []
        for m in ordered:
            card = Card(name, m, dp_slots=per_card)
            if m in devices:
                d, slice_name = devices[m]
                card.dra_device, card.dra_slice = str(d.get("name")), slice_name
                card.multi = bool(d.get("allowMultipleAllocations"))
                shares = (d.get("capacity") or {}).get("shares")
                card.dra_slots = (
                    _units(shares) if shares is not None else (None if card.multi else 1)
                )
            node_cards.append(card)
        cards[name] = node_cards
    unplaced: dict[str, list[Holder]] = defaultdict(list)
    for pod in snapshot.get("pods") or []:
        node = pod.get("node")
        if not node or pod.get("phase") in ("Succeeded", "Failed") or pod.get("bridged"):
            continue
        key = f"{pod.get('namespace')}/{pod.get('name')}"
        resource = dp_resource.get(str(node), GPU)
        amount = int((pod.get("requests") or {}).get(resource, 0))
        if not amount:
            continue
        node_cards = cards.get(str(node), [])
        where = dp_card.get(key)
        if where is None and len(node_cards) == 1:
            where = node_cards[0].card
        target = next((c for c in node_cards if c.card == where), None)
        for _ in range(amount):
            holder = Holder(key, "device-plugin", resource)
            if target is None:
                unplaced[str(node)].append(holder)
            else:
                target.holders.append(holder)
    for claim in snapshot.get("resourceClaims") or []:
        ns = claim.get("namespace")
        holders = [f"{ns}/{r.get('name')}" for r in claim.get("reservedFor") or []] or [
            f"{ns}/{claim.get('name')} (claim, not reserved)"
        ]
        for r in claim.get("devices") or []:
            if r.get("driver") != DRIVER:
                continue
            node = pools.get(str(r.get("pool")), str(r.get("pool")))
            m = _minor(str(r.get("device", "")))
            target = next((c for c in cards.get(node, []) if c.card == m), None)
            if target is None:
                continue
            for h in holders:
                target.holders.append(
                    Holder(h, "dra", f"{ns}/{claim.get('name')}", r.get("shareID"))
                )
    return Ledgers(cards, dict(unplaced), dp_units, dp_resource)


def allocator(snapshot: Obj, node: str) -> str:
    """What serves GPUs on a node: ``device-plugin``, ``dra``, ``both`` or ``none``."""
    entry = next((n for n in snapshot.get("nodes") or [] if n.get("name") == node), None)
    dp = entry is not None and dp_allocatable(entry)[1] > 0
    dra = bool(node_slices(snapshot).get(node))
    return "both" if dp and dra else "device-plugin" if dp else "dra" if dra else "none"
