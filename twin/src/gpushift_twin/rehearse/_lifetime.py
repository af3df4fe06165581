"""The processes a rehearsal starts belong to it: a Ctrl-C or SIGTERM stops them all.

The twin and each cutover run in sessions of their own, so a terminal's Ctrl-C does not hit a
cutover in the middle of a change; the rehearsal relays instead. On the first SIGINT or
SIGTERM, :class:`Lifetime` raises :class:`Interrupted` in the main thread and ignores repeats
while the way out runs: each child gets SIGTERM, newest first (the cutover stops between two
changes and journals, before the twin it talks to goes), a bounded wait, then SIGKILL for its
whole process group. Every child also gets a parent-death signal, so a kill -9 of the
rehearsal takes them too.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import Any

from gpushift import common

#: Wall seconds a child gets between SIGTERM and SIGKILL on the way out; a cutover, the fault
#: proxy (on the upstream control plane) and the twin stop within 10 s together. The twin on
#: the upstream control plane takes about 10 s to stop etcd, kube-apiserver and its kin and
#: remove their data directory: after a Ctrl-C it is killed first, and the next upstream
#: start removes the directory it leaves on /dev/shm.
GRACE = {"cutover": 4.0, "proxy": 1.0, "twin": 3.0, "upstream twin": 5.0}


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM reached the rehearsal; its message is the one line to print."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Lifetime:
    """The children of one rehearsal, and the signal relay that stops them."""

    def __init__(self) -> None:
        self._live: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._lock = threading.Lock()
        self._pending: int | None = None
        self._holding = 0
        self._fired = False
        #: Children that were still running when the rehearsal stopped them.
        self.stopped = 0

    # --- children ------------------------------------------------------------------------

    def spawn(
        self, kind: str, argv: Sequence[str], *, death_signal: int, **popen: Any
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in a session of its own, with ``death_signal`` when this process
        dies, and keep it until :meth:`stop`. ``kind`` is a key of :data:`GRACE`."""
        with self._held():
            proc: subprocess.Popen[bytes] = subprocess.Popen(
                list(argv),
                start_new_session=True,
                preexec_fn=common.die_with_parent(death_signal),
                **popen,
            )
            with self._lock:
                self._live.append((kind, proc))
        return proc

    def stop(self, proc: subprocess.Popen[bytes], *, grace: float | None = None) -> None:
        """Stop one child (SIGTERM, ``grace`` seconds, SIGKILL to its group) and forget it."""
        with self._lock:
            kind = next((k for k, p in self._live if p is proc), "")
        wait = GRACE.get(kind, 3.0) if grace is None else grace
        # Kept until it has stopped: a signal that cuts this short leaves it to stop_all.
        running = common.stop_child(proc, grace=wait)
        with self._lock:
            self._live = [(k, p) for k, p in self._live if p is not proc]
        if running and self._fired:
            self.stopped += 1

    def stop_all(self) -> None:
        """Stop every child still kept, newest first."""
        while True:
            with self._lock:
                if not self._live:
                    return
                proc = self._live[-1][1]
            self.stop(proc)

    # --- signals -------------------------------------------------------------------------

    @contextlib.contextmanager
    def relay(self) -> Iterator[Lifetime]:
        """SIGINT and SIGTERM raise :class:`Interrupted` (once) while inside; outside the main
        thread, nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    @property
    def interrupted(self) -> bool:
        """Whether a signal arrived."""
        return self._fired

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._fired:
            return  # the way out is running; a second Ctrl-C does not cut it short
        self._fired = True
        if self._holding:
            self._pending = signum  # raised once the child is started and kept
            return
        raise Interrupted(signum)

    @contextlib.contextmanager
    def _held(self) -> Iterator[None]:
        self._holding += 1
        try:
            yield
        finally:
            self._holding -= 1
            pending, self._pending = self._pending, None
            if pending is not None and not self._holding:
                raise Interrupted(pending)
