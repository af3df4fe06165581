"""gpushift: move NVIDIA GPU sharing between the device plugin and DRA safely.

Import from here; modules whose names start with an underscore are private.
"""

from __future__ import annotations

from gpushift._errors import InputError, UsageError
from gpushift._kinds import KINDS, Kind, by_kind, lookup

__version__ = "0.1.0"

__all__ = [
    "KINDS",
    "InputError",
    "Kind",
    "UsageError",
    "__version__",
    "by_kind",
    "lookup",
]
