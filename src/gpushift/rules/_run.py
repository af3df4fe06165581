"""Running every rule over a repository and packaging the result for the writers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushift._errors import InputError
from gpushift.gitops import Repo, Summary, load_repo, summarize
from gpushift.reports import Finding, Severity, format_json, format_sarif, format_text
from gpushift.rules import (
    _advertisers,
    _allocator,
    _appsets,
    _claims,
    _flux_refs,
    _gpucluster,
    _platform,
    _plugin_sharing,
    _preemption,
    _shares,
    _timeslicing,
    _values,
    _workloads,
)
from gpushift.rules._base import tree_at
from gpushift.rules._context import Context
from gpushift.rules._registry import RULES
from gpushift.rules._summary_text import format_summary

_Family = Callable[..., Iterator[Finding]]
#: What a file given as a repository may be: manifests, as kubectl reads them.
_MANIFEST_SUFFIXES = frozenset({".yaml", ".yml", ".json"})

#: Every rule family; each yields findings for several rule ids (see the registry).
FAMILIES: tuple[_Family, ...] = (
    _allocator.check,
    _advertisers.check,
    _gpucluster.check,
    _plugin_sharing.check,
    _shares.check,
    _timeslicing.check,
    _platform.check,
    _flux_refs.check,
    _claims.check,
    _workloads.check,
    _values.check,
    _appsets.check,
    _preemption.check,
)


def check_repo(
    repo: Repo, *, base: Repo | None = None, kubernetes_version: tuple[int, int] = (1, 37)
) -> list[Finding]:
    """Every finding for ``repo`` (``base``: the same tree at ``--base``; ``kubernetes_version``
    the cluster's release), sorted, no repeats."""
    ctx = Context(repo, base, kubernetes_version)
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
        """The text report: the summary first, then the findings by file."""
        return format_summary(self.summary) + format_text(self.findings, colour=colour)

    def to_json(self) -> str:
        """The json report."""
        return format_json(self.findings, summary=self.summary_dict())

    def to_sarif(self) -> str:
        """The SARIF 2.1.0 report."""
        from gpushift import __version__

        return format_sarif(self.findings, rules=RULES, root=self.root, version=__version__)


@dataclass(frozen=True, slots=True)
class Reports:
    """One report per checked repository (``gpushift check A B`` checks two), in order.

    With one repository every format is that report's own; with several, text has one block
    per repository under a ``== PATH ==`` header, json is ``{"repositories": [{"path", "summary",
    "findings"}]}`` and SARIF has one run per repository.
    """

    reports: tuple[tuple[str, Report], ...]

    @property
    def exit_code(self) -> int:
        """1 when any repository has an error finding, else 0."""
        return max((r.exit_code for _, r in self.reports), default=0)

    def to_text(self, *, colour: bool = False) -> str:
        """The text report(s)."""
        if len(self.reports) == 1:
            return self.reports[0][1].to_text(colour=colour)
        return "\n".join(f"== {p} ==\n{r.to_text(colour=colour)}" for p, r in self.reports)

    def to_json(self) -> str:
        """The json report(s)."""
        if len(self.reports) == 1:
            return self.reports[0][1].to_json()
        body = [{"path": p, **json.loads(r.to_json())} for p, r in self.reports]
        return json.dumps({"repositories": body}, indent=2) + "\n"

    def to_sarif(self) -> str:
        """The SARIF 2.1.0 log: one run per repository."""
        logs = [json.loads(r.to_sarif()) for _, r in self.reports]
        log = logs[0]
        log["runs"] = [run for one in logs for run in one["runs"]]
        return json.dumps(log, indent=2) + "\n"


def run_checks(
    paths: Sequence[str | Path],
    *,
    base: str | None = None,
    merge_paths: bool = False,
    kubernetes_version: tuple[int, int] = (1, 37),
) -> Reports:
    """Check each path as its own repository (or all as one with ``merge_paths``).

    Paths of one repository's findings are relative to that path. Raises InputError for a
    missing path or an unusable revision.
    """
    if merge_paths or len(paths) <= 1:
        one = run_check(paths, base=base, kubernetes_version=kubernetes_version)
        return Reports(((", ".join(str(p) for p in paths), one),))
    return Reports(
        tuple(
            (str(p), run_check([p], base=base, kubernetes_version=kubernetes_version))
            for p in paths
        )
    )


def run_check(
    paths: Sequence[str | Path],
    *,
    base: str | None = None,
    kubernetes_version: tuple[int, int] = (1, 37),
) -> Report:
    """Load the repository under ``paths``, run every rule and summarise it.

    ``base`` is a git revision: ResourceClaimTemplates are compared with that revision's tree.
    Raises InputError for a missing path, a file that is not YAML or JSON (``check
    README.md``), paths that hold no Kubernetes object, or an unusable revision.
    """
    for path in paths:
        if Path(path).is_file() and Path(path).suffix.lower() not in _MANIFEST_SUFFIXES:
            raise InputError(
                "not a repository: give a directory, or a .yaml, .yml or .json file", path=str(path)
            )
    repo = load_repo(paths)
    if not repo.objects and not repo.errors:
        shown = ", ".join(str(p) for p in paths)
        raise InputError("no Kubernetes objects (documents with apiVersion and kind)", path=shown)
    base_repo = None
    if base is not None:
        with tree_at(paths, rev=base) as old_paths:
            base_repo = load_repo(old_paths)
    findings = check_repo(repo, base=base_repo, kubernetes_version=kubernetes_version)
    return Report(repo.root, tuple(findings), summarize(repo))
