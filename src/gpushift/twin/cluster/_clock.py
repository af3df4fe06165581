"""The cluster's virtual clock: cluster time runs ``time_scale`` times faster than wall time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class VirtualClock:
    """Cluster time, ``time_scale`` virtual seconds per wall second, from a start instant.

    Every agent reads time here, so at ``time_scale=100`` the kubelet's 5-minute device-plugin
    grace passes in 3 wall seconds. :meth:`advance` jumps ahead (tests, ``--time-scale`` 0).
    """

    def __init__(self, *, time_scale: float = 1.0, start: datetime | None = None) -> None:
        if time_scale < 0:
            raise ValueError(f"time scale must not be negative, got {time_scale}")
        self.time_scale = time_scale
        self._start = (start or datetime.now(UTC)).replace(microsecond=0)
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
