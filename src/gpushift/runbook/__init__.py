"""The drain-boundary cutover between time-slicing and DRA, as planned steps.

A step is a frozen value (what to patch, what to wait for); a pure planner turns a cluster's
state into steps, and one executor, the only module here that imports ``gpushift.kube``, carries
them out, journaled and logged (``gpushift cutover`` / ``rollback``).
"""

from __future__ import annotations

__all__: list[str] = []
