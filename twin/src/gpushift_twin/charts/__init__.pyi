"""Type stub of gpushift_twin.charts: its public names, which __init__.py loads on first use."""

from ._common import ChartError, Rendered
from ._operators import Operators, gpu_node_labels
from ._registry import identity, render
from ._writes import apply, delete, kind_of, served

__all__ = [
    "ChartError",
    "Operators",
    "Rendered",
    "apply",
    "delete",
    "gpu_node_labels",
    "identity",
    "kind_of",
    "render",
    "served",
]
