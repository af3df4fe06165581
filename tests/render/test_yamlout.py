"""The YAML emitter: what it writes reads back as the same data, and comments sit above keys."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift._yamlout import Block, Note, dump_documents

KEYS = st.text(
    alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-./_"),
    min_size=1,
    max_size=12,
)
SCALARS = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(10**9), max_value=10**9),
    st.booleans(),
    st.none(),
)
# Comments are written by the renderers: printable text, possibly several lines.
COMMENTS = st.text(
    alphabet=st.characters(whitelist_categories=("L", "N", "P", "Zs"), whitelist_characters="\n"),
    min_size=1,
    max_size=60,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, min_size=1, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(KEYS, VALUES, min_size=1, max_size=5))
def test_round_trip(doc: dict[str, Any]) -> None:
    assert yaml.safe_load(dump_documents([doc])) == doc


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(KEYS, VALUES, min_size=1, max_size=4), COMMENTS)
def test_notes_do_not_change_the_data(doc: dict[str, Any], comment: str) -> None:
    noted = {k: Note(v, comment) for k, v in doc.items()}
    assert yaml.safe_load(dump_documents([noted])) == doc


def test_comment_above_nested_key_and_sequence_item_key() -> None:
    text = dump_documents(
        [
            {
                "spec": {
                    "values": {"enabled": Note(False, "why off")},
                    "env": [{"name": "A", "value": Note("true", "why a")}],
                }
            }
        ]
    )
    assert text == (
        "---\n"
        "spec:\n"
        "  values:\n"
        "    # why off\n"
        "    enabled: false\n"
        "  env:\n"
        "    - name: A\n"
        "      # why a\n"
        '      value: "true"\n'
    )


def test_keys_that_look_like_other_types_are_quoted() -> None:
    doc = {"NO": 1, "true": 2, "5": 3, "null": None, "plain": "yes"}
    text = dump_documents([doc])
    assert text == '---\n"NO": 1\n"true": 2\n"5": 3\n"null":\nplain: "yes"\n'
    assert yaml.safe_load(text) == doc


def test_block_and_multiple_documents() -> None:
    text = dump_documents([{"data": {"any": Block("version: v1\nx: 1")}}, {"b": 1}], header="h")
    assert text == "# h\n---\ndata:\n  any: |-\n    version: v1\n    x: 1\n---\nb: 1\n"


def test_long_comments_wrap_to_the_line_length() -> None:
    text = dump_documents([{"a": {"b": Note(1, "word " * 60)}}])
    assert all(len(line) <= 100 for line in text.splitlines())
    assert yaml.safe_load(text) == {"a": {"b": 1}}
