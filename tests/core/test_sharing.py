"""The sharing vocabulary: --sharing, allocator bounds, the plugin's CONSUMABLE_SHARES."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._errors import InputError
from gpushift._sharing import (
    Allocator,
    ConsumableSharesError,
    atoi,
    consumable_shares,
    parse_consumable_shares,
    parse_sharing,
    sharing_problem,
    time_slicing_replicas,
)

# --- --sharing parser -----------------------------------------------------------------


@given(st.integers(min_value=1, max_value=10**6))
def test_parse_sharing_integers(n: int) -> None:
    assert parse_sharing(str(n)) == n
    assert parse_sharing(f" {n} ") == n


@given(st.text(max_size=12))
def test_parse_sharing_refuses_everything_else(text: str) -> None:
    stripped = text.strip()
    if stripped in ("exclusive", "memory", "unlimited"):
        assert parse_sharing(text) == stripped
    elif stripped.isascii() and stripped.isdigit() and int(stripped) >= 1:
        assert parse_sharing(text) == int(stripped)
    else:
        with pytest.raises(InputError, match="--sharing: must be exclusive"):
            parse_sharing(text)


def test_parse_sharing_words() -> None:
    assert parse_sharing("memory") == "memory"
    assert parse_sharing("unlimited") == "unlimited"
    assert parse_sharing("exclusive") == "exclusive"
    for bad in ("0", "-3", "5.5", "Memory", "", "²", "٣"):
        with pytest.raises(InputError):
            parse_sharing(bad)


def test_an_other_option_is_named_in_the_error() -> None:
    with pytest.raises(InputError, match=r"^--to-sharing: must be exclusive"):
        parse_sharing("lots", option="--to-sharing")


# --- bounds -------------------------------------------------------------------------------------


@pytest.mark.parametrize("allocator", [Allocator.GPU_OPERATOR, Allocator.DEVICE_PLUGIN])
def test_the_device_plugin_time_slices_two_or_more_ways_only(allocator: Allocator) -> None:
    assert sharing_problem(allocator=allocator, sharing="exclusive") is None
    assert sharing_problem(allocator=allocator, sharing=2) is None
    assert "at least 2 replicas" in str(sharing_problem(allocator=allocator, sharing=1))
    for mode in ("memory", "unlimited"):
        problem = sharing_problem(allocator=allocator, sharing=mode)
        assert problem is not None
        assert f"'{mode}' needs allocator dra" in problem


def test_dra_takes_every_mode_and_any_positive_count() -> None:
    for sharing in ("exclusive", "memory", "unlimited", 1, 2, 64):
        assert sharing_problem(allocator=Allocator.DRA, sharing=sharing) is None
    assert sharing_problem(allocator=Allocator.DRA, sharing=0) is not None


def test_translations_to_the_charts() -> None:
    assert consumable_shares("exclusive") == "disabled"
    assert consumable_shares("memory") == "memory"
    assert consumable_shares(5) == 5
    assert time_slicing_replicas("exclusive") == 1
    assert time_slicing_replicas(4) == 4


# --- CONSUMABLE_SHARES --------------------------------------------------------------------------


def test_consumable_shares_as_the_plugin_reads_it() -> None:
    assert parse_consumable_shares(None) == "disabled"
    assert parse_consumable_shares("") == "disabled"
    assert parse_consumable_shares("disabled") == "disabled"
    assert parse_consumable_shares("memory") == "memory"
    assert parse_consumable_shares("+7") == 7
    assert parse_consumable_shares(3) == 3
    for bad in ("0", "-1", "1_0", " 5", "٣", "Memory", True, str(2**63)):
        with pytest.raises(ConsumableSharesError, match="invalid value for --consumable-shares"):
            parse_consumable_shares(bad)


@given(st.integers(min_value=-(2**64), max_value=2**64))
def test_atoi_keeps_the_int64_range(n: int) -> None:
    inside = -(2**63) <= n < 2**63
    assert atoi(str(n)) == (n if inside else None)
