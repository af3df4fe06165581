"""Models of the charts that matter for GPU sharing, as the twin installs them.

Not a general Helm: each model renders what its chart's templates render for the values
that change an outcome (``render``), refuses what the chart refuses (``ChartError`` with the
chart's message), and the operators the charts install act on their custom resources
(``Operators``): the GPU Operator's ClusterPolicy and llmkube's InferenceService. Any other
chart installs nothing and says so (``Rendered.message``).
"""

from __future__ import annotations

from gpushift.twin.charts._common import ChartError, Rendered
from gpushift.twin.charts._operators import Operators
from gpushift.twin.charts._registry import identity, render
from gpushift.twin.charts._writes import apply, delete, kind_of, served

__all__ = [
    "ChartError",
    "Operators",
    "Rendered",
    "apply",
    "delete",
    "identity",
    "kind_of",
    "render",
    "served",
]
