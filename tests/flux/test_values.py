"""The Helm values merge and helm-controller's targetPath, against hand-derived results."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpushift.flux import merge_values, value_at_target_path


def test_maps_merge_lists_replace_null_deletes() -> None:
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 1, "c": {"keep": True}}
    over = {"a": {"y": [3], "z": None}, "b": None, "c": None, "d": [4]}
    assert merge_values(base, over) == {"a": {"x": 1, "y": [3]}, "d": [4]}


def test_a_map_over_a_scalar_replaces_it_and_a_scalar_over_a_map_too() -> None:
    assert merge_values({"a": 1, "b": {"x": 1}}, {"a": {"x": 2}, "b": 3}) == {
        "a": {"x": 2},
        "b": 3,
    }


def test_any_mapping_merges_not_only_dict() -> None:
    # The model's merge once checked for ``dict`` and the twin's for ``Mapping``: a read-only
    # mapping (chart defaults are frozen) replaced the base in one and merged in the other.
    # Helm merges every map.
    over = MappingProxyType({"a": MappingProxyType({"y": 2})})
    assert merge_values({"a": {"x": 1}}, over) == {"a": {"x": 1, "y": 2}}


def test_inputs_are_not_changed() -> None:
    base = {"a": {"x": 1}}
    over = {"a": {"x": None}}
    merge_values(base, over)
    assert base == {"a": {"x": 1}}
    assert over == {"a": {"x": None}}


def test_target_path_nests_dotted_keys_and_keeps_escaped_dots() -> None:
    assert value_at_target_path("a.b", "v") == {"a": {"b": "v"}}
    assert value_at_target_path("a\\.b.c", 1) == {"a.b": {"c": 1}}
    assert value_at_target_path("", 1) == {}


_KEYS = st.sampled_from(["a", "b", "c"])
_LEAF = st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), max_size=2))
_TREE: st.SearchStrategy[dict[str, Any]] = st.recursive(
    st.dictionaries(_KEYS, _LEAF, max_size=3),
    lambda inner: st.dictionaries(_KEYS, st.one_of(_LEAF, inner), max_size=3),
    max_leaves=8,
)


@given(_TREE)
def test_merging_onto_nothing_or_nothing_on_top_is_identity(values: dict[str, Any]) -> None:
    assert merge_values({}, values) == values
    assert merge_values(values, {}) == values


@given(_TREE, _TREE)
def test_every_top_level_key_of_the_override_wins_unless_both_are_maps(
    base: dict[str, Any], over: dict[str, Any]
) -> None:
    out = merge_values(base, over)
    for k, v in over.items():
        if not (isinstance(v, dict) and isinstance(base.get(k), dict)):
            assert out[k] == v
    for k, v in base.items():
        if k not in over:
            assert out[k] == v
