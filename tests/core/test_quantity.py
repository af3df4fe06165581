from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._quantity import QuantityError, format_quantity, parse, value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24Gi", 24 * 2**30),
        ("1Mi", 2**20),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("1e3", 1000),
        ("2k", 2000),
        (5, 5),
    ],
)
def test_parse_known_values(text: str | int, expected: Fraction | int) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("bad", ["", "1.2.3", "Gi", "5 Gi", "1KB", "abc"])
def test_parse_rejects_non_quantities(bad: str) -> None:
    with pytest.raises(QuantityError, match="quantities must match the regular expression"):
        parse(bad)


@pytest.mark.parametrize(
    ("q", "binary", "text"),
    [
        (24 * 2**30, True, "24Gi"),
        (1536 * 2**20, True, "1536Mi"),
        (1000, False, "1k"),
        (1500, False, "1500"),
        (Fraction(1, 2), False, "500m"),
        (0, True, "0"),
    ],
)
def test_format_matches_kubernetes_canonical_form(q: int, binary: bool, text: str) -> None:
    assert format_quantity(q, binary=binary) == text


def test_value_rounds_up_like_quantity_value() -> None:
    assert value("1500m") == 2
    assert value("1") == 1


@given(st.integers(min_value=0, max_value=2**62), st.booleans())
def test_format_then_parse_round_trips(n: int, binary: bool) -> None:
    assert parse(format_quantity(n, binary=binary)) == n
