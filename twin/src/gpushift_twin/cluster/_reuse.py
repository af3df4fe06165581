"""The pieces of ``gpushift.engine`` and ``gpushift.gitops`` the agents build on, in one place."""

from __future__ import annotations

from gpushift.engine import (
    DAEMONSET_TOLERATIONS,
    CardLedger,
    Tenant,
    find_hazards,
    node_matches_pod,
    pin_daemon_pod,
    template_hash,
    untolerated_taint,
)
from gpushift.gitops import Source, TimeSlicingConfig
from gpushift.gitops import parse_time_slicing_config as parse_device_plugin_config

__all__ = [
    "DAEMONSET_TOLERATIONS",
    "CardLedger",
    "Source",
    "Tenant",
    "TimeSlicingConfig",
    "find_hazards",
    "node_matches_pod",
    "parse_device_plugin_config",
    "pin_daemon_pod",
    "template_hash",
    "untolerated_taint",
]
