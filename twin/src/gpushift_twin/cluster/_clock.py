"""The cluster's virtual clock: cluster time runs ``time_scale`` times faster than wall time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

# Wall seconds over which cluster time, started in the past, stays at or behind wall time.
HORIZON = 24 * 3600.0
#: The most the start is put back: 30 years, so that at any time scale cluster time starts after
#: 1970 and stays a valid RFC 3339 timestamp (a huge scale then catches up sooner).
MAX_LEAD = 30 * 365 * 24 * 3600.0


class VirtualClock:
    """Cluster time, ``time_scale`` virtual seconds per wall second, from a start instant.

    Every agent reads time here, so at ``time_scale=100`` the kubelet's 5-minute device-plugin
    grace passes in 3 wall seconds. :meth:`advance` jumps ahead (tests, ``--time-scale`` 0).

    Object timestamps are cluster time, and clients judge them against their own wall clock
    (``kubectl describe`` prints ``<invalid>`` for an age in the future). So without an
    explicit ``start`` the clock starts :attr:`lead` = ``(time_scale - 1) × horizon`` seconds
    before wall time: running ``time_scale`` times faster, it reaches wall time only after
    ``horizon`` wall seconds (a day by default), and until then no timestamp it gives is ahead
    of wall time. The lead is at most :data:`MAX_LEAD`, so at a huge time scale (tests run at
    10^6) the clock catches up after ``MAX_LEAD / (time_scale - 1)`` wall seconds instead. A
    jump by :meth:`advance` spends that lead too.
    """

    def __init__(
        self,
        *,
        time_scale: float = 1.0,
        start: datetime | None = None,
        horizon: float = HORIZON,
    ) -> None:
        if time_scale < 0:
            raise ValueError(f"time scale must not be negative, got {time_scale}")
        if horizon < 0:
            raise ValueError(f"horizon must not be negative, got {horizon}")
        self.time_scale = time_scale
        self.horizon = horizon
        lead = min(max(time_scale - 1.0, 0.0) * horizon, MAX_LEAD)
        self.lead = 0.0 if start is not None else lead
        origin = start or datetime.now(UTC) - timedelta(seconds=self.lead)
        # Whole seconds, as object timestamps have; flooring keeps the start behind wall time.
        self._start = origin.replace(microsecond=0)
        self._wall0 = time.monotonic()
        self._skipped = 0.0
        self._lock = threading.Lock()

    def seconds(self) -> float:
        """Virtual seconds since the start."""
        with self._lock:
            return (time.monotonic() - self._wall0) * self.time_scale + self._skipped

    def now(self) -> datetime:
        """The current cluster time (UTC)."""
        return self._start + timedelta(seconds=self.seconds())

    def at(self, seconds: float) -> datetime:
        """The cluster time ``seconds`` virtual seconds after the start."""
        return self._start + timedelta(seconds=seconds)

    def wall_delay(self, virtual: float) -> float:
        """Wall seconds until ``virtual`` seconds of cluster time pass (inf when frozen)."""
        if virtual <= 0:
            return 0.0
        return virtual / self.time_scale if self.time_scale > 0 else float("inf")

    def advance(self, seconds: float) -> None:
        """Jump cluster time ahead by ``seconds``."""
        with self._lock:
            self._skipped += max(seconds, 0.0)
