"""One control-plane program as a child process: started with its log in a file, stopped with
SIGTERM then SIGKILL, and killed by the kernel if gpushift itself dies."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from gpushift._children import die_with_parent


class Component:
    """A program of the control plane, its log file, and how to tell it is ready."""

    def __init__(
        self, name: str, argv: list[str], *, log: Path, ready: Callable[[], bool] | None = None
    ) -> None:
        self.name = name
        self.argv = argv
        self.log = log
        self.ready = ready or (lambda: True)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the program with its output going to the log file."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                close_fds=True,
                # A kill -9 of gpushift still ends the control plane; components are started
                # from the main thread, which the kernel's signal follows.
                preexec_fn=die_with_parent(signal.SIGKILL),
            )

    @property
    def exited(self) -> int | None:
        """The exit status when the program has ended, else None."""
        return None if self.proc is None else self.proc.poll()

    def stop(self, *, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; waits for the program to end."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()

    def mentions(self, text: str) -> bool:
        """Whether the log holds ``text`` anywhere."""
        try:
            return text in self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False

    def tail(self, lines: int = 3) -> str:
        """The last non-empty lines of the log, joined with `` | ``."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        kept = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(kept[-lines:])
