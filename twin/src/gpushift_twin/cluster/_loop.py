"""A background thread of agents that wakes on store changes (the cluster's, Flux's)."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator
from typing import Any, Self

from gpushift_twin.apiserver import Event, Store

_paused = threading.Lock()
_holders = 0
_resume = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration (process-wide; nested and
    concurrent uses resume it when the last one ends, and only if it was running before).

    A pass over a large cluster allocates hundreds of thousands of containers that live on
    in the store; every few hundred of them the collector would start, and each full
    collection walks the whole store again. Nothing a pass makes is cyclic garbage that
    must go at once, so it is collected after the pass, from the objects the pass left.
    """
    global _holders, _resume
    with _paused:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _paused:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()


class AgentThread:
    """Start, stop and context-manager plumbing for agents that run passes on one thread.

    :meth:`start` watches the whole ``store`` (every event goes to :meth:`_on_event`) and runs
    :meth:`_loop` on a daemon thread named ``thread_name``; :meth:`stop` sets ``_stop``,
    wakes the loop, joins it (10 s at most) and ends the watch. Subclasses implement the
    two hooks; ``_wake`` is theirs to set and wait on.
    """

    def __init__(self, store: Store, *, thread_name: str) -> None:
        self.store = store
        self._thread_name = thread_name
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher: Any = None

    def _on_event(self, event: Event) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        """Run the agents on a background thread (once; a second call does nothing)."""
        if self._thread is None:
            # Watch from the current revision, so the loop wakes on every later change.
            self._watcher = self.store.watch(
                None, deliver=self._on_event, resource_version=str(self.store.resource_version)
            )
            self._thread = threading.Thread(target=self._loop, name=self._thread_name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the agents (the store keeps its objects)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
