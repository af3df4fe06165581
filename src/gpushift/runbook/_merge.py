"""The merge command: run through the shell, its output kept as its last lines.

The command's stdout and stderr are read together, in the order it wrote them, and only the
last :data:`TAIL_LINES` lines (each cut to :data:`LINE_CHARS` characters) are kept: what the
journal records and a failed run shows, bounded whatever the command prints.
"""

from __future__ import annotations

import signal
import subprocess
from collections import deque
from dataclasses import dataclass

from gpushift._children import die_with_parent
from gpushift._obj import Obj

#: Lines of the merge command's output kept, and the characters kept of each.
TAIL_LINES = 20
LINE_CHARS = 400


@dataclass(frozen=True, slots=True)
class MergeRun:
    """How the merge command ended: its exit code and its last lines of output."""

    command: str
    exit_code: int
    lines: tuple[str, ...]
    #: Lines of output before the kept ones.
    dropped: int = 0

    def to_json(self) -> Obj:
        """As journaled (the ``mergeOutput`` data) and in the final result."""
        return {
            "command": self.command,
            "exitCode": self.exit_code,
            "lines": list(self.lines),
            "linesDropped": self.dropped,
        }

    @classmethod
    def from_json(cls, data: Obj) -> MergeRun:
        """From :meth:`to_json`."""
        return cls(
            str(data.get("command") or ""),
            int(data.get("exitCode") or 0),
            tuple(str(x) for x in data.get("lines") or ()),
            int(data.get("linesDropped") or 0),
        )


class MergeFailedError(Exception):
    """The merge command exited non-zero."""

    def __init__(self, run: MergeRun) -> None:
        super().__init__(f"the merge command exited {run.exit_code}")
        self.run = run


def _cut(line: str) -> str:
    line = line.rstrip("\r\n")
    if len(line) > LINE_CHARS:
        return line[:LINE_CHARS] + f"… ({len(line) - LINE_CHARS} more characters)"
    return line


def run_merge(shell: str) -> MergeRun:
    """Run ``shell`` with ``sh -c`` (stdin inherited), keeping its last lines of output."""
    kept: deque[str] = deque(maxlen=TAIL_LINES)
    total = 0
    with subprocess.Popen(
        shell,
        shell=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        # A cutover killed mid-merge takes its merge shell with it (a shell that execs its
        # command takes that too); --resume runs the merge again unless the source moved.
        preexec_fn=die_with_parent(signal.SIGTERM),
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            total += 1
            kept.append(_cut(line))
        code = proc.wait()
    return MergeRun(shell, code, tuple(kept), total - len(kept))
