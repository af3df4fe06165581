"""The ruamel writer: edits land where planned and every other line stays byte for byte."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpushift._errors import InputError
from gpushift.migrate import ABSENT, Edit, edit_text, write_files


def _e(
    path: tuple[Any, ...],
    op: str,
    *,
    old: Any = ABSENT,
    new: Any = ABSENT,
    doc: int = 0,
    prune: int = 0,
    after: str | None = None,
) -> Edit:
    return Edit("f.yaml", doc, path, op, old, new, "test", prune, after)  # type: ignore[arg-type]


STYLED = """\
---
# yaml-language-server: $schema=https://example.invalid/helmrelease.json
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: &app demo # the release
spec:
  values:
    securityContext:
      capabilities: { drop: ["ALL"] }
    env:
      A: 'single'
      B: "double"
    devicePlugin:
      enabled: true
    list:
      - one
      - two

    tail: *app
---
# second document
kind: ConfigMap
data:
  key: value
"""


def test_set_changes_one_line_and_keeps_styles() -> None:
    out = edit_text(
        STYLED,
        [_e(("spec", "values", "devicePlugin", "enabled"), "set", old=True, new=False)],
        display="f.yaml",
    )
    assert out == STYLED.replace("      enabled: true\n", "      enabled: false\n")


def test_edit_in_the_second_document() -> None:
    out = edit_text(STYLED, [_e(("data", "other"), "set", new="x", doc=1)], display="f.yaml")
    assert out == STYLED.replace("  key: value\n", "  key: value\n  other: x\n")


def test_append_keeps_the_blank_line_after_the_list() -> None:
    out = edit_text(
        STYLED, [_e(("spec", "values", "list"), "append", new="three")], display="f.yaml"
    )
    assert out == STYLED.replace("      - two\n", "      - two\n      - three\n")


def test_delete_with_prune_removes_the_emptied_mapping() -> None:
    out = edit_text(
        STYLED,
        [_e(("spec", "values", "devicePlugin", "enabled"), "delete", old=True, prune=1)],
        display="f.yaml",
    )
    assert out == STYLED.replace("    devicePlugin:\n      enabled: true\n", "")


def test_new_nested_keys_come_in_one_block() -> None:
    out = edit_text(
        STYLED,
        [_e(("spec", "values", "hostPaths", "driverInstallDir"), "set", new="/usr/local")],
        display="f.yaml",
    )
    assert out == STYLED.replace(
        "    tail: *app\n", "    tail: *app\n    hostPaths:\n      driverInstallDir: /usr/local\n"
    )


def test_ambiguous_strings_are_quoted() -> None:
    out = edit_text(STYLED, [_e(("data", "flag"), "set", new="true", doc=1)], display="f.yaml")
    assert yaml.safe_load_all(out).__next__() is not None
    assert '  flag: "true"\n' in out


def test_an_anchored_node_is_refused() -> None:
    text = "a: &shared\n  x: 1\nb: *shared\n"
    with pytest.raises(InputError) as err:
        edit_text(text, [_e(("a", "y"), "set", new=2)], display="f.yaml")
    assert str(err.value).startswith("f.yaml:1: ") and "&shared" in str(err.value)


def test_a_merged_key_is_refused() -> None:
    text = "base: &b\n  gpu: 1\n  cpu: 2\nc:\n  <<: *b\n  mem: 3\n"
    with pytest.raises(InputError) as err:
        edit_text(text, [_e(("c", "gpu"), "delete", old=1)], display="f.yaml")
    assert str(err.value).startswith("f.yaml:5: ") and "merge key" in str(err.value)


def test_a_value_that_is_not_what_was_planned_is_refused() -> None:
    with pytest.raises(InputError) as err:
        edit_text(
            STYLED,
            [_e(("spec", "values", "devicePlugin", "enabled"), "set", old=False, new=True)],
            display="f.yaml",
        )
    assert "f.yaml:" in str(err.value) and "edit it by hand" in str(err.value)


# An indentation ruamel would rewrite (8 spaces under `affinity`, as in heavy-ops' device plugin
# release): the line merge keeps it while the edit lands elsewhere.
ODD = """\
values:
  affinity:
      nodeAffinity:
        required: true
  config:
    default: x
"""


def test_lines_ruamel_would_reformat_stay_as_written() -> None:
    out = edit_text(
        ODD, [_e(("values", "config", "default"), "set", old="x", new="y")], display="f.yaml"
    )
    assert out == ODD.replace("default: x", "default: y")


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
    max_leaves=20,
)


def _leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k, v in tree.items():
        if isinstance(v, dict):
            out += _leaves(v, (*prefix, k))
        elif not isinstance(v, list):
            out.append((*prefix, k))
    return out


@settings(max_examples=60, deadline=None)
@given(tree=_TREE, data=st.data())
def test_property_one_leaf_edit_changes_one_line(tree: dict[str, Any], data: st.DataObject) -> None:
    # PyYAML writes lists without indentation, which ruamel would re-indent: those lines must
    # survive untouched as well.
    text = yaml.safe_dump(tree, sort_keys=False)
    leaves = _leaves(tree)
    assume(leaves)
    path = data.draw(st.sampled_from(leaves))
    parent: Any = tree
    for k in path[:-1]:
        parent = parent[k]
    new = data.draw(_LEAF.filter(lambda v: v != parent[path[-1]]))
    op = data.draw(st.sampled_from(["set", "delete"] if len(parent) > 1 else ["set"]))
    want = copy.deepcopy(tree)
    target = want
    for k in path[:-1]:
        target = target[k]
    if op == "set":
        target[path[-1]] = new
        edit = _e(path, "set", old=parent[path[-1]], new=new)
    else:
        del target[path[-1]]
        edit = _e(path, "delete", old=parent[path[-1]])
    out = edit_text(text, [edit], display="f.yaml")
    assert yaml.safe_load(out) == want
    before, after = text.splitlines(), out.splitlines()
    assert len(after) == len(before) - (op == "delete")
    assert sum(line not in after for line in before) <= 1


def test_write_files_is_all_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("a: 1\n")
    (tmp_path / "blocker").write_text("a file where a directory must go\n")
    with pytest.raises(InputError):
        write_files(tmp_path, {"a.yaml": "a: 2\n", "blocker/b.yaml": "b: 1\n"})
    assert (tmp_path / "a.yaml").read_text() == "a: 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "blocker"]


def test_write_files_writes_and_deletes(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d/old.yaml").write_text("x: 1\n")
    write_files(tmp_path, {"d/old.yaml": None, "n/new.yaml": "y: 1\n"})
    assert not (tmp_path / "d").exists()
    assert (tmp_path / "n/new.yaml").read_text() == "y: 1\n"
