"""The rules behind ``gpushift check``: stable ids, findings and report formats.

``run_check(paths)`` loads a repository, runs every rule and returns a ``Report`` that renders
as text, json or SARIF 2.1.0; ``run_checks(paths)`` checks each path as its own repository
(unless ``merge_paths``) and returns ``Reports``. ``RULES`` lists every rule with its id,
severity and summary.
"""

from __future__ import annotations

from gpushift.rules._finding import Finding, Severity
from gpushift.rules._json import format_json
from gpushift.rules._registry import DOCS_PATH, RULES, Rule, rule
from gpushift.rules._run import FAMILIES, Report, Reports, check_repo, run_check, run_checks
from gpushift.rules._sarif import format_sarif
from gpushift.rules._text import format_text

__all__ = [
    "DOCS_PATH",
    "FAMILIES",
    "RULES",
    "Finding",
    "Report",
    "Reports",
    "Rule",
    "Severity",
    "check_repo",
    "format_json",
    "format_sarif",
    "format_text",
    "rule",
    "run_check",
    "run_checks",
]
