"""Property tests: CONSUMABLE_SHARES is parsed as the kubelet plugin's validateCLIFlags does."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._sharing import ConsumableSharesError, parse_consumable_shares


def shares_count(text: str) -> int | None:
    """N when the plugin takes ``text`` as N shares, None when it refuses it."""
    try:
        mode = parse_consumable_shares(text)
    except ConsumableSharesError:
        return None
    assert isinstance(mode, int)
    return mode


INT64_MAX = 9223372036854775807


def go_atoi_positive(text: str) -> int | None:
    """strconv.Atoi then ``> 0``: sign, then ASCII digits only, within int64."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or any(ch not in string.digits for ch in body):
        return None
    value = int(body) * (-1 if text.startswith("-") else 1)
    return value if 0 < value <= INT64_MAX else None


@given(st.integers(min_value=1, max_value=INT64_MAX))
def test_every_positive_int64_is_a_share_count(n: int) -> None:
    assert shares_count(str(n)) == n
    assert shares_count(f"+{n}") == n


@given(st.integers(max_value=0))
def test_zero_and_negatives_are_not(n: int) -> None:
    assert shares_count(str(n)) is None


@given(st.integers(min_value=INT64_MAX + 1))
def test_beyond_int64_is_not(n: int) -> None:
    assert shares_count(str(n)) is None


@given(st.text(alphabet=string.digits + "+- x٣５", max_size=8))
def test_matches_go_atoi_on_arbitrary_text(text: str) -> None:
    if text == "":
        assert parse_consumable_shares(text) == "disabled"
        return
    assert shares_count(text) == go_atoi_positive(text)


def test_the_error_is_the_plugins() -> None:
    with pytest.raises(ConsumableSharesError, match="must be 'disabled', 'memory', 'unlimited'"):
        parse_consumable_shares("x")
