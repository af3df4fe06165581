"""The ``json`` report: ``{"summary": {...}, "findings": [...]}``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from gpushift.reports._finding import Finding


class FindingBody(TypedDict):
    """One finding as it appears in the json report."""

    rule: str
    severity: str
    path: str
    line: int | None
    object: str
    message: str


def finding_body(finding: Finding) -> FindingBody:
    """The json form of one finding."""
    return {
        "rule": finding.rule,
        "severity": finding.severity.value,
        "path": finding.path,
        "line": finding.line,
        "object": finding.object,
        "message": finding.message,
    }


def format_json(findings: Sequence[Finding], *, summary: Mapping[str, Any]) -> str:
    """The report as indented JSON with findings in file and line order."""
    body = {
        "summary": dict(summary),
        "findings": [finding_body(f) for f in sorted(findings, key=Finding.sort_key)],
    }
    return json.dumps(body, indent=2) + "\n"
