"""The device plugin's ledger: extended resources from ``status.allocatable``, and which card.

kube-scheduler only counts units of ``nvidia.com/gpu``; the physical card behind a unit is
chosen later by the kubelet and the NVIDIA device plugin. gpushift models that choice so
hazards can be judged per card:

* A node has ``cards`` physical GPUs: the ``nvidia.com/gpu.count`` label (set by GPU feature
  discovery) if present, else the number of ``gpu-<minor>`` devices the node's
  ``gpu.nvidia.com`` ResourceSlices publish, else one card per allocatable unit.
* Each card carries ``replicas`` units: the ``nvidia.com/gpu.replicas`` label if present and
  positive, else ``allocatable // cards`` (time-slicing advertises ``cards × replicas``).
* Each unit a container gets is placed on the card with the fewest units in use, the lowest
  card index winning ties (the device plugin's ``distributed`` policy for shared devices).
* Card ``i`` is the same physical GPU as the DRA device ``gpu-<i>`` of that node.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from gpushift import _sharing

GPU_RESOURCE = "nvidia.com/gpu"
#: Names the device plugin advertises for full GPUs (``renameByDefault`` adds ``.shared``).
GPU_RESOURCES = (GPU_RESOURCE, f"{GPU_RESOURCE}.shared")


def gpu_units(resources: dict[str, int]) -> int:
    """Units of full-GPU device-plugin resources in a resource list."""
    return sum(resources.get(name, 0) for name in GPU_RESOURCES)


GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_REPLICAS_LABEL = "nvidia.com/gpu.replicas"


@dataclass(frozen=True, slots=True)
class Tenant:
    """One unit of a device-plugin resource held by a pod's container."""

    pod: str
    container: str


@dataclass(slots=True)
class CardLedger:
    """The device-plugin units of one physical card (``units`` is its replica count)."""

    index: int
    units: int
    tenants: list[Tenant] = field(default_factory=list)

    @property
    def free(self) -> int:
        """Units not yet handed out (negative when over-committed by pre-bound pods)."""
        return self.units - len(self.tenants)


def _int_label(labels: dict[str, str], key: str, high: int) -> int | None:
    # The input reader refuses bad labels with their place; here they only must not grow
    # a ledger (objects built in memory skip the reader).
    try:
        return _sharing.label_count(labels.get(key), key=key, high=high)
    except ValueError:
        return None


def card_layout(*, allocatable: int, labels: dict[str, str], dra_cards: int) -> tuple[int, int]:
    """``(cards, replicas)`` for a node advertising ``allocatable`` units (see module doc).

    Without a count label or DRA devices, one card per unit is assumed, up to the most cards
    a node holds (``_sharing.MAX_GPUS_PER_NODE``): the ledger never grows per unit.
    """
    cards = (
        _int_label(labels, GPU_COUNT_LABEL, _sharing.MAX_GPUS_PER_NODE)
        or min(dra_cards, _sharing.MAX_GPUS_PER_NODE)
        or min(allocatable, _sharing.MAX_GPUS_PER_NODE)
    )
    if cards <= 0:
        return 0, 0
    replicas = _int_label(labels, GPU_REPLICAS_LABEL, _sharing.MAX_REPLICAS_PER_CARD) or 0
    if replicas <= 0:
        # Rounded up only where the card count was capped, so every advertised unit has a card.
        capped = allocatable > cards == _sharing.MAX_GPUS_PER_NODE
        replicas = max(-(-allocatable // cards) if capped else allocatable // cards, 1)
    return cards, replicas


@dataclass(slots=True)
class GpuLedger:
    """Per-card ledger of one node's ``nvidia.com/gpu`` units."""

    cards: list[CardLedger]

    @classmethod
    def for_node(cls, *, allocatable: int, labels: dict[str, str], dra_cards: int) -> GpuLedger:
        """The empty ledger of a node (see ``card_layout``)."""
        n, replicas = card_layout(allocatable=allocatable, labels=labels, dra_cards=dra_cards)
        if allocatable <= 0:
            n = dra_cards
            replicas = 0
        return cls([CardLedger(i, replicas) for i in range(n)])

    def assign(self, *, pod: str, container: str, count: int) -> list[int]:
        """Hand out ``count`` units to a container; returns the card index of each unit.

        Cards with the fewest units in use go first (lowest index on ties). Cards already at
        their replica count are used only when every card is full (pre-bound pods).
        """
        picked: list[int] = []
        if not self.cards:
            return picked
        # At most one unit past the node's total: enough to show an over-commit, never a
        # ledger that grows with an unbounded request.
        count = min(count, sum(max(c.units, 0) for c in self.cards) + 1)
        by_index = {c.index: c for c in self.cards}
        open_heap = [(len(c.tenants), c.index) for c in self.cards if c.free > 0]
        full_heap = [(len(c.tenants), c.index) for c in self.cards if c.free <= 0]
        heapq.heapify(open_heap)
        heapq.heapify(full_heap)
        tenant = Tenant(pod, container)
        for _ in range(count):
            # Once every card is full, all of them compete again, fewest tenants first.
            heap = open_heap or full_heap
            used, index = heapq.heappop(heap)
            card = by_index[index]
            card.tenants.append(tenant)
            picked.append(index)
            heapq.heappush(open_heap if card.free > 0 else full_heap, (used + 1, index))
        return picked
