"""Models of the charts that matter for GPU sharing, as the twin installs them.

Not a general Helm: each model renders what its chart's templates render for the values
that change an outcome (``render``), refuses what the chart refuses (``ChartError`` with the
chart's message), and the operators the charts install act on their custom resources
(``Operators``): the GPU Operator's ClusterPolicy and llmkube's InferenceService. Any other
chart installs nothing and says so (``Rendered.message``).
"""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: a command that
# needs one room does not import the others (docs/decisions.md, lazy packages).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
