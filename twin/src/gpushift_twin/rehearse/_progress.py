"""Progress of a rehearsal on stderr: a live line on a terminal (rich), plain timestamped
lines otherwise, so a long run always says what it is doing."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from typing import TextIO

from rich.console import Console
from rich.status import Status

from gpushift.common import Obj


class Progress:
    """Says each phase and each cutover step as it starts; quiet when ``enabled`` is False."""

    def __init__(self, *, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self._console = Console(file=self.stream, highlight=False) if self.tty else None
        self._status: Status | None = None
        self._started = time.monotonic()
        self._phase = ""
        self._waiting = ""
        #: Where the rehearsal is: the phase, and the cutover's step in it (also when quiet).
        self.current = ""

    def phase(self, text: str) -> None:
        """A new phase (starting the twin, the cutover to DRA, …)."""
        self._phase = self.current = text
        self._say(text, keep=True)

    def note(self, text: str) -> None:
        """A line that stays, said once (what the rehearsal made of the repository)."""
        self._say(text, keep=True)

    def event(self, obj: Obj) -> None:
        """A cutover event: step starts, waits and the final result."""
        if obj.get("kind") == "CutoverResult":
            self._say(f"{self._phase}: {obj.get('result')}", keep=True)
            return
        kind, step = obj.get("event"), obj.get("step")
        if kind == "step-start":
            self.current = f"{self._phase}: {step}"
            self._say(self.current, keep=True)
        elif kind == "wait":
            self._say(f"{self._phase}: {step}: waiting for {obj.get('for')}")

    def waiting(self, text: str) -> None:
        """What the phase waits for now; said only when it changes (polls repeat it)."""
        line = f"{self._phase}: waiting for {text}"
        if line != self._waiting:
            self._waiting = line
            self._say(line)

    def _say(self, text: str, *, keep: bool = False) -> None:
        """On a terminal, ``keep`` lines stay above the live line; waits only update it."""
        if not self.enabled:
            return
        elapsed = time.monotonic() - self._started
        if self._console is not None:
            line = f"[{elapsed:6.1f}s] {text}"
            if keep:
                self._console.print(line)
            if self._status is None:
                self._status = self._console.status(line)
                self._status.start()
            else:
                self._status.update(line)
            return
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        print(f"{stamp} {text}", file=self.stream, flush=True)

    def close(self) -> None:
        """End the live line."""
        if self._status is not None:
            self._status.stop()
            self._status = None
