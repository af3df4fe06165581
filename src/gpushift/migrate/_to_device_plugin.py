"""Planning ``--to device-plugin``: the reverse commit of ``--to dra``."""

from __future__ import annotations

from gpushift.gitops import Repo
from gpushift.migrate._common import Builder, Options, refuse_errors
from gpushift.migrate._plan import Plan


def plan_to_device_plugin(
    repo: Repo, texts: dict[str, str], files: frozenset[str], options: Options
) -> Plan:
    """The edits that move ``repo`` back to the device plugin."""
    refuse_errors(repo)
    return Builder("device-plugin", texts, files).plan()
