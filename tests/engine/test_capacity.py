"""Consumable capacity: expectations worked out from consumable_capacity.go by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift.engine._capacity import (
    Amount,
    calculate_consumed_capacity,
    consumed_capacity,
    fill_empty_request,
    fits,
    parse_amount,
    parse_capacity,
    round_up_range,
    round_up_valid_values,
    satisfies_requests,
    violates_policy,
)

GI = 2**30
MI = 2**20

# scheduler_perf resourceslice-consumablecapacity.yaml
PERF_MEMORY = parse_capacity(
    {"value": "80Gi", "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}}}
)
# NVIDIA consumableShares: 5 on a 24 GiB card
SHARES = parse_capacity(
    {
        "value": "5",
        "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "5", "step": "1"}},
    }
)
MEMORY = parse_capacity(
    {
        "value": "24Gi",
        "requestPolicy": {"default": "0", "validRange": {"min": "0", "max": "24Gi", "step": "1Mi"}},
    }
)


def q(text: str) -> Amount:
    return parse_amount(text)


def test_no_request_consumes_the_policy_default() -> None:
    assert fill_empty_request(PERF_MEMORY).value == GI
    assert calculate_consumed_capacity(None, SHARES).value == 1
    assert calculate_consumed_capacity(None, MEMORY).value == 0


def test_no_request_and_no_policy_consumes_the_whole_value() -> None:
    cap = parse_capacity({"value": "40Gi"})
    assert calculate_consumed_capacity(None, cap) == Amount(40 * GI, True)


def test_request_without_policy_is_used_as_is() -> None:
    cap = parse_capacity({"value": "40Gi"})
    assert calculate_consumed_capacity(q("3Gi"), cap).value == 3 * GI


def test_range_without_step_raises_to_min_and_keeps_larger_requests() -> None:
    assert calculate_consumed_capacity(q("512Mi"), PERF_MEMORY).value == GI
    assert calculate_consumed_capacity(q("10Gi"), PERF_MEMORY).value == 10 * GI
    # 10Gi + 1 byte: no step, so no rounding
    assert calculate_consumed_capacity(Amount(10 * GI + 1), PERF_MEMORY).value == 10 * GI + 1


def test_range_step_rounds_up_to_min_plus_n_steps() -> None:
    # 1.5Mi → 2 steps of 1Mi above min 0
    assert round_up_range(q("1536Ki"), MEMORY) == Amount(2 * MI, True)
    # one byte → one step
    assert round_up_range(q("1"), MEMORY).value == MI
    # exact multiples stay
    assert round_up_range(q("4Gi"), MEMORY).value == 4 * GI
    # min 2, step 3: 4 is 2 above min → one step → 5
    odd = parse_capacity(
        {"value": "20", "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "3"}}}
    )
    assert round_up_range(q("4"), odd).value == 5
    assert round_up_range(q("8"), odd).value == 8
    assert round_up_range(q("1"), odd).value == 2


def test_range_rounding_uses_integer_value_of_fractional_requests() -> None:
    # Quantity.Value() rounds 1500m up to 2 before the step arithmetic.
    assert calculate_consumed_capacity(q("1500m"), SHARES).value == 2


def test_range_result_prints_in_binary_si() -> None:
    assert round_up_range(q("3"), SHARES).text() == "3"
    assert round_up_range(q("4000Ki"), MEMORY).text() == "4Mi"


def test_valid_values_round_up_to_the_next_value() -> None:
    cap = parse_capacity(
        {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1Gi", "4Gi", "8Gi"]}}
    )
    assert calculate_consumed_capacity(q("2Gi"), cap).value == 4 * GI
    assert calculate_consumed_capacity(q("4Gi"), cap).value == 4 * GI
    over = round_up_valid_values(q("9Gi"), cap.valid_values)
    assert over.value == 9 * GI
    assert violates_policy(over, cap)
    assert not violates_policy(q("8Gi"), cap)


def test_policy_violations() -> None:
    assert violates_policy(q("6"), SHARES)  # above max
    assert not violates_policy(q("5"), SHARES)
    assert not violates_policy(q("1"), SHARES)
    stepped = parse_capacity(
        {"value": "10", "requestPolicy": {"default": "1", "validRange": {"min": "0", "step": "2"}}}
    )
    assert violates_policy(q("3"), stepped)  # not min + n*step
    assert not violates_policy(q("4"), stepped)
    assert not violates_policy(q("1"), stepped)  # the default is always allowed
    assert not violates_policy(q("7"), parse_capacity({"value": "5"}))  # no policy


def test_every_capacity_is_consumed_and_listed() -> None:
    caps = {"memory": MEMORY, "shares": SHARES}
    got = consumed_capacity(requests={}, capacity=caps)
    assert got is not None
    assert {k: v.text() for k, v in got.items()} == {"memory": "0", "shares": "1"}
    got = consumed_capacity(requests={"memory": q("4Gi")}, capacity=caps)
    assert got is not None
    assert {k: v.text() for k, v in got.items()} == {"memory": "4Gi", "shares": "1"}


def test_requesting_a_missing_capacity_makes_the_device_unusable() -> None:
    assert consumed_capacity(requests={"cores": q("1")}, capacity={"shares": SHARES}) is None


def test_request_above_max_makes_the_device_unusable() -> None:
    assert consumed_capacity(requests={"shares": q("6")}, capacity={"shares": SHARES}) is None


def test_fits_adds_allocated_and_in_flight_amounts() -> None:
    caps = {"shares": SHARES}
    one = {"shares": Amount(1)}
    assert fits(consumed=one, capacity=caps, allocated={"shares": 4})
    assert not fits(consumed=one, capacity=caps, allocated={"shares": 4}, allocating={"shares": 1})
    assert not fits(consumed={"shares": Amount(2)}, capacity=caps, allocated={"shares": 4})
    assert fits(consumed=one, capacity=caps, allocated=None)


def test_whole_device_requests_act_as_a_lower_bound() -> None:
    caps = {"memory": parse_capacity({"value": "24Gi"})}
    assert satisfies_requests(requests={"memory": q("24Gi")}, capacity=caps)
    assert not satisfies_requests(requests={"memory": q("25Gi")}, capacity=caps)
    assert not satisfies_requests(requests={"cores": q("1")}, capacity=caps)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (Amount(2000, True), "2000"),  # BinarySI, not a multiple of 1Ki
        (Amount(2048, True), "2Ki"),
        (Amount(0, True), "0"),
        (Amount(5, True), "5"),
        (Amount(2000, False), "2k"),
        (Amount(24 * GI, True), "24Gi"),
    ],
)
def test_amount_text_is_quantity_string(amount: Amount, text: str) -> None:
    assert amount.text() == text


# --- properties -------------------------------------------------------------------------------


@given(
    lo=st.integers(0, 10**6),
    step=st.integers(1, 10**4),
    extra=st.integers(-(10**6), 10**7),
)
def test_range_rounding_lands_on_the_smallest_step_not_below_the_request(
    lo: int, step: int, extra: int
) -> None:
    cap = parse_capacity(
        {
            "value": str(10**9),
            "requestPolicy": {
                "default": str(lo),
                "validRange": {"min": str(lo), "step": str(step)},
            },
        }
    )
    request = max(0, lo + extra)
    got = round_up_range(Amount(request), cap).value
    assert got >= max(request, lo)
    assert (got - lo) % step == 0
    assert got - max(request, lo) < step
    assert not violates_policy(Amount(got), cap)


@given(v=st.integers(-(2**62), 2**62), binary=st.booleans())
def test_amount_text_parses_back_to_the_same_value(v: int, binary: bool) -> None:
    assert parse_amount(Amount(v, binary).text()).value == v


@given(
    values=st.lists(st.integers(1, 1000), min_size=1, max_size=10, unique=True),
    request=st.integers(0, 1100),
)
def test_valid_values_rounding_picks_the_smallest_value_not_below(
    values: list[int], request: int
) -> None:
    values.sort()
    cap = parse_capacity(
        {
            "value": "2000",
            "requestPolicy": {"default": str(values[0]), "validValues": [str(v) for v in values]},
        }
    )
    got = calculate_consumed_capacity(Amount(request), cap).value
    bigger = [v for v in values if v >= request]
    if bigger:
        assert got == bigger[0]
        assert not violates_policy(Amount(got), cap)
    else:
        assert got == request
        assert violates_policy(Amount(got), cap)
