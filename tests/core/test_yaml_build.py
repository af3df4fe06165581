"""The plain document builder gives what PyYAML's SafeConstructor gives, on any YAML."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gpushift import _yaml
from gpushift._errors import InputError
from gpushift._yaml import parse_text

# Scalars chosen to reach every resolver branch YAML 1.1 has: ints in each base and with
# "_", sexagesimal, floats, bools in every spelling, nulls, timestamps, the value key "=",
# merge keys, and strings that only look like one of those.
_SCALARS = st.sampled_from(
    [
        "0", "7", "010", "0o17", "0x1F", "-0x1f", "0b101", "+12", "-0", "1_000", "1:30",
        "190:20:30",
        "1.5", "-.5", "1e3", "6.8523015e+5", ".inf", "-.Inf", ".nan", "1_0.5",
        "yes", "No", "TRUE", "off", "On", "y", "~", "null", "Null", "",
        "2001-12-14", "2001-12-14t21:59:43.10-05:00", "=", "<<", "a", "x y", "'q'", '"0"',
        "!!str 1", "!!int 3", "!!binary aGk=", "!!set {a, b}", "!custom x", "?", "-", ":",
    ]
)  # fmt: skip

_KEYS = st.sampled_from(["a", "b", "1", "true", "~", "<<", "=", "1.5", "[x]", "{y: 1}"])


def _block(depth: int) -> st.SearchStrategy[list[str]]:
    """Lines of a block node at ``depth`` (indentation 2 per level)."""
    pad = "  " * depth
    leaf = _SCALARS.map(lambda v: [v])
    if depth >= 3:
        return leaf
    child = st.deferred(lambda: _block(depth + 1))
    mapping = st.lists(
        st.tuples(_KEYS, st.one_of(leaf, child), st.sampled_from(["", "&a ", "&b "])),
        min_size=1,
        max_size=4,
    ).map(
        lambda items: (
            [""]
            + [
                f"{pad}{k}: {anchor}{v[0]}"
                if len(v) == 1
                else f"{pad}{k}: {anchor}".rstrip() + "\n" + "\n".join(v[1:])
                for k, v, anchor in items
            ]
        )
    )
    sequence = st.lists(st.one_of(leaf, child), min_size=1, max_size=3).map(
        lambda items: (
            [""]
            + [f"{pad}- {v[0]}" if len(v) == 1 else f"{pad}-\n" + "\n".join(v[1:]) for v in items]
        )
    )
    alias = st.sampled_from([["*a"], ["*b"]])
    return st.one_of(leaf, mapping, sequence, alias)


def _read(text: str) -> str:
    try:
        return repr([d.data for d in parse_text(text, "f.yaml")])
    except InputError as err:
        return f"error: {err}"
    except RecursionError:
        return "recursion"


def _both(text: str) -> tuple[str, str]:
    """The documents as read, and as read with every document built by PyYAML's
    SafeConstructor (the builder swapped for the reference, all else as it is)."""
    fast = _read(text)
    with patch.object(_yaml, "construct", lambda loader, node: loader.construct_document(node)):
        slow = _read(text)
    return fast, slow


@settings(max_examples=400, deadline=None)
@given(lines=_block(0))
@example(lines=["", "a: &a", "  b: 1", "c: *a", "<<: *a"])
@example(lines=["", "a: 0x1F", "b: 1:30", "c: .nan", "d: 2001-12-14", "e: =", "f: ~"])
def test_any_block_document_builds_as_pyyaml_builds_it(lines: list[str]) -> None:
    text = "\n".join(lines).lstrip("\n") + "\n"
    fast, slow = _both(text)
    assert fast == slow, text


_DATA: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(data=_DATA, flow=st.sampled_from([None, True, False]))
def test_any_dumped_value_reads_back_as_pyyaml_reads_it(data: Any, flow: bool | None) -> None:
    text = yaml.safe_dump(data, default_flow_style=flow)
    fast, slow = _both(text)
    assert fast == slow, text


def test_a_recursive_alias_is_left_to_pyyaml() -> None:
    (doc,) = parse_text("&a [1, *a]\n", "f.yaml")
    assert doc.data[1] is doc.data


def _pyyaml(fn: Any, text: str) -> str:
    try:
        return repr(fn())
    except yaml.YAMLError as err:
        return f"{type(err).__name__}: {err}"
    except RecursionError:
        return "recursion"


@settings(max_examples=300, deadline=None)
@given(lines=_block(0), documents=st.integers(min_value=1, max_value=3))
@example(lines=["", "a: &a", "  b: 1", "c: *a"], documents=2)
def test_load_and_load_all_read_as_pyyaml_reads(lines: list[str], documents: int) -> None:
    # gpushift._yaml.load/load_all stand in for yaml.load/load_all with the same loader.
    body = "\n".join(lines).lstrip("\n") + "\n"
    text = "---\n".join([body] * documents)
    assert _pyyaml(lambda: _yaml.load_all(text), text) == _pyyaml(
        lambda: list(yaml.load_all(text, Loader=_yaml.LOADER)), text
    ), text
    assert _pyyaml(lambda: _yaml.load(text), text) == _pyyaml(
        lambda: yaml.load(text, Loader=_yaml.LOADER), text
    ), text
    assert _yaml.load("") is None and _yaml.load_all("") == []
