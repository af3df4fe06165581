"""Reading Kubernetes YAML and JSON fast, with file and line for every document.

PyYAML's C loader does the parsing. Files that only Go YAML accepts (a redefined anchor) are
re-read with a pure-Python loader that lets the later definition win, as Go YAML does.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gpushift._errors import InputError

YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class Document:
    """One parsed YAML document.

    ``line`` is the 1-based line where the document's content starts. ``index`` counts
    documents in the file from 0, empty documents included, so it can be used to find the
    document again.
    """

    data: Any
    path: str
    line: int
    index: int


class _GoYamlComposer(Composer):
    """A composer that lets a redefined anchor replace the earlier one (Go YAML's rule)."""

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        this: Any = self  # the parser half of the loader provides the event methods
        event = this.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None and not this.check_event(yaml.AliasEvent):
            self.anchors.pop(anchor, None)
        return super().compose_node(parent, index)


class _GoYamlLoader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    _GoYamlComposer,
    yaml.constructor.SafeConstructor,
    yaml.resolver.Resolver,
):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        _GoYamlComposer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)


_VALUE_TAG = "tag:yaml.org,2002:value"


def _plain_string(loader: Any, node: ScalarNode) -> str:
    return str(loader.construct_scalar(node))


class _FastLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's C loader, reading a bare ``=`` as the string Go YAML reads."""


# PyYAML resolves a plain ``=`` to YAML 1.1's value key and then has no constructor for it;
# Go YAML (YAML 1.2, what Flux and kustomize use) reads it as the string "=", as in an
# AlertmanagerConfig's ``matchType: =``.
_FastLoader.add_constructor(_VALUE_TAG, _plain_string)
_GoYamlLoader.add_constructor(_VALUE_TAG, _plain_string)
_FAST_LOADER: Any = _FastLoader
#: The loader for every YAML the project reads (``yaml.load(text, Loader=LOADER)``).
LOADER: Any = _FastLoader


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_FLOAT = "tag:yaml.org,2002:float"
_BOOLS = yaml.constructor.SafeConstructor.bool_values
#: PyYAML's own scalar constructors (stateless for scalars) for the forms the builder leaves.
_SCALARS = yaml.constructor.SafeConstructor()


class _UnusualNodeError(Exception):
    """A node the plain builder leaves to PyYAML's constructor."""


def _build(node: Node, memo: dict[int, Any]) -> Any:
    """The object PyYAML's SafeConstructor builds from ``node``, for the tags Kubernetes YAML
    uses (str, int, bool, null, float, map, seq), without its per-node generator machinery.

    Raises _UnusualNodeError for anything else (merge keys, a value key, timestamps, binary, sets,
    other tags, a non-scalar key, an alias to an enclosing node): the caller then builds the
    whole document with PyYAML's constructor, so the result is always SafeConstructor's.
    """
    tag = node.tag
    if tag == _STR:
        if node.__class__ is ScalarNode:
            return node.value
        raise _UnusualNodeError
    if tag == _MAP:
        if node.__class__ is not MappingNode:
            raise _UnusualNodeError
        seen = memo.get(id(node), memo)
        if seen is not memo:
            if seen is None:
                raise _UnusualNodeError  # an alias inside its own anchor: a recursive structure
            return seen
        memo[id(node)] = None
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.__class__ is not ScalarNode or key_node.tag not in _KEY_TAGS:
                raise _UnusualNodeError
            key = _build(key_node, memo)
            out[key] = _build(value_node, memo)
        memo[id(node)] = out
        return out
    if tag == _SEQ:
        if node.__class__ is not SequenceNode:
            raise _UnusualNodeError
        seen = memo.get(id(node), memo)
        if seen is not memo:
            if seen is None:
                raise _UnusualNodeError
            return seen
        memo[id(node)] = None
        items = [_build(child, memo) for child in node.value]
        memo[id(node)] = items
        return items
    if node.__class__ is not ScalarNode:
        raise _UnusualNodeError
    if tag == _INT:
        value = node.value
        if value.isdigit() and (value[0] != "0" or value == "0"):
            return int(value)
        return _SCALARS.construct_yaml_int(node)  # signs, 0x, 0o, 0b, octal, "_", sexagesimal
    if tag == _BOOL:
        return _BOOLS[node.value.lower()]
    if tag == _NULL:
        return None
    if tag == _FLOAT:
        return _SCALARS.construct_yaml_float(node)
    raise _UnusualNodeError


#: Key tags built plainly; a merge key (``<<``) or value key (``=``) goes to PyYAML's
#: flatten_mapping.
_KEY_TAGS = frozenset((_STR, _INT, _BOOL, _NULL, _FLOAT))


def construct(loader: Any, node: Node) -> Any:
    """One document from its node: the plain builder, else PyYAML's constructor."""
    try:
        return _build(node, {})
    except (_UnusualNodeError, RecursionError):
        return loader.construct_document(node)


