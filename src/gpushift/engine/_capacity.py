"""Consumable capacity (KEP-5075): what one allocation consumes of a device's capacities.

Mirrors ``structured/internal/incubating/consumable_capacity.go`` in
``k8s.io/dynamic-resource-allocation``:
a request for no amount consumes the policy default, or the whole value without a policy;
requested amounts are rounded up to the policy's range steps or valid values; an amount the
policy forbids, or a capacity the device lacks, makes the device unusable for the request.
Amounts are exact (``int`` where integral, else ``Fraction``); the 64-bit integer rounding
upstream does with ``Quantity.Value()`` is kept where upstream does it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from gpushift import _quantity
from gpushift.engine._dra_types import DeviceCapacity

__all__ = [
    "Amount",
    "Capacity",
    "calculate_consumed_capacity",
    "consumed_capacity",
    "fill_empty_request",
    "fits",
    "parse_amount",
    "parse_capacity",
    "round_up_range",
    "round_up_valid_values",
    "satisfies_requests",
    "violates_policy",
]

Number = int | Fraction


def _num(f: Fraction) -> Number:
    return f.numerator if f.denominator == 1 else f


class Amount(NamedTuple):
    """A quantity and whether it prints in binary (``Mi``) or decimal (``k``) suffixes."""

    value: Number
    binary: bool = False

    def text(self) -> str:
        """The canonical string ``Quantity.String()`` gives for this value and format."""
        v = self.value
        if self.binary and isinstance(v, int) and abs(v) >= 1024 and v % 1024:
            # BinarySI integers that are not a multiple of 1Ki print without suffix.
            return str(v)
        return _quantity.format_quantity(v, binary=self.binary)


def parse_amount(text: str | int) -> Amount:
    """Parse a quantity, remembering its format. Raises QuantityError if invalid."""
    binary = isinstance(text, str) and _quantity.is_binary(text)
    return Amount(_num(_quantity.parse(text)), binary)


@dataclass(frozen=True, slots=True)
class Capacity:
    """One ``capacity.<name>`` of a device: its value and request policy."""

    value: Amount
    has_policy: bool = False
    default: Amount | None = None
    valid_values: tuple[Amount, ...] = ()
    range_min: Amount | None = None
    range_max: Amount | None = None
    range_step: Amount | None = None


def parse_capacity(body: DeviceCapacity) -> Capacity:
    """A Capacity from its ResourceSlice body. Raises QuantityError for bad quantities."""
    policy = body.get("requestPolicy")
    value = parse_amount(body["value"])
    if policy is None:
        return Capacity(value)
    rng = policy.get("validRange")
    return Capacity(
        value,
        True,
        parse_amount(policy["default"]) if "default" in policy else None,
        tuple(parse_amount(v) for v in policy.get("validValues") or ()),
        parse_amount(rng["min"]) if rng is not None and "min" in rng else None,
        parse_amount(rng["max"]) if rng is not None and "max" in rng else None,
        parse_amount(rng["step"]) if rng is not None and "step" in rng else None,
    )


def _ceil(v: Number) -> int:
    # Quantity.Value(): rounded up to an integer.
    return v if isinstance(v, int) else -((-v.numerator) // v.denominator)


def fill_empty_request(capacity: Capacity) -> Amount:
    """Consumption when nothing is requested: the policy default, else the whole value."""
    if capacity.default is not None:
        return capacity.default
    return capacity.value


def round_up_range(requested: Amount, capacity: Capacity) -> Amount:
    """Round up to ``min``, then to ``min + n*step`` (integer arithmetic, BinarySI result).

    Requires ``capacity.range_min``.
    """
    assert capacity.range_min is not None
    if requested.value < capacity.range_min.value:
        return capacity.range_min
    if capacity.range_step is None:
        return requested
    req, step, lo = (
        _ceil(requested.value),
        _ceil(capacity.range_step.value),
        _ceil(capacity.range_min.value),
    )
    added = req - lo
    n, mod = divmod(added, step)
    if mod:
        n += 1
    return Amount(lo + step * n, True)


def round_up_valid_values(requested: Amount, valid_values: tuple[Amount, ...]) -> Amount:
    """The smallest valid value not below the request, else the request (which then violates)."""
    for v in valid_values:
        if v.value >= requested.value:
            return v
    return requested


def calculate_consumed_capacity(requested: Amount | None, capacity: Capacity) -> Amount:
    """What one allocation consumes of ``capacity`` for a request (None: nothing requested)."""
    if requested is None:
        return fill_empty_request(capacity)
    if not capacity.has_policy:
        return requested
    if capacity.range_min is not None:
        return round_up_range(requested, capacity)
    if capacity.valid_values:
        return round_up_valid_values(requested, capacity.valid_values)
    return requested


def violates_policy(consumed: Amount, capacity: Capacity) -> bool:
    """Whether the policy forbids consuming this amount (the default is always allowed)."""
    if not capacity.has_policy:
        return False
    if capacity.default is not None and consumed.value == capacity.default.value:
        return False
    if capacity.range_min is not None:
        if capacity.range_max is not None and consumed.value > capacity.range_max.value:
            return True
        if capacity.range_step is not None:
            added = _ceil(consumed.value) - _ceil(capacity.range_min.value)
            # Go's % truncates toward zero; only "is it zero" matters here.
            return abs(added) % _ceil(capacity.range_step.value) != 0
        return False
    if capacity.valid_values:
        return all(consumed.value != v.value for v in capacity.valid_values)
    return False


def consumed_capacity(
    *, requests: Mapping[str, Amount], capacity: Mapping[str, Capacity]
) -> dict[str, Amount] | None:
    """What one allocation of a multi-allocatable device consumes, for every capacity.

    Returns None when the device cannot serve the request: it lacks a requested capacity, or
    the policy forbids the (rounded) amount.
    """
    for name in requests:
        if name not in capacity:
            return None
    out: dict[str, Amount] = {}
    for name, cap in capacity.items():
        consumed = calculate_consumed_capacity(requests.get(name), cap)
        if violates_policy(consumed, cap):
            return None
        out[name] = consumed
    return out


def fits(
    *,
    consumed: Mapping[str, Amount],
    capacity: Mapping[str, Capacity],
    allocated: Mapping[str, Number] | None,
    allocating: Mapping[str, Number] | None = None,
) -> bool:
    """Whether allocated + allocating + consumed stays within every capacity's value."""
    for name, amount in consumed.items():
        total = amount.value
        if allocated:
            total += allocated.get(name, 0)
        if allocating:
            total += allocating.get(name, 0)
        if total > capacity[name].value.value:
            return False
    return True


def satisfies_requests(*, requests: Mapping[str, Amount], capacity: Mapping[str, Capacity]) -> bool:
    """For a device allocated whole: every requested capacity exists and is large enough."""
    for name, amount in requests.items():
        cap = capacity.get(name)
        if cap is None or amount.value > cap.value.value:
            return False
    return True
