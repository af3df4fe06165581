"""Health snapshots of a cluster and verdicts on them (``gpushift snapshot`` / ``verdict``).

A snapshot is the data read from the cluster once; a judge compares snapshots and reports
findings with ``gpushift.reports``.
"""

from __future__ import annotations

__all__: list[str] = []
