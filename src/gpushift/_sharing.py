"""The one sharing vocabulary: which component hands out GPUs, and how a card is shared.

``Allocator`` names the component; ``Sharing`` is how each card is shared as gpushift's config
and ``--sharing`` write it: ``exclusive``, ``memory``, ``unlimited`` or N (time-slicing replicas
under the device plugin, consumable shares under DRA). ``ConsumableShares`` is the DRA kubelet
plugin's own ``CONSUMABLE_SHARES`` value, parsed as the plugin parses it.

The bounds every reader applies to counts live here too, so a value one command (render,
simulate, check, migrate, the runbook) accepts is never one another flags.
"""

from __future__ import annotations

import enum
import re
from typing import Final, Literal, get_args

from gpushift._errors import InputError


class Allocator(enum.StrEnum):
    """Which component hands out GPUs."""

    #: The NVIDIA GPU Operator, with its device plugin.
    GPU_OPERATOR = "gpu-operator"
    #: The standalone NVIDIA device plugin chart.
    DEVICE_PLUGIN = "device-plugin"
    #: dra-driver-nvidia-gpu (with the GPU Operator for the driver stack).
    DRA = "dra"
    #: The GPU Operator's own DRA stack: a GPUCluster instead of a ClusterPolicy (26.7.0).
    GPUCLUSTER = "gpucluster"

    @property
    def is_dra(self) -> bool:
        """Whether GPUs are handed out as ResourceClaims (else as ``nvidia.com/gpu``)."""
        return self in (Allocator.DRA, Allocator.GPUCLUSTER)


SharingMode = Literal["exclusive", "memory", "unlimited"]
#: A mode, or N: time-slicing replicas (device plugin) or consumable shares (DRA).
Sharing = SharingMode | int
SHARING_MODES: Final[tuple[SharingMode, ...]] = get_args(SharingMode)
SHARING_HELP: Final = "must be exclusive, memory, unlimited or a positive integer"
#: The device plugin refuses fewer time-slicing replicas (api/config/v1 ``replicas must be >= 2``).
MIN_TIME_SLICING_REPLICAS: Final = 2

#: The kubelet plugin's ``CONSUMABLE_SHARES``: a mode, or N shares per GPU.
ConsumableShares = Literal["disabled", "memory", "unlimited"] | int
#: The DRA kubelet plugin parses ``--consumable-shares N`` with Go's strconv.Atoi: int64.
INT64_MAX: Final = 2**63 - 1
_INT64_MAX: Final = INT64_MAX
#: Physical GPUs one node can hold. The largest boards carry 16 (HGX has 8); the bound keeps
#: per-card ledgers small whatever a node object claims.
MAX_GPUS_PER_NODE: Final = 64
#: Time-slicing replicas per card: far beyond any useful share of one GPU (the device plugin
#: lists one virtual device per replica to the kubelet).
MAX_REPLICAS_PER_CARD: Final = 1024
#: Whole-GPU units a node can advertise, and so the most one container can be given: counts
#: beyond it are refused up front rather than tracked unit by unit.
MAX_UNITS_PER_NODE: Final = MAX_GPUS_PER_NODE * MAX_REPLICAS_PER_CARD
_ATOI = re.compile(r"[+-]?[0-9]+")


class ConsumableSharesError(InputError):
    """A ``CONSUMABLE_SHARES`` value the kubelet plugin refuses at startup."""


def parse_sharing(text: str, *, option: str = "--sharing") -> Sharing:
    """``text`` as typed for ``option``: exclusive, memory, unlimited or a positive integer.

    Raises InputError naming ``option`` for anything else.
    """
    value = text.strip()
    for mode in SHARING_MODES:
        if value == mode:
            return mode
    if value.isascii() and value.isdigit():
        n = int(value)
        if 1 <= n <= INT64_MAX:
            return n
        if n > INT64_MAX:
            raise InputError(f"{option}: {value} is more than 2**63-1, the most the driver reads")
    raise InputError(f"{option}: {SHARING_HELP}, got {text!r}")


def sharing_problem(*, allocator: Allocator, sharing: Sharing) -> str | None:
    """Why ``sharing`` cannot be served by ``allocator``, or None when it can.

    memory and unlimited are DRA consumable-shares modes; the device plugin time-slices a whole
    card N ways with N >= 2; DRA takes any positive N.
    """
    if isinstance(sharing, int):
        if sharing < 1:
            return f"sharing: {SHARING_HELP}, got {sharing}"
        if not allocator.is_dra and sharing < MIN_TIME_SLICING_REPLICAS:
            return (
                f"sharing: time-slicing needs at least {MIN_TIME_SLICING_REPLICAS} replicas (the "
                f"device plugin refuses replicas < {MIN_TIME_SLICING_REPLICAS}); use 'exclusive' "
                "for one pod per GPU"
            )
        return None
    if not allocator.is_dra and sharing in ("memory", "unlimited"):
        return (
            f"sharing: {sharing!r} needs allocator dra: it is a consumable-shares mode of the "
            f"DRA driver, and the device plugin ({allocator.value}) can only time-slice a whole "
            "card N ways"
        )
    return None


def consumable_shares(sharing: Sharing) -> ConsumableShares:
    """The DRA driver's ``consumableShares`` for ``sharing`` (``exclusive`` is ``disabled``)."""
    return "disabled" if sharing == "exclusive" else sharing


def time_slicing_replicas(sharing: Sharing) -> int:
    """The device plugin's replicas for ``sharing``: N, or 1 (no time-slicing) otherwise."""
    return sharing if isinstance(sharing, int) else 1


def parse_consumable_shares(value: str | int | None) -> ConsumableShares:
    """Parse ``CONSUMABLE_SHARES`` as the kubelet plugin's ``validateCLIFlags`` does.

    ``""`` and None mean ``"disabled"``. Returns the mode, or N for a positive integer (Go's
    ``strconv.Atoi``: optional sign, ASCII digits, int64 range). Raises ConsumableSharesError
    with the plugin's wording for anything else.
    """
    # NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/main.go validateCLIFlags.
    if value is None:
        return "disabled"
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, int):
        text = str(value)
    else:
        # validateCLIFlags compares the raw flag; only the empty default means "disabled".
        text = value
    if text in ("", "disabled"):
        return "disabled"
    if text == "memory":
        return "memory"
    if text == "unlimited":
        return "unlimited"
    n = atoi(text)
    if n is not None and n > 0:
        return n
    raise ConsumableSharesError(
        f'invalid value for --consumable-shares: "{value}" '
        "(must be 'disabled', 'memory', 'unlimited', or a positive integer)"
    )


def atoi(text: str) -> int | None:
    """Go's ``strconv.Atoi`` on 64-bit: optional sign, ASCII digits, int64 range; else None."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not (digits.isascii() and digits.isdigit()):
        return None
    n = int(text)
    return n if -_INT64_MAX - 1 <= n <= _INT64_MAX else None


def atoi_count(text: str) -> int | None:
    """N when ``text`` is a positive integer as Go's strconv.Atoi reads it (int64), else None."""
    if not _ATOI.fullmatch(text):
        return None
    n = int(text)
    return n if 0 < n <= INT64_MAX else None


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
