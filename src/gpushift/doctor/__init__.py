"""Probes of a live cluster's GPU stack (``gpushift doctor``).

A registry of probes with stable ids in the style of ``gpushift.rules``; each probe reads the
cluster through ``gpushift.kube`` and yields findings of ``gpushift.reports``.
"""

from __future__ import annotations

__all__: list[str] = []
