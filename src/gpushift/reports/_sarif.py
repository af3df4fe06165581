"""The ``sarif`` report: SARIF 2.1.0 for code scanning (GitHub, GitLab, editors)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from gpushift.reports._finding import Finding, Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
#: The uriBaseId every result location is relative to: the checked directory.
SRCROOT = "SRCROOT"

# SARIF has no "info" level; "note" is its level for informational results.
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


class Described(Protocol):
    """What SARIF's ``tool.driver.rules[]`` says of a check (a rule, a probe, a judgement)."""

    @property
    def id(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def summary(self) -> str: ...
    @property
    def help_ref(self) -> str: ...


def format_sarif(
    findings: Sequence[Finding], *, rules: Sequence[Described], root: Path, version: str
) -> str:
    """One SARIF 2.1.0 log with one run, every one of ``rules`` described and one result per
    finding (each finding's ``rule`` must be among them).

    Locations are relative URIs against ``%SRCROOT%``, which is declared as ``root``. Findings
    without a line point at the file only (SARIF requires ``startLine >= 1`` when a region is
    given).
    """
    index = {r.id: i for i, r in enumerate(rules)}
    results: list[dict[str, Any]] = []
    for f in sorted(findings, key=Finding.sort_key):
        physical: dict[str, Any] = {"artifactLocation": {"uri": f.path, "uriBaseId": SRCROOT}}
        if f.line is not None and f.line >= 1:
            physical["region"] = {"startLine": f.line}
        results.append(
            {
                "ruleId": f.rule,
                "ruleIndex": index[f.rule],
                "level": _LEVEL[f.severity],
                "message": {"text": f"{f.object}: {f.message}"},
                "locations": [{"physicalLocation": physical}],
            }
        )
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpushift",
                        "version": version,
                        "rules": [
                            {
                                "id": r.id,
                                "shortDescription": {"text": r.summary},
                                "defaultConfiguration": {"level": _LEVEL[r.severity]},
                                "help": {"text": f"{r.summary} See {r.help_ref}."},
                            }
                            for r in rules
                        ],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": root.resolve().as_uri() + "/"}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