def load_all(text: str | bytes) -> list[Any]:
    """Every document of ``text``, as ``yaml.load_all(text, Loader=LOADER)`` reads them, built
    by the plain builder where it can (the same objects, a third of the time).

    Raises yaml.YAMLError as PyYAML does.
    """
    loader = _FAST_LOADER(text)
    try:
        out = []
        while loader.check_node():
            out.append(construct(loader, loader.get_node()))
        return out
    finally:
        loader.dispose()


def load(text: str | bytes) -> Any:
    """The one document of ``text`` (None when there is none), as ``yaml.load(text,
    Loader=LOADER)`` reads it, built by the plain builder where it can.

    Raises yaml.YAMLError as PyYAML does (also for more than one document).
    """
    loader = _FAST_LOADER(text)
    try:
        node = loader.get_single_node()
        return None if node is None else construct(loader, node)
    finally:
        loader.dispose()


def _iter_docs(loader: Any, path: str) -> Iterator[Document]:
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            data = construct(loader, node)
            yield Document(data, path, node.start_mark.line + 1, index)
            index += 1
    finally:
        loader.dispose()


def _is_duplicate_anchor(err: yaml.YAMLError) -> bool:
    return isinstance(err, yaml.composer.ComposerError) and "duplicate anchor" in str(err)


def _yaml_error(err: yaml.YAMLError, path: str) -> InputError:
    mark = getattr(err, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    # A ReaderError (a control character) has no problem, and its str() runs over two lines.
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    message = f"cannot parse YAML: {problem}" + (f" ({context})" if context else "")
    return InputError(message, path=path, line=line)


def parse_text(text: str, path: str) -> list[Document]:
    """Every document of ``text``, read as if from ``path``.

    Raises InputError naming the path and line when the text is not YAML that Flux accepts.
    """
    try:
        return list(_iter_docs(_FAST_LOADER(text), path))
    except yaml.YAMLError as err:
        if not _is_duplicate_anchor(err):
            raise _yaml_error(err, path) from None
    try:
        return list(_iter_docs(_GoYamlLoader(text), path))
    except yaml.YAMLError as err:
        raise _yaml_error(err, path) from None


def read_file(path: str | os.PathLike[str], *, display: str | None = None) -> list[Document]:
    """Every document of one file. ``display`` is the path to report (default: as given).

    Raises InputError when the file cannot be read or parsed.
    """
    shown = display if display is not None else str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read file: {err}", path=shown) from None
    return parse_text(text, shown)


def find_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """YAML and JSON files under ``paths`` (files as given, directories walked, sorted).

    Raises InputError for a path that does not exist.
    """
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found.extend(
                sorted(f for f in p.rglob("*") if f.suffix in YAML_SUFFIXES and f.is_file())
            )
        elif p.is_file():
            found.append(p)
        else:
            raise InputError("no such file or directory", path=str(raw))
    return found


def expand_lists(docs: Iterable[Document]) -> Iterator[Document]:
    """Documents with each ``kind: List`` (or ``*List``) replaced by its items."""
    for doc in docs:
        data = doc.data
        if (
            isinstance(data, dict)
            and str(data.get("kind", "")).endswith("List")
            and isinstance(data.get("items"), list)
        ):
            for item in data["items"]:
                yield Document(item, doc.path, doc.line, doc.index)
        elif data is not None:
            yield doc


def describe(obj: Any) -> str:
    """``Kind/namespace/name`` (or ``Kind/name``) for messages."""
    if not isinstance(obj, dict):
        return "document"
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        meta = {}
    kind = obj.get("kind") or "object"
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    ns = meta.get("namespace")
    return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"


@functools.lru_cache(maxsize=64)
def _compose(path: str, mtime: float) -> tuple[Node | None, ...]:
    text = Path(path).read_text(encoding="utf-8")
    loader = _GoYamlLoader(text)
    nodes: list[Node | None] = []
    try:
        while loader.check_node():
            nodes.append(loader.get_node())
    finally:
        loader.dispose()
    return tuple(nodes)


def locate(path: str | os.PathLike[str], index: int, keys: Sequence[str | int]) -> int | None:
    """The 1-based line of ``keys`` inside document ``index`` of a file, or None if absent.

    Walks as far down ``keys`` as the document goes and returns the deepest line found, so a
    finding about a missing field points at its parent. Parses lazily: only called for findings.
    """
    p = str(path)
    try:
        nodes = _compose(p, os.stat(p).st_mtime)
    except (OSError, yaml.YAMLError):
        return None
    if index >= len(nodes) or nodes[index] is None:
        return None
    node: Node | None = nodes[index]
    line = node.start_mark.line + 1 if node is not None else None
    for key in keys:
        if isinstance(node, MappingNode):
            nxt = None
            for k, v in node.value:
                if isinstance(k, ScalarNode) and k.value == key:
                    line = k.start_mark.line + 1
                    nxt = v
                    break
            if nxt is None:
                return line
            node = nxt
        elif isinstance(node, SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line
