"""Toleration matching as core/v1 Toleration.ToleratesTaint defines it: properties over any
toleration and taint, and the cases the cutover's barrier depends on."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift.engine import tolerates

EFFECTS = st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])
KEYS = st.sampled_from(["gpushift.dev/cutover", "nvidia.com/gpu", "node.kubernetes.io/x"])
VALUES = st.sampled_from(["", "dra", "device-plugin", "5", "-3", "007", "x1"])


@st.composite
def taints(draw: st.DrawFn) -> dict[str, Any]:
    taint = {"key": draw(KEYS), "effect": draw(EFFECTS)}
    value = draw(VALUES)
    if value:
        taint["value"] = value
    return taint


@st.composite
def tolerations(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, values in (
        ("key", KEYS),
        ("operator", st.sampled_from(["Exists", "Equal", "Lt", "Gt", "Bogus"])),
        ("value", VALUES),
        ("effect", EFFECTS),
    ):
        if draw(st.booleans()):
            out[field] = draw(values)
    return out


@given(taints())
def test_an_empty_key_with_exists_tolerates_every_taint(taint: dict[str, Any]) -> None:
    assert tolerates({"operator": "Exists"}, taint)


@given(tolerations(), taints())
def test_a_named_effect_or_key_that_differs_tolerates_nothing(
    tol: dict[str, Any], taint: dict[str, Any]
) -> None:
    if tol.get("effect") and tol["effect"] != taint["effect"]:
        assert not tolerates(tol, taint)
    if tol.get("key") and tol["key"] != taint["key"]:
        assert not tolerates(tol, taint)


@given(tolerations(), taints())
def test_with_key_and_effect_matching_the_operator_decides(
    tol: dict[str, Any], taint: dict[str, Any]
) -> None:
    # An empty effect or key is a wildcard: filling it in with the taint's changes nothing.
    full = {**tol, "key": taint["key"], "effect": taint["effect"]}
    if (
        tol.get("key", taint["key"]) == taint["key"]
        and tol.get("effect", taint["effect"]) == (taint["effect"])
    ):
        assert tolerates(tol, taint) == tolerates(full, taint)
    op = tol.get("operator", "Equal")
    value, theirs = tol.get("value", ""), taint.get("value", "")
    if op == "Exists":
        assert tolerates(full, taint)
    elif op == "Equal":
        assert tolerates(full, taint) == (value == theirs)
    elif op in ("Lt", "Gt") and _numeric(value) and _numeric(theirs):
        want = int(theirs) < int(value) if op == "Lt" else int(theirs) > int(value)
        assert tolerates(full, taint) == want
    elif op in ("Lt", "Gt"):
        assert not tolerates(full, taint)  # a value that is no integer matches nothing
    else:
        assert not tolerates(full, taint)


def _numeric(text: str) -> bool:
    return text.lstrip("+-").isdigit()


HOLD = {"key": "gpushift.dev/cutover", "value": "dra", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "want"),
    [
        # The NVIDIA charts' default: their own key only.
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, False),
        # What many DRA driver and operator values set: every taint.
        ({"operator": "Exists"}, True),
        # Every NoSchedule taint, but no NoExecute one.
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "gpushift.dev/cutover", "operator": "Exists"}, True),
        ({"key": "gpushift.dev/cutover", "value": "dra"}, True),  # Equal by default
        ({"key": "gpushift.dev/cutover", "operator": "Equal", "value": "device-plugin"}, False),
        ({"key": "gpushift.dev/cutover", "operator": "Lt", "value": "9"}, False),
        ({"key": "gpushift.dev/cutover-barrier", "operator": "Exists"}, False),
    ],
)
def test_the_cutover_taint(toleration: dict[str, Any], want: bool) -> None:
    assert tolerates(toleration, HOLD) is want


def test_lt_and_gt_compare_int64_values() -> None:
    taint = {"key": "k", "value": "5", "effect": "NoSchedule"}
    assert tolerates({"key": "k", "operator": "Lt", "value": "6"}, taint)
    assert not tolerates({"key": "k", "operator": "Lt", "value": "5"}, taint)
    assert tolerates({"key": "k", "operator": "Gt", "value": "+4"}, taint)
    assert not tolerates({"key": "k", "operator": "Gt", "value": " 4"}, taint)
    assert not tolerates({"key": "k", "operator": "Gt", "value": str(2**63)}, taint)
