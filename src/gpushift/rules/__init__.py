"""The rules behind ``gpushift check``: stable ids and a report of findings.

``run_check(paths)`` loads a repository, runs every rule and returns a ``Report`` that renders
as text, json or SARIF 2.1.0 with the writers of ``gpushift.reports``; ``run_checks(paths)``
checks each path as its own repository (unless ``merge_paths``) and returns ``Reports``.
``RULES`` lists every rule with its id, severity and summary. ``preemption_hazards`` finds
the GPU consumers that rely on PriorityClass preemption, which DRA ends (for migrate, the
cutover's preflight and the verdict too).
"""

from __future__ import annotations

from gpushift.rules._platform import DriverLocation, driver_location
from gpushift.rules._preemption import (
    DEFAULT_KUBERNETES_VERSION,
    PreemptionHazard,
    Ranked,
    lacks_dra_preemption,
    parse_kubernetes_version,
    preemption_hazards,
    repo_preemption_hazards,
)
from gpushift.rules._registry import DOCS_PATH, RULES, Rule, rule
from gpushift.rules._run import FAMILIES, Report, Reports, check_repo, run_check, run_checks

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "DOCS_PATH",
    "FAMILIES",
    "RULES",
    "DriverLocation",
    "PreemptionHazard",
    "Ranked",
    "Report",
    "Reports",
    "Rule",
    "check_repo",
    "driver_location",
    "lacks_dra_preemption",
    "parse_kubernetes_version",
    "preemption_hazards",
    "repo_preemption_hazards",
    "rule",
    "run_check",
    "run_checks",
]
