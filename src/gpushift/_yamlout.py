"""Emitting rendered manifests as YAML with why-comments attached to keys.

Renderers build plain dicts and lists; a value wrapped in ``Note`` carries a comment that is
written on the lines above its key. ruamel.yaml does the emitting, so quoting, block scalars
and comment placement follow one well-tested implementation, and insertion order (which the
renderers fix) is the only ordering: equal input gives byte-identical output.
"""

from __future__ import annotations

import functools
import io
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

# Mapping keys indent by 2, sequence items by 2 with the dash at +2: the style of the
# home-ops repositories the output is merged into.
_MAP_INDENT = 2
_SEQ_INDENT = 4
_SEQ_DASH_OFFSET = 2
# Comments wrap to the line length of the repositories' editors and linters.
_COMMENT_WIDTH = 100


@dataclass(frozen=True, slots=True)
class Note:
    """A value whose key gets ``comment`` (one or more lines) written above it."""

    value: Any
    comment: str


@dataclass(frozen=True, slots=True)
class Block:
    """A multi-line string written as a literal block scalar (``|-``)."""

    text: str


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=4096)
def _needs_quotes(text: str) -> bool:
    # A plain scalar that YAML would read back as something other than this string.
    if text == "" or text != text.strip():
        return True
    try:
        return bool(yaml.load(text, Loader=_LOADER) != text)
    except yaml.YAMLError:
        return True


def _convert(value: Any, *, column: int) -> Any:
    """ruamel nodes for ``value``, whose mapping keys (if any) start at ``column``."""
    if isinstance(value, Note):
        raise TypeError("Note is only valid as a mapping value")
    if isinstance(value, Block):
        return LiteralScalarString(value.text)
    if isinstance(value, Mapping):
        out = CommentedMap()
        for key, raw in value.items():
            comment = None
            if isinstance(raw, Note):
                comment, raw = raw.comment, raw.value
            if isinstance(key, str) and _needs_quotes(key):
                # A key such as "true" or "NO" would otherwise read back as a boolean.
                key = DoubleQuotedScalarString(key)
            out[key] = _convert(raw, column=_child_column(raw, column=column))
            if comment:
                out.yaml_set_comment_before_after_key(
                    key, before=_wrap(comment, column=column), indent=column
                )
        return out
    if isinstance(value, list | tuple):
        seq = CommentedSeq()
        for item in value:
            # Keys of a mapping inside a sequence item start after "- ".
            seq.append(_convert(item, column=column + _SEQ_DASH_OFFSET))
        return seq
    if isinstance(value, str) and _needs_quotes(value):
        return DoubleQuotedScalarString(value)
    return value


def _wrap(comment: str, *, column: int) -> str:
    width = max(_COMMENT_WIDTH - column - 2, 40)
    return "\n".join(
        "\n".join(textwrap.wrap(para, width=width, break_on_hyphens=False)) or ""
        for para in comment.splitlines()
    )


def _child_column(value: Any, *, column: int) -> int:
    if isinstance(value, list | tuple):
        return column + _SEQ_INDENT - _SEQ_DASH_OFFSET
    return column + _MAP_INDENT


def _emitter() -> YAML:
    out = YAML()
    out.indent(mapping=_MAP_INDENT, sequence=_SEQ_INDENT, offset=_SEQ_DASH_OFFSET)
    out.width = 4096
    out.explicit_start = True
    return out


def dump_documents(docs: Iterable[Mapping[str, Any]], *, header: str | None = None) -> str:
    """YAML text of ``docs``, each starting with ``---``; ``header`` is a leading comment.

    Returns the text with a single trailing newline.
    """
    buf = io.StringIO()
    if header:
        buf.write("".join(f"# {line}".rstrip() + "\n" for line in header.splitlines()))
    emitter = _emitter()
    for doc in docs:
        emitter.dump(_convert(doc, column=0), buf)
    return buf.getvalue().rstrip("\n") + "\n"
