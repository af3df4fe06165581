"""One sharing vocabulary: the sharing modes, and the bounds every reader applies to counts.

render (``--sharing``, ``gpushift.yaml``), simulate (``--sharing``, node labels and
allocatable counts) and check (``consumableShares``) validate sharing values here, so a value
one command accepts is never one another flags.
"""

from __future__ import annotations

import re

from gpushift._errors import InputError

#: Sharing modes besides a count N.
SHARING_MODES = ("exclusive", "memory", "unlimited")
#: The DRA kubelet plugin parses ``--consumable-shares N`` with Go's strconv.Atoi: int64.
INT64_MAX = 2**63 - 1
#: Physical GPUs one node can hold. The largest boards carry 16 (HGX has 8); the bound keeps
#: per-card ledgers small whatever a node object claims.
MAX_GPUS_PER_NODE = 64
#: Time-slicing replicas per card: far beyond any useful share of one GPU (the device plugin
#: lists one virtual device per replica to the kubelet).
MAX_REPLICAS_PER_CARD = 1024
#: Whole-GPU units a node can advertise, and so the most one container can be given: counts
#: beyond it are refused up front rather than tracked unit by unit.
MAX_UNITS_PER_NODE = MAX_GPUS_PER_NODE * MAX_REPLICAS_PER_CARD

SHARING_HELP = "must be exclusive, memory, unlimited or a positive integer"
_ATOI = re.compile(r"[+-]?[0-9]+")


def atoi_count(text: str) -> int | None:
    """N when ``text`` is a positive integer as Go's strconv.Atoi reads it (int64), else None."""
    if not _ATOI.fullmatch(text):
        return None
    n = int(text)
    return n if 0 < n <= INT64_MAX else None


def parse_sharing(text: str, *, option: str = "--sharing") -> str | int:
    """A sharing value as typed: one of :data:`SHARING_MODES`, or N in 1..2**63-1.

    Raises InputError naming ``option`` for anything else (a value the driver would refuse).
    """
    value = text.strip()
    if value in SHARING_MODES:
        return value
    if value.isascii() and value.isdigit():
        n = int(value)
        if 1 <= n <= INT64_MAX:
            return n
        if n > INT64_MAX:
            raise InputError(f"{option}: {value} is more than 2**63-1, the most the driver reads")
    raise InputError(f"{option}: {SHARING_HELP}, got {text!r}")


def label_count(raw: str | None, *, key: str, high: int) -> int | None:
    """A positive count label (``nvidia.com/gpu.count``, ``nvidia.com/gpu.replicas``) as an
    int, or None when absent.

    Raises ValueError with a one-line reason for a value that is not an integer in 1..high:
    GPU feature discovery never writes 0, a negative count or more cards than a node holds,
    so such a label is bad input, not a reason to guess.
    """
    if raw is None:
        return None
    text = str(raw).strip()
    if not re.fullmatch(r"[0-9]+|-[0-9]+", text):
        raise ValueError(f"label {key}={raw!r} is not an integer")
    n = int(text)
    if n < 1:
        raise ValueError(f"label {key}={raw!r} must be at least 1")
    if n > high:
        raise ValueError(f"label {key}={raw!r} is more than a node holds (at most {high})")
    return n
