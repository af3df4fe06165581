"""The invariant monitor: DualAdvertiser and DoubleAllocation, judged on live state.

The hazard definitions are the engine's (``gpushift.engine`` hazards); this module feeds them
the kubelets' device-plugin ledgers (which card each container really holds), node
allocatable, ResourceSlices and claim allocations, and records each violation once: as a
Warning Event on the Node, and in :attr:`Monitor.records` (served at ``/twin/v1/violations``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict, cast

from gpushift.common import Obj
from gpushift.engine import DOUBLE_ALLOCATION, DUAL_ADVERTISER, NodeInfo, Outcome
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._kubelet import GPU, Kubelet
from gpushift_twin.cluster._reuse import find_hazards

COMPONENT = "gpushift-twin-monitor"
REASONS = (DUAL_ADVERTISER, DOUBLE_ALLOCATION)


class ViolationBody(TypedDict):
    """One recorded violation as ``/twin/v1/violations`` serves it."""

    reason: str
    node: str
    card: int | None
    message: str
    firstSeen: str
    lastSeen: str
    active: bool
    resolved: str | None


class ViolationList(TypedDict):
    """The body of ``/twin/v1/violations``."""

    kind: str
    items: list[ViolationBody]
    active: int


@dataclass(slots=True)
class Violation:
    """One hazard as recorded: when it was first and last seen, and whether it still holds."""

    reason: str
    node: str
    card: int | None
    message: str
    first_seen: str
    last_seen: str
    active: bool = True
    resolved: str | None = None

    def as_dict(self) -> ViolationBody:
        """The JSON form served at ``/twin/v1/violations``."""
        return {
            "reason": self.reason,
            "node": self.node,
            "card": self.card,
            "message": self.message,
            "firstSeen": self.first_seen,
            "lastSeen": self.last_seen,
            "active": self.active,
            "resolved": self.resolved,
        }


def _units(node: Obj) -> int:
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return sum(int(str(alloc.get(k, 0))) for k in (GPU, GPU + ".shared"))


class Monitor:
    """Watches every pass for hazards and records them."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.records: list[Violation] = []
        self._open: dict[tuple[str, str, int | None], Violation] = {}

    def sync(self, kubelet: Kubelet, nodes: list[Obj]) -> None:
        """Judge the current state and record what changed."""
        ctx = self.ctx
        infos = []
        for i, node in enumerate(nodes):
            meta = node["metadata"]
            agent = kubelet.agents.get(meta["name"])
            info = NodeInfo(
                name=meta["name"],
                obj=node,
                order=i,
                labels=meta.get("labels") or {},
                taints=[],
                unschedulable=False,
                allocatable={GPU: _units(node)},
            )
            if agent is not None:
                info.gpu = agent.ledger
            infos.append(info)
        claims = ctx.list(ctx.kinds.claim)
        slices = ctx.list(ctx.kinds.slice)
        outcome = Outcome(
            nodes=infos, pods=[], claims=claims, allocator=cast(Any, None), state=cast(Any, None)
        )
        found = find_hazards(outcome, slices)
        now = ctx.stamp()
        current = set()
        by_name = {n["metadata"]["name"]: n for n in nodes}
        for h in found:
            key = (h.reason, h.node, h.card)
            current.add(key)
            v = self._open.get(key)
            if v is not None:
                v.last_seen, v.message = now, h.message
                continue
            v = Violation(h.reason, h.node, h.card, h.message, now, now)
            self._open[key] = v
            self.records.append(v)
            subject = by_name.get(h.node)
            if subject is not None:
                ctx.event(
                    subject, reason=h.reason, message=h.message, component=COMPONENT, warning=True
                )
        for key in [k for k in self._open if k not in current]:
            v = self._open.pop(key)
            v.active = False
            v.resolved = now

    def as_json(self) -> ViolationList:
        """Every violation recorded so far, oldest first, and how many still hold."""
        items = [v.as_dict() for v in list(self.records)]
        return {
            "kind": "ViolationList",
            "items": items,
            "active": sum(1 for v in items if v["active"]),
        }
