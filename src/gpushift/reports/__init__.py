"""Findings and their report formats, shared by rules (``check``), verdict and doctor.

A ``Finding`` is one problem at one file and line about one object, with a ``Severity``.
``format_text``, ``format_json`` and ``format_sarif`` (SARIF 2.1.0) write a list of them.
"""

from __future__ import annotations

from gpushift.reports._finding import Finding, Severity
from gpushift.reports._json import format_json
from gpushift.reports._sarif import SARIF_SCHEMA, SARIF_VERSION, Described, format_sarif
from gpushift.reports._text import format_text

__all__ = [
    "SARIF_SCHEMA",
    "SARIF_VERSION",
    "Described",
    "Finding",
    "Severity",
    "format_json",
    "format_sarif",
    "format_text",
]
