"""The rules behind ``gpushift check``: stable ids, findings and report formats.

``run_check(paths)`` loads a repository, runs every rule and returns a ``Report`` that renders
as text, json or SARIF 2.1.0. ``RULES`` lists every rule with its id, severity and summary.
"""

from __future__ import annotations

from gpushift.reports._finding import Finding, Severity
from gpushift.reports._json import format_json
from gpushift.reports._sarif import format_sarif
from gpushift.reports._text import format_text
from gpushift.rules._registry import DOCS_PATH, RULES, Rule, rule
from gpushift.rules._run import FAMILIES, Report, check_repo, run_check

__all__ = [
    "DOCS_PATH",
    "FAMILIES",
    "RULES",
    "Finding",
    "Report",
    "Rule",
    "Severity",
    "check_repo",
    "format_json",
    "format_sarif",
    "format_text",
    "rule",
    "run_check",
]
