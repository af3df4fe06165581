"""What a rule reports: one problem, at one file and line, about one object."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.StrEnum):
    """How bad a finding is. Only ``error`` makes ``gpushift check`` exit 1."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for errors, 1 for warnings, 2 for info: sorts the worst first."""
        return _RANK[self]


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found in a repository.

    ``path`` is relative to the checked directory, with ``/`` separators. ``line`` is 1-based,
    or None when the problem is about the repository as a whole. ``object`` names the offending
    object as ``Kind/namespace/name`` (or ``Kind/name`` for cluster-scoped objects).
    """

    rule: str
    severity: Severity
    path: str
    line: int | None
    object: str
    message: str

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """Order by file, then line, then severity, then rule."""
        return (self.path, self.line or 0, self.severity.rank, self.rule, self.object)
