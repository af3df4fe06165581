"""The cluster's DRA ledger: which devices are held whole and what shared ones have consumed.

Mirrors the scheduler's ``pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go``.
"""

from __future__ import annotations

import os
import random

from gpushift.engine._capacity import Number, parse_amount
from gpushift.engine._dra_types import (
    AllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
)

__all__ = ["AllocatedState", "device_key", "new_share_id"]


_RANDOM = random.Random(os.urandom(16))
_V4 = (0x4 << 76) | (0x2 << 62)
_V4_MASK = ~((0xF << 76) | (0x3 << 62))


def new_share_id() -> str:
    """A fresh random UUID string for one share (upstream makes a new UUID per allocation).

    Uses a PRNG seeded from the OS: share IDs need uniqueness, not secrecy, and
    ``uuid.uuid4`` costs a system call per share.
    """
    h = f"{(_RANDOM.getrandbits(128) & _V4_MASK) | _V4:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def device_key(driver: str, pool: str, device: str) -> str:
    """The ledger key of a device: ``driver/pool/device`` (DeviceID.String() upstream)."""
    return f"{driver}/{pool}/{device}"


_AMOUNTS: dict[str, Number] = {}


def _amount(text: str) -> Number:
    v = _AMOUNTS.get(text)
    if v is None:
        v = parse_amount(text).value
        _AMOUNTS[text] = v
    return v


class AllocatedState:
    """The cluster's DRA ledger, as the scheduler's ``allocateddevices.go`` keeps it.

    ``exclusive`` counts allocations of devices held whole (results without ``shareID``);
    ``shared`` counts shares of multi-allocatable devices (results with ``shareID``), whose
    ``consumedCapacity`` adds up in ``consumed``. Results with ``adminAccess: true`` are not
    counted, as upstream. Keys are :func:`device_key` strings.

    Change it through :meth:`add` and :meth:`remove` (and the claim forms) only: ``releases``
    counts the changes that gave something back, and the allocator trusts that between two
    of them use only grew.
    """

    __slots__ = ("consumed", "exclusive", "releases", "shared")

    def __init__(self) -> None:
        self.exclusive: dict[str, int] = {}
        self.shared: dict[str, int] = {}
        self.consumed: dict[str, dict[str, Number]] = {}
        #: How many changes so far released a device or capacity (or added a negative amount).
        self.releases = 0

    def copy(self) -> AllocatedState:
        """An independent copy."""
        c = AllocatedState()
        c.exclusive = dict(self.exclusive)
        c.shared = dict(self.shared)
        c.consumed = {k: dict(v) for k, v in self.consumed.items()}
        c.releases = self.releases
        return c

    def add(self, allocation: AllocationResult) -> None:
        """Record one claim's ``status.allocation``. Raises QuantityError for bad amounts."""
        for r in allocation.get("devices", {}).get("results") or ():
            self._apply(r, 1)

    def remove(self, allocation: AllocationResult) -> None:
        """Undo :meth:`add` for the same allocation."""
        for r in allocation.get("devices", {}).get("results") or ():
            self._apply(r, -1)

    def add_claim(self, claim: ResourceClaim) -> None:
        """Record a claim's allocation, if it has one (seeding from pre-allocated claims)."""
        alloc = claim.get("status", {}).get("allocation")
        if alloc:
            self.add(alloc)

    def remove_claim(self, claim: ResourceClaim) -> None:
        """Undo :meth:`add_claim`."""
        alloc = claim.get("status", {}).get("allocation")
        if alloc:
            self.remove(alloc)

    def _apply(self, r: DeviceRequestAllocationResult, sign: int) -> None:
        if r.get("adminAccess"):
            return
        key = device_key(r["driver"], r["pool"], r["device"])
        if sign < 0:
            self.releases += 1
        if r.get("shareID"):
            _bump(self.shared, key, sign)
            agg = self.consumed.setdefault(key, {})
            for name, text in (r.get("consumedCapacity") or {}).items():
                amount = _amount(text)
                if amount < 0 and sign > 0:
                    self.releases += 1  # a negative amount read back gives capacity back
                agg[name] = agg.get(name, 0) + sign * amount
            if key not in self.shared:
                self.consumed.pop(key, None)
        else:
            _bump(self.exclusive, key, sign)

    def in_use(self, key: str) -> bool:
        """Whether the device is held whole by some allocation."""
        return key in self.exclusive


def _bump(d: dict[str, int], key: str, sign: int) -> None:
    n = d.get(key, 0) + sign
    if n > 0:
        d[key] = n
    else:
        d.pop(key, None)
