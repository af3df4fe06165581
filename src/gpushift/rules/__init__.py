"""The rules behind ``gpushift check``: stable ids and a report of findings.

``run_check(paths)`` loads a repository, runs every rule and returns a ``Report`` that renders
as text, json or SARIF 2.1.0 with the writers of ``gpushift.reports``; ``run_checks(paths)``
checks each path as its own repository (unless ``merge_paths``) and returns ``Reports``.
``RULES`` lists every rule with its id, severity and summary.
"""

from __future__ import annotations

from gpushift.rules._registry import DOCS_PATH, RULES, Rule, rule
from gpushift.rules._run import FAMILIES, Report, Reports, check_repo, run_check, run_checks

__all__ = [
    "DOCS_PATH",
    "FAMILIES",
    "RULES",
    "Report",
    "Reports",
    "Rule",
    "check_repo",
    "rule",
    "run_check",
    "run_checks",
]
