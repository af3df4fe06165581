"""Pieces of ``gpushift.engine`` and ``gpushift.gitops`` the agents use that are not exported yet.

Kept in one place so that, once the engine's package exports them, only this module changes.
"""

from __future__ import annotations

from gpushift.engine._filters import (
    node_matches_pod,
    untolerated_taint,
)
from gpushift.engine._hazards import find as find_hazards
from gpushift.engine._ledger import CardLedger, Tenant
from gpushift.engine._workloads import _DS_TOLERATIONS as DAEMONSET_TOLERATIONS
from gpushift.engine._workloads import template_hash
from gpushift.gitops._model import Source, TimeSlicingConfig
from gpushift.gitops._timeslicing import parse_config as parse_device_plugin_config

__all__ = [
    "DAEMONSET_TOLERATIONS",
    "CardLedger",
    "Source",
    "Tenant",
    "TimeSlicingConfig",
    "find_hazards",
    "node_matches_pod",
    "parse_device_plugin_config",
    "template_hash",
    "untolerated_taint",
]
