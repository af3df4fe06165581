"""Running every rule over a repository and packaging the result for the writers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushift._errors import InputError
from gpushift.gitops import Repo, Summary, load_repo, summarize
from gpushift.rules import (
    _allocator,
    _claims,
    _platform,
    _shares,
    _timeslicing,
    _values,
    _workloads,
)
from gpushift.rules._base import tree_at
from gpushift.rules._context import Context
from gpushift.rules._finding import Finding, Severity
from gpushift.rules._json import format_json
from gpushift.rules._sarif import format_sarif
from gpushift.rules._text import format_text

_Family = Callable[..., Iterator[Finding]]

#: Every rule family; each yields findings for several rule ids (see the registry).
FAMILIES: tuple[_Family, ...] = (
    _allocator.check,
    _shares.check,
    _timeslicing.check,
    _platform.check,
    _claims.check,
    _workloads.check,
    _values.check,
)


def check_repo(repo: Repo, *, base: Repo | None = None) -> list[Finding]:
    """Every finding for ``repo`` (``base``: the same tree at ``--base``), sorted, no repeats."""
    ctx = Context(repo, base)
    seen: set[Finding] = set()
    out: list[Finding] = []
    for family in FAMILIES:
        for finding in family(ctx=ctx):
            if finding not in seen:
                seen.add(finding)
                out.append(finding)
    out.sort(key=Finding.sort_key)
    return out


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of ``gpushift check``: the findings and the repository summary."""

    root: Path
    findings: tuple[Finding, ...]
    summary: Summary

    @property
    def exit_code(self) -> int:
        """1 when any finding is an error, else 0."""
        return 1 if any(f.severity is Severity.ERROR for f in self.findings) else 0

    def summary_dict(self) -> dict[str, Any]:
        """The ``summary`` object of the json report."""
        return self.summary.to_dict()

    def to_text(self, *, colour: bool = False) -> str:
        """The text report."""
        return format_text(self.findings, colour=colour)

    def to_json(self) -> str:
        """The json report."""
        return format_json(self.findings, summary=self.summary_dict())

    def to_sarif(self) -> str:
        """The SARIF 2.1.0 report."""
        from gpushift import __version__

        return format_sarif(self.findings, root=self.root, version=__version__)


def run_check(paths: Sequence[str | Path], *, base: str | None = None) -> Report:
    """Load the repository under ``paths``, run every rule and summarise it.

    ``base`` is a git revision: ResourceClaimTemplates are compared with that revision's tree.
    Raises InputError for a missing path, paths that hold no Kubernetes object, or an
    unusable revision.
    """
    repo = load_repo(paths)
    if not repo.objects and not repo.errors:
        shown = ", ".join(str(p) for p in paths)
        raise InputError("no Kubernetes objects (documents with apiVersion and kind)", path=shown)
    base_repo = None
    if base is not None:
        with tree_at(paths, rev=base) as old_paths:
            base_repo = load_repo(old_paths)
    findings = check_repo(repo, base=base_repo)
    return Report(repo.root, tuple(findings), summarize(repo))
