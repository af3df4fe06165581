"""The writer on the file forms repositories carry: no final newline, CRLF, several documents,
flow style, anchors. An edit either lands and the file still parses to what was asked, with its
own line ends, or it is refused (InputError); it never yields a damaged file."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpushift._errors import InputError
from gpushift.migrate import ABSENT, Edit, edit_text


def _e(
    path: tuple[Any, ...], op: str, *, old: Any = ABSENT, new: Any = ABSENT, doc: int = 0
) -> Edit:
    return Edit("f.yaml", doc, path, op, old, new, "test")  # type: ignore[arg-type]


_WORD = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True).filter(
    lambda s: yaml.safe_load(s) == s
)
_LEAF = st.one_of(st.integers(-5, 500), _WORD)
_TREE = st.recursive(
    st.dictionaries(_WORD, _LEAF, min_size=1, max_size=4),
    lambda inner: st.dictionaries(
        _WORD,
        st.one_of(_LEAF, inner, st.lists(_LEAF, min_size=1, max_size=3)),
        min_size=1,
        max_size=4,
    ),
    max_leaves=12,
)


def _paths(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """Every (path, kind) an edit can aim at: leaves, lists and mappings."""
    out: list[tuple[tuple[str, ...], str]] = []
    for k, v in tree.items():
        path = (*prefix, k)
        if isinstance(v, dict):
            out.append((path, "map"))
            out += _paths(v, path)
        elif isinstance(v, list):
            out.append((path, "list"))
        else:
            out.append((path, "leaf"))
    return out


def _get(tree: Any, path: tuple[str, ...]) -> Any:
    for k in path:
        tree = tree[k]
    return tree


def _plan(tree: dict[str, Any], data: st.DataObject, doc: int) -> tuple[Edit, dict[str, Any]]:
    """One edit of ``tree`` and the tree it must give."""
    path, kind = data.draw(st.sampled_from(_paths(tree)))
    want = copy.deepcopy(tree)
    value = data.draw(_LEAF)
    if kind == "list":
        _get(want, path).append(value)
        return _e(path, "append", new=value, doc=doc), want
    if kind == "map":
        key = data.draw(_WORD.filter(lambda w: w not in _get(tree, path)))
        _get(want, path)[key] = value
        return _e((*path, key), "set", new=value, doc=doc), want
    old = _get(tree, path)
    parent = _get(want, path[:-1])
    if len(parent) > 1 and data.draw(st.booleans()):
        del parent[path[-1]]
        return _e(path, "delete", old=old, doc=doc), want
    assume(value != old)
    parent[path[-1]] = value
    return _e(path, "set", old=old, new=value, doc=doc), want


def _check(text: str, edit: Edit, want: list[Any]) -> None:
    try:
        out = edit_text(text, [edit], display="f.yaml")
    except InputError:
        return  # refused, named: nothing is written
    assert list(yaml.safe_load_all(out)) == want
    assert out.endswith("\n") == text.endswith("\n")
    if "\r\n" in text:
        assert out.replace("\r\n", "").count("\n") == 0
    else:
        assert "\r" not in out


_FORMS = st.fixed_dictionaries(
    {
        "final_newline": st.booleans(),
        "crlf": st.booleans(),
        "documents": st.integers(1, 3),
        "marker": st.booleans(),
        "flow": st.booleans(),
    }
)


@settings(max_examples=80, deadline=None)
@given(trees=st.lists(_TREE, min_size=3, max_size=3), form=_FORMS, data=st.data())
def test_property_any_form_parses_after_an_edit_or_is_refused(
    trees: list[dict[str, Any]], form: dict[str, Any], data: st.DataObject
) -> None:
    docs = trees[: form["documents"]]
    texts = [
        yaml.safe_dump(t, sort_keys=False, default_flow_style=bool(form["flow"])) for t in docs
    ]
    sep = "---\n"
    text = (sep if form["marker"] else "") + sep.join(texts)
    if not form["final_newline"]:
        text = text.rstrip("\n")
    if form["crlf"]:
        text = text.replace("\n", "\r\n")
    doc = data.draw(st.integers(0, len(docs) - 1))
    edit, want = _plan(docs[doc], data, doc)
    expected = [copy.deepcopy(d) for d in docs]
    expected[doc] = want
    _check(text, edit, expected)


ANCHORED = """\
base: &base
  x: 1
  y: two
copy: *base
merged:
  <<: *base
  z: 3
list:
  - a
  - b"""


@settings(max_examples=60, deadline=None)
@given(data=st.data(), crlf=st.booleans())
def test_property_anchored_files_keep_their_aliases(data: st.DataObject, crlf: bool) -> None:
    tree = yaml.safe_load(ANCHORED)
    text = ANCHORED.replace("\n", "\r\n") if crlf else ANCHORED
    path, kind = data.draw(st.sampled_from(_paths(tree)))
    value = data.draw(_LEAF)
    want = yaml.safe_load(ANCHORED)
    if kind == "list":
        _get(want, path).append(value)
        edit = _e(path, "append", new=value)
    elif kind == "map":
        key = data.draw(_WORD.filter(lambda w: w not in _get(tree, path)))
        _get(want, path)[key] = value
        edit = _e((*path, key), "set", new=value)
    else:
        assume(value != _get(tree, path))
        _get(want, path[:-1])[path[-1]] = value
        edit = _e(path, "set", old=_get(tree, path), new=value)
    # An edit through the anchor changes its aliases too: the only right answers are a refusal
    # or a file whose every alias reads the same as the anchor.
    try:
        out = edit_text(text, [edit], display="f.yaml")
    except InputError:
        return
    got = yaml.safe_load(out)
    assert got["copy"] == got["base"]
    assert {k: v for k, v in got["merged"].items() if k in got["base"]} == got["base"]
    if path[0] not in ("base", "copy", "merged"):
        assert got == want
    assert not out.endswith("\n")
    assert ("\r\n" in out) == crlf


def test_a_key_added_to_a_file_without_final_newline_gets_its_own_line() -> None:
    text = "a:\n  b: 1\nresources:\n  - one.yaml"
    out = edit_text(text, [_e(("resources",), "append", new="two.yaml")], display="f.yaml")
    assert out == "a:\n  b: 1\nresources:\n  - one.yaml\n  - two.yaml"
    out = edit_text(text, [_e(("z",), "set", new=1)], display="f.yaml")
    assert yaml.safe_load(out) == {"a": {"b": 1}, "resources": ["one.yaml"], "z": 1}


def test_crlf_file_keeps_crlf() -> None:
    text = "a:\r\n  b: 1\r\n  c: 2\r\n"
    out = edit_text(text, [_e(("a", "b"), "set", old=1, new=5)], display="f.yaml")
    assert out == "a:\r\n  b: 5\r\n  c: 2\r\n"


def test_mixed_line_ends_are_refused() -> None:
    with pytest.raises(InputError, match="mixes LF and CRLF"):
        edit_text("a: 1\r\nb: 2\n", [_e(("a",), "set", old=1, new=2)], display="f.yaml")
