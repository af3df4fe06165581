from pathlib import Path

import pytest

from gpushift._errors import InputError
from gpushift._yaml import describe, expand_lists, locate, parse_text, read_file

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "repos"


def test_documents_carry_their_start_line() -> None:
    docs = parse_text("---\na: 1\n---\n\nkind: Pod\nmetadata: {name: x}\n", "f.yaml")
    assert [(d.line, d.index) for d in docs] == [(2, 0), (5, 1)]


def test_unparsable_yaml_names_file_and_line() -> None:
    with pytest.raises(InputError) as err:
        parse_text("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml")
    assert err.value.path == "bad.yaml"
    assert err.value.line is not None and err.value.line >= 2
    assert str(err.value).startswith("bad.yaml:")


def test_bare_equals_sign_is_a_string_as_in_go_yaml() -> None:
    # PyYAML alone resolves a plain "=" to YAML 1.1's value key and cannot construct it.
    text = "matchers:\n  - name: severity\n    matchType: =\n    value: critical\n"
    (doc,) = parse_text(text, "am.yaml")
    assert doc.data == {"matchers": [{"name": "severity", "matchType": "=", "value": "critical"}]}


def test_redefined_anchor_is_accepted_later_definition_wins() -> None:
    text = "a: &x 1\nb: *x\nc: &x 2\nd: *x\n"
    (doc,) = parse_text(text, "anchors.yaml")
    assert doc.data == {"a": 1, "b": 1, "c": 2, "d": 2}


def test_list_kind_is_expanded() -> None:
    docs = parse_text("kind: List\nitems:\n- kind: Pod\n- kind: Node\n", "l.yaml")
    assert [d.data["kind"] for d in expand_lists(docs)] == ["Pod", "Node"]


def test_describe() -> None:
    assert describe({"kind": "Pod", "metadata": {"name": "a", "namespace": "b"}}) == "Pod/b/a"
    assert describe({"kind": "Node", "metadata": {"name": "n"}}) == "Node/n"


def test_locate_points_at_nested_key(tmp_path: Path) -> None:
    f = tmp_path / "x.yaml"
    f.write_text("a: 1\n---\nspec:\n  values:\n    devicePlugin:\n      enabled: false\n")
    assert locate(f, 1, ["spec", "values", "devicePlugin", "enabled"]) == 6
    assert locate(f, 1, ["spec", "values", "missing"]) == 4


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared fixtures not present")
def test_every_fixture_file_parses() -> None:
    files = [p for p in FIXTURES.rglob("*") if p.suffix in (".yaml", ".yml")]
    assert files
    for f in files:
        read_file(f)
