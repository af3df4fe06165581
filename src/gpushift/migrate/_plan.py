"""The plan of a migration as frozen values: edits inside documents, files added and removed.

An ``Edit`` names a file (relative to the repository root), the document index in it and a key
path from the document root. The planner makes them; the writer applies them with a ruamel.yaml
round trip. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

Keys = tuple[str | int, ...]


class _Absent(Enum):
    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


#: The old value of a key that is not written (an edit that adds it).
ABSENT = _Absent.ABSENT

#: ``set`` a mapping key; ``delete`` it (and mappings it leaves empty, up to ``prune`` levels);
#: ``append`` an item to a sequence (created when missing); ``remove`` the item equal to ``old``
#: from a sequence; ``comment`` writes ``new`` as a comment above the key at ``path``.
EditOp = Literal["set", "delete", "append", "remove", "comment"]
#: The allocator a migration moves to (``gpushift migrate --to``).
MigrationTarget = Literal["dra", "device-plugin", "gpucluster"]


@dataclass(frozen=True, slots=True)
class Edit:
    """One change inside one YAML document."""

    file: str
    doc: int
    path: Keys
    op: EditOp
    old: Any
    new: Any
    reason: str
    #: For ``delete``: how many parent mappings to delete as well when the deletion empties them.
    prune: int = 0
    #: For ``set`` of a new key: the existing key it goes after (None: at the end).
    after: str | None = None

    def describe(self) -> str:
        """One line: where, what, and why."""
        where = ".".join(str(k) for k in self.path)
        if self.op == "set":
            what = f"{where}: {_short(self.old)} -> {_short(self.new)}"
        elif self.op == "delete":
            what = f"{where}: removed ({_short(self.old)})"
        elif self.op == "append":
            what = f"{where}: + {_short(self.new)}"
        elif self.op == "remove":
            what = f"{where}: - {_short(self.old)}"
        else:
            what = f"{where}: comment added"
        return f"{self.file}: {what} ({self.reason})"


@dataclass(frozen=True, slots=True)
class NewFile:
    """A file the migration adds; ``text`` is its whole content."""

    file: str
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class RemovedFile:
    """A file the migration deletes."""

    file: str
    reason: str


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a migration changes, and what it leaves to a person.

    ``notes`` are the things a person must look at (consumers left on bridging, files that are
    not in the repository, values it does not understand), each naming a file and line where
    one applies.
    """

    to: MigrationTarget
    edits: tuple[Edit, ...] = ()
    new_files: tuple[NewFile, ...] = ()
    removed_files: tuple[RemovedFile, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def empty(self) -> bool:
        """Whether the plan changes nothing."""
        return not (self.edits or self.new_files or self.removed_files)

    def files(self) -> tuple[str, ...]:
        """Every file the plan touches, sorted."""
        out = {e.file for e in self.edits}
        out |= {f.file for f in self.new_files}
        out |= {f.file for f in self.removed_files}
        return tuple(sorted(out))

    def changes(self) -> tuple[str, ...]:
        """One line per change, in file order."""
        lines = [f"{f.file}: new file ({f.reason})" for f in self.new_files]
        lines += [f"{f.file}: deleted ({f.reason})" for f in self.removed_files]
        lines += [e.describe() for e in self.edits]
        return tuple(sorted(lines))

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``gpushift migrate -o json`` (without the diff)."""
        return {
            "to": self.to,
            "edits": [
                {
                    "file": e.file,
                    "doc": e.doc,
                    "path": list(e.path),
                    "op": e.op,
                    "old": None if e.old is ABSENT else e.old,
                    "new": None if e.new is ABSENT else e.new,
                    "reason": e.reason,
                }
                for e in self.edits
            ],
            "new_files": [{"file": f.file, "reason": f.reason} for f in self.new_files],
            "removed_files": [{"file": f.file, "reason": f.reason} for f in self.removed_files],
            "needs_a_person": list(self.notes),
        }


def _short(value: Any) -> str:
    if value is ABSENT:
        return "(unset)"
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."
