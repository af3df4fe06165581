"""Faults the twin injects so clients' retry and reconnect paths can be tested.

Every decision comes from one seeded generator, so a test with a fixed seed and a fixed
request sequence sees the same faults every run. The twin's own server (in-process twins) and
the fault proxy (``_proxy``, in front of any API server) take every decision through the same
three calls, in the same order: :meth:`Faults.hold` (pause, then latency) before anything
else, :meth:`Faults.error_for` after authentication, and :meth:`Faults.watch_timeout` for a
watch's lifetime; so a request sequence meets the same faults in front of either.
"""

from __future__ import annotations

import asyncio
import random
import threading
from dataclasses import dataclass

from gpushift_twin.apiserver._status import ApiError

#: Paths never faulted: a client's health probes see the server as it is.
HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz"})

#: Error bodies as kube-apiserver and its filters word them.
_ERRORS = {
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    429: (
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    ),
}


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """What to inject.

    ``error_rate`` is the probability that a request (other than a watch already streaming)
    fails, with a code drawn from ``error_codes``; 429 and 503 carry ``Retry-After:
    retry_after`` seconds. ``latency`` seconds (plus up to ``jitter``) delay every request.
    ``drop_watch_every`` seconds closes each watch stream that long after it opened.
    ``watch_lag`` holds each event of a watch on the named resources (plural names, ``nodes``)
    that many seconds after the change before it is sent, in order: one informer lagging
    behind the others, as under a loaded API server. Honoured by the twin's own server (the
    fault proxy forwards events as they come).
    """

    error_rate: float = 0.0
    error_codes: tuple[int, ...] = (500, 503, 429)
    retry_after: int = 1
    latency: float = 0.0
    jitter: float = 0.0
    drop_watch_every: float = 0.0
    seed: int = 0
    watch_lag: tuple[tuple[str, float], ...] = ()

    @property
    def active(self) -> bool:
        """Whether any per-request fault is configured."""
        return self.error_rate > 0 or self.latency > 0 or self.jitter > 0


class Faults:
    """Seeded fault decisions plus a server-wide pause switch."""

    def __init__(self, config: FaultConfig | None = None) -> None:
        self.config = config or FaultConfig()
        self._random = random.Random(self.config.seed)
        self._lock = threading.Lock()
        self._running = threading.Event()
        self._running.set()
        self.injected = 0  # errors answered so far

    def delay(self) -> float:
        """Seconds to hold the next request."""
        cfg = self.config
        if not cfg.jitter:
            return cfg.latency
        with self._lock:
            return cfg.latency + self._random.uniform(0, cfg.jitter)

    def error(self) -> ApiError | None:
        """The injected error for the next request, if it is to fail."""
        cfg = self.config
        if cfg.error_rate <= 0 or not cfg.error_codes:
            return None
        with self._lock:
            if self._random.random() >= cfg.error_rate:
                return None
            code = self._random.choice(cfg.error_codes)
            self.injected += 1
        reason, message = _ERRORS.get(code, ("InternalError", "injected fault"))
        headers = {"Retry-After": str(cfg.retry_after)} if code in (429, 503) else {}
        details = {"retryAfterSeconds": cfg.retry_after} if headers else None
        return ApiError(code, reason, message, details=details, headers=headers)  # type: ignore[arg-type]

    async def hold(self) -> None:
        """What every request goes through first: wait while paused, then the latency."""
        if self.paused:
            await self.wait_running()
        if self.config.active:
            delay = self.delay()
            if delay > 0:
                await asyncio.sleep(delay)

    def error_for(self, path: str) -> ApiError | None:
        """The injected error for a request to ``path``, if it is to fail; health paths
        (:data:`HEALTH_PATHS`) never are, and draw nothing from the generator."""
        if self.config.error_rate <= 0 or path in HEALTH_PATHS:
            return None
        return self.error()

    def watch_lag(self, plural: str) -> float:
        """Seconds each event of a watch on ``plural`` is held back (0: none)."""
        return dict(self.config.watch_lag).get(plural, 0.0)

    def watch_timeout(self, timeout: float) -> float:
        """How long a watch asking for ``timeout`` seconds may stream: at most
        ``drop_watch_every`` seconds when that is set."""
        drop = self.config.drop_watch_every
        return min(timeout, drop) if drop > 0 else timeout

    # --- pause -------------------------------------------------------------------------------

    def pause(self) -> None:
        """Hold every request until :meth:`resume` (watch streams stay open but silent)."""
        self._running.clear()

    def resume(self) -> None:
        """Release held requests."""
        self._running.set()

    @property
    def paused(self) -> bool:
        """Whether the server is paused."""
        return not self._running.is_set()

    async def wait_running(self) -> None:
        """Return once the server is not paused."""
        while not self._running.is_set():
            await asyncio.sleep(0.01)
