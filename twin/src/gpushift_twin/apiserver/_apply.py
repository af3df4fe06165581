"""Field ownership: server-side apply and ``metadata.managedFields`` bookkeeping.

Mirrors sigs.k8s.io/structured-merge-diff/v4 (typed: ToFieldSet, Compare, Merge; merge.Updater:
Apply, Update, prune) and the kube-apiserver field managers around it (identity fields
stripped, status reset, entry order, time stamps, the kubectl client-side-apply upgrade).
Field sets are written in the FieldsV1 format with ``f:``/``k:``/``v:``/``i:`` keys and ``.``
for a node owned in itself, exactly as Kubernetes writes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from gpushift.common import Kind, lookup
from gpushift_twin.apiserver._merge_keys import (
    ATOMIC_LIST,
    ListOf,
    Struct,
    TypeSpec,
    child_type,
    is_atomic,
    is_entry,
    item_type,
    root_type,
)
from gpushift_twin.apiserver._patch import PatchError, clone

__all__ = [
    "LAST_APPLIED_ANNOTATION",
    "ApplyConflict",
    "Conflict",
    "ManagedFieldsEntry",
    "from_fields_v1",
    "path_string",
    "server_side_apply",
    "to_fields_v1",
    "update_managed_fields",
]

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"

#: The manager whose apply upgrades from, and keeps in sync, client-side apply's annotation.
_KUBECTL = "kubectl"
#: Owner of an untracked object's fields at its first apply (skipNonAppliedManager).
_BEFORE_FIRST_APPLY = "before-first-apply"


class ManagedFieldsEntry(TypedDict):
    """One ``metadata.managedFields`` item (meta/v1 ManagedFieldsEntry)."""

    manager: str
    operation: str
    apiVersion: str
    time: NotRequired[str]
    fieldsType: str
    fieldsV1: dict[str, Any]
    subresource: NotRequired[str]


class Conflict(TypedDict):
    """One apply conflict: the owner as upstream prints it, and the field path.

    ``manager`` reads ``"kubectl-client-side-apply" using apps/v1`` for an Update owner and
    ``"flux"`` for an Apply owner; ``field`` reads ``.spec.replicas``.
    """

    manager: str
    field: str


class ApplyConflict(Exception):  # noqa: N818 - the name the twin's API uses
    """An apply that would change fields another manager owns (HTTP 409, reason Conflict).

    ``conflicts`` lists them; ``message`` is upstream's Status message
    (``Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using
    apps/v1: .spec.replicas``); ``causes`` are the Status details causes.
    """

    code = 409

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        self.message = _conflict_message(conflicts)
        super().__init__(self.message)

    @property
    def causes(self) -> list[dict[str, str]]:
        """Status ``details.causes``: one ``FieldManagerConflict`` per conflict."""
        return [
            {
                "type": "FieldManagerConflict",
                "message": f"conflict with {c['manager']}",
                "field": c["field"],
            }
            for c in self.conflicts
        ]


def _conflict_message(conflicts: list[Conflict]) -> str:
    # k8s.io/apiserver pkg/endpoints/handlers/fieldmanager internal/conflict.go
    if len(conflicts) == 1:
        c = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {c['manager']}: {c['field']}"
    by_manager: dict[str, list[str]] = {}
    for c in conflicts:
        by_manager.setdefault(c["manager"], []).append(c["field"])
    lines: list[str] = []
    for manager in sorted(by_manager):
        lines.append(f"conflicts with {manager}:")
        lines.extend(f"- {path}" for path in by_manager[manager])
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


# --- paths and field sets ---------------------------------------------------------------

#: A path is a tuple of FieldsV1 keys: "f:spec", 'k:{"name":"a"}', 'v:"x"', "i:0".
Path = tuple[str, ...]
FieldSet = frozenset[Path]

_EMPTY: FieldSet = frozenset()

# Paths kube-apiserver never records (stripMetaManager).
_STRIPPED: FieldSet = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        *(
            ("f:metadata", f"f:{name}")
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_PLAIN = re.compile(r"[A-Za-z0-9 ._/:@+=-]*")


def _json_scalar(value: Any) -> str:
    """``_json`` for key values, skipping the encoder for the usual plain strings and ints."""
    if isinstance(value, str) and _PLAIN.fullmatch(value):
        return f'"{value}"'
    if type(value) is int:
        return str(value)
    return _json(value)


def _item_element(item: Any, meta: ListOf, index: int, *, strict: bool) -> str:
    """The path element of one item of an associative list."""
    if meta.apply_type == "set":
        return "v:" + _json_scalar(item)
    parts: list[str] = []
    for name in sorted(meta.apply_keys):
        if isinstance(item, dict) and item.get(name) is not None:
            value = item[name]
        elif name in meta.key_defaults:
            value = meta.key_defaults[name]
        elif strict:
            raise PatchError(
                f"associative list with keys has an element that omits key field "
                f'"{name}" (and doesn\'t have default value)'
            )
        else:
            return f"i:{index}"
        parts.append(f"{_json_scalar(name)}:{_json_scalar(value)}")
    return "k:{" + ",".join(parts) + "}"


def _element_to_string(element: str) -> str:
    """fieldpath.PathElement.String: ``.name``, ``[name="a"]``, ``[="x"]``, ``[0]``."""
    tag, body = element[:2], element[2:]
    if tag == "f:":
        return "." + body
    if tag == "k:":
        keys = json.loads(body)
        return "[" + ",".join(f"{k}={_json(keys[k])}" for k in sorted(keys)) + "]"
    if tag == "v:":
        return f"[={body}]"
    return f"[{body}]"


def path_string(path: Path) -> str:
    """A path as upstream prints it in conflicts: ``.spec.containers[name="a"].image``."""
    return "".join(_element_to_string(e) for e in path)


# A trie node is a dict of element -> node; the key None marks a node that is a member.
_Trie = dict[Any, Any]


def _trie(paths: Iterable[Path]) -> _Trie:
    root: _Trie = {}
    for path in paths:
        node = root
        for element in path:
            child = node.get(element)
            if child is None:
                child = node[element] = {}
            node = child
        node[None] = True
    return root


def _children(node: _Trie) -> list[str]:
    return sorted((k for k in node if k is not None), key=_order)


def _order(element: str) -> tuple[int, Any]:
    # PathElement.Compare: field names, then keys, then values, then indexes.
    tag, body = element[:2], element[2:]
    rank = {"f:": 0, "k:": 1, "v:": 2, "i:": 3}.get(tag, 4)
    return (rank, int(body) if tag == "i:" and body.isdigit() else body)


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """A field set in FieldsV1 form (serialize.go: ``.`` first, then sorted elements)."""

    def emit(node: _Trie, include_self: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        elements = _children(node)
        if include_self and elements:
            out["."] = {}
        for element in elements:
            child = node[element]
            out[element] = emit(child, None in child)
        return out

    return emit(_trie(paths), False)


def _holds(fields: dict[str, Any], path: Path) -> bool:
    """Whether FieldsV1 ``fields`` owns exactly ``path``, read without decoding it."""
    node: Any = fields
    for element in path:
        node = node.get(element) if isinstance(node, dict) else None
        if node is None:
            return False
    return isinstance(node, dict) and (not node or "." in node)


def from_fields_v1(fields: Any, prefix: Path = ()) -> set[Path]:
    """The paths a FieldsV1 object holds; the inverse of ``to_fields_v1``."""
    out: set[Path] = set()
    if not isinstance(fields, dict):
        return out
    if not fields and prefix:
        out.add(prefix)
    for key, value in fields.items():
        if key == ".":
            out.add(prefix)
        else:
            out |= from_fields_v1(value, (*prefix, key))
    return out


def _iterate(paths: Iterable[Path]) -> Iterator[Path]:
    """Set.Iterate order: a level's members first, then its children, each sorted."""

    def walk(node: _Trie, prefix: Path) -> Iterator[Path]:
        ordered = _children(node)
        for element in ordered:
            if None in node[element]:
                yield (*prefix, element)
        for element in ordered:
            yield from walk(node[element], (*prefix, element))

    return walk(_trie(paths), ())


# --- typed walks ------------------------------------------------------------------------

_MISSING: Any = object()


def _list_meta(spec: TypeSpec) -> ListOf:
    return spec if isinstance(spec, ListOf) else ATOMIC_LIST


def _is_granular_map(value: Any, spec: TypeSpec) -> bool:
    return isinstance(value, dict) and not is_atomic(spec) and not isinstance(spec, ListOf)


def _is_assoc_list(value: Any, spec: TypeSpec) -> bool:
    return isinstance(value, list) and _list_meta(spec).apply_type != "atomic"


def _field_set(value: Any, spec: TypeSpec, *, strict: bool = False) -> set[Path]:
    """typed.ToFieldSet: every leaf, plus map entries, list items and empty/null fields."""
    out: set[Path] = set()

    def walk(value: Any, spec: TypeSpec, path: Path) -> None:
        if _is_granular_map(value, spec):
            for key, child in value.items():
                child_spec = child_type(spec, key)
                child_path = (*path, f"f:{key}")
                walk(child, child_spec, child_path)
                if child is None or child == {} or is_entry(spec, key):
                    out.add(child_path)
        elif _is_assoc_list(value, spec):
            meta = _list_meta(spec)
            for index, item in enumerate(value):
                item_path = (*path, _item_element(item, meta, index, strict=strict))
                walk(item, item_type(meta, item), item_path)
                out.add(item_path)
        elif path:
            out.add(path)

    walk(value, spec, ())
    return out


@dataclass
class _Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)

    def same(self) -> bool:
        return not (self.added or self.modified or self.removed)

    def changed(self) -> set[Path]:
        return self.added | self.modified

    def drop(self, ignored: FieldSet) -> None:
        for paths in (self.added, self.modified, self.removed):
            for path in [p for p in paths if _under_any(p, ignored)]:
                paths.discard(path)


def _under_any(path: Path, prefixes: FieldSet) -> bool:
    # Ignored and stripped paths are at most two deep (``status``, ``metadata.name``).
    return path[:1] in prefixes or path[:2] in prefixes


def _compare(lhs: Any, rhs: Any, spec: TypeSpec) -> _Comparison:
    """typed.Compare: which paths ``rhs`` added, modified or removed relative to ``lhs``."""
    result = _Comparison()

    def leaf(lhs: Any, rhs: Any, path: Path) -> None:
        if lhs is _MISSING:
            result.added.add(path)
        elif rhs is _MISSING:
            result.removed.add(path)
        elif lhs != rhs or type(lhs) is not type(rhs):
            result.modified.add(path)

    def walk(lhs: Any, rhs: Any, spec: TypeSpec, path: Path) -> None:
        lhs = _MISSING if lhs is None else lhs
        rhs = _MISSING if rhs is None else rhs
        if lhs is rhs or (isinstance(lhs, (dict, list)) and lhs == rhs):
            return  # an unchanged subtree (the common case) needs no walk
        empty_l = lhs is _MISSING or lhs in ({}, [])
        empty_r = rhs is _MISSING or rhs in ({}, [])
        sample = rhs if rhs is not _MISSING else lhs
        mapping = _is_granular_map(sample, spec) and all(
            v is _MISSING or isinstance(v, dict) for v in (lhs, rhs)
        )
        listing = _is_assoc_list(sample, spec) and all(
            v is _MISSING or isinstance(v, list) for v in (lhs, rhs)
        )
        if not (mapping or listing) or (empty_l and empty_r):
            leaf(lhs, rhs, path)
            return
        if mapping:
            left = {} if lhs is _MISSING else lhs
            right = {} if rhs is _MISSING else rhs
            for key in [*left, *(k for k in right if k not in left)]:
                walk(
                    left.get(key, _MISSING),
                    right.get(key, _MISSING),
                    child_type(spec, key),
                    (*path, f"f:{key}"),
                )
        else:
            meta = _list_meta(spec)
            left_items = _index_items(lhs, meta)
            right_items = _index_items(rhs, meta)
            for element in [*left_items, *(e for e in right_items if e not in left_items)]:
                litem = left_items.get(element, _MISSING)
                ritem = right_items.get(element, _MISSING)
                sample_item = ritem if ritem is not _MISSING else litem
                item_path = (*path, element)
                if meta.apply_type == "set":
                    leaf(litem, ritem, item_path)
                else:
                    walk(litem, ritem, item_type(meta, sample_item), item_path)
                    if litem is _MISSING:
                        result.added.add(item_path)
                    elif ritem is _MISSING:
                        result.removed.add(item_path)
        if path and lhs is _MISSING:
            result.added.add(path)
        elif path and rhs is _MISSING:
            result.removed.add(path)

    walk(lhs, rhs, spec, ())
    return result


def _index_items(value: Any, meta: ListOf) -> dict[str, Any]:
    if value is _MISSING or not isinstance(value, list):
        return {}
    out: dict[str, Any] = {}
    for index, item in enumerate(value):
        out.setdefault(_item_element(item, meta, index, strict=False), item)
    return out


def _merge(lhs: Any, rhs: Any, spec: TypeSpec) -> Any:
    """typed.Merge with the applied config on the right: the config's values win."""
    if rhs is _MISSING:
        return clone(lhs)
    if lhs is _MISSING or lhs is None or rhs is None:
        return clone(rhs)
    if _is_granular_map(rhs, spec) and isinstance(lhs, dict):
        out = dict(lhs)
        for key, value in rhs.items():
            merged = _merge(lhs.get(key, _MISSING), value, child_type(spec, key))
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
        return out
    if _is_assoc_list(rhs, spec) and isinstance(lhs, list):
        return _merge_list(lhs, rhs, _list_meta(spec))
    return clone(rhs)


def _merge_list(lhs: list[Any], rhs: list[Any], meta: ListOf) -> list[Any]:
    """mergingWalker.visitListItems: shared items keep the applied order, live-only stay put."""
    lhs_pes = [_item_element(v, meta, i, strict=False) for i, v in enumerate(lhs)]
    rhs_pes = [_item_element(v, meta, i, strict=True) for i, v in enumerate(rhs)]
    observed_l = dict(zip(lhs_pes, lhs, strict=True))
    observed_r = dict(zip(rhs_pes, rhs, strict=True))

    def merge_item(pe: str, left: Any, right: Any) -> Any:
        if meta.apply_type == "set":
            return right if right is not _MISSING else left
        sample = right if right is not _MISSING else left
        return _merge(left, right, item_type(meta, sample))

    shared = [pe for pe in rhs_pes if pe in observed_l]
    next_shared = shared.pop(0) if shared else None
    merged_rhs: set[str] = set()
    out: list[Any] = []
    li = ri = 0
    while li < len(lhs_pes) or ri < len(rhs_pes):
        if li < len(lhs_pes) and ri < len(rhs_pes):
            pe = lhs_pes[li]
            if pe == rhs_pes[ri]:
                merged_rhs.add(pe)
                out.append(merge_item(pe, observed_l[pe], observed_r[pe]))
                li += 1
                ri += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in observed_r and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lhs_pes):
            pe = lhs_pes[li]
            if pe not in observed_r:
                out.append(clone(lhs[li]))
                li += 1
                continue
            if pe in merged_rhs:
                li += 1
                continue
        if ri < len(rhs_pes):
            pe = rhs_pes[ri]
            merged_rhs.add(pe)
            out.append(merge_item(pe, observed_l.get(pe, _MISSING), observed_r[pe]))
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


def _remove(value: Any, spec: TypeSpec, paths: set[Path]) -> Any:
    """typed.RemoveItems: drop every path of ``paths`` (with what is below it)."""
    if not paths:
        return value
    heads: dict[str, set[Path]] = {}
    for path in paths:
        heads.setdefault(path[0], set()).add(path[1:])

    def sub(element: str) -> set[Path]:
        return {p for p in heads.get(element, set()) if p}

    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, child in value.items():
            element = f"f:{key}"
            if () in heads.get(element, set()):
                continue
            out[key] = _remove(child, child_type(spec, key), sub(element))
        return out
    if isinstance(value, list) and _list_meta(spec).apply_type != "atomic":
        meta = _list_meta(spec)
        items: list[Any] = []
        for index, item in enumerate(value):
            element = _item_element(item, meta, index, strict=False)
            if () in heads.get(element, set()):
                continue
            items.append(_remove(item, item_type(meta, item), sub(element)))
        return items
    return value


def _with_named_parents(paths: Iterable[Path], root: TypeSpec) -> set[Path]:
    """Set.EnsureNamedFieldsAreMembers: add every ancestor that is a struct field."""
    out = set(paths)

    def walk(node: _Trie, spec: TypeSpec, prefix: Path) -> None:
        for element, child in node.items():
            if element is None:
                continue
            path = (*prefix, element)
            if element.startswith("f:"):
                child_spec = child_type(spec, element[2:])
                named = isinstance(spec, Struct) and not is_entry(spec, element[2:])
                if named and len(child) > (None in child):
                    out.add(path)
            else:
                child_spec = item_type(_list_meta(spec), {} if element[0] == "k" else None)
            walk(child, child_spec, path)

    walk(_trie(out), root, ())
    return out


# --- managed fields entries -------------------------------------------------------------


@dataclass
class _Entry:
    manager: str
    operation: str
    api_version: str
    decoded: set[Path] | None = None
    time: str | None = None
    subresource: str = ""
    #: The stored FieldsV1, kept so that an entry a write does not touch is neither
    #: decoded nor re-encoded (most writes touch one entry of several).
    raw: dict[str, Any] | None = None

    @property
    def fields(self) -> set[Path]:
        if self.decoded is None:
            self.decoded = from_fields_v1(self.raw or {})
        return self.decoded

    @fields.setter
    def fields(self, value: set[Path]) -> None:
        self.decoded = value
        self.raw = None

    def discard(self, paths: set[Path]) -> None:
        """Drop ``paths`` from this entry, decoding it only if it holds one of them."""
        if self.decoded is None and not any(_holds(self.raw or {}, p) for p in paths):
            return
        if self.fields & paths:
            self.fields = self.fields - paths

    def empty(self) -> bool:
        return not self.raw if self.decoded is None else not self.decoded

    @property
    def identity(self) -> tuple[str, str, str, str]:
        # BuildManagerIdentifier: Apply entries ignore the API version.
        version = "" if self.operation == "Apply" else self.api_version
        return (self.manager, self.operation, version, self.subresource)

    def describe(self) -> str:
        """printManager of the conflict message."""
        text = _json(self.manager)
        if self.subresource:
            text += f" with subresource {_json(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text

    def encode(self) -> ManagedFieldsEntry:
        entry: ManagedFieldsEntry = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.raw if self.raw is not None else to_fields_v1(self.fields),
        }
        if self.time is not None:
            entry["time"] = self.time
        if self.subresource:
            entry["subresource"] = self.subresource
        # Key order as kube-apiserver serializes ManagedFieldsEntry.
        order = ("manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1")
        ordered = {k: entry[k] for k in order if k in entry}  # type: ignore[literal-required]
        if self.subresource:
            ordered["subresource"] = self.subresource
        return ordered  # type: ignore[return-value]


def _decode(raw: Any) -> list[_Entry]:
    entries: list[_Entry] = []
    if not isinstance(raw, list):
        return entries
    for item in raw:
        if not isinstance(item, dict) or not item.get("manager"):
            continue
        entries.append(
            _Entry(
                manager=str(item["manager"]),
                operation=str(item.get("operation") or "Update"),
                api_version=str(item.get("apiVersion") or ""),
                raw=item.get("fieldsV1") if isinstance(item.get("fieldsV1"), dict) else {},
                time=item.get("time"),
                subresource=str(item.get("subresource") or ""),
            )
        )
    return entries


def _encode(entries: list[_Entry]) -> list[ManagedFieldsEntry]:
    """sortEncodedManagedFields: operation, then time, manager, apiVersion, subresource."""
    kept = [e for e in entries if not e.empty()]
    kept.sort(key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    return [e.encode() for e in kept]


def _set_managed(obj: dict[str, Any], entries: list[_Entry]) -> dict[str, Any]:
    metadata = dict(obj.get("metadata") or {})
    encoded = _encode(entries)
    if encoded:
        metadata["managedFields"] = encoded
    else:
        metadata.pop("managedFields", None)
    obj["metadata"] = metadata
    return obj


def _body(obj: dict[str, Any] | None) -> dict[str, Any]:
    """An object without its managed fields, as the field walks see it."""
    if obj is None:
        return {}
    body = dict(obj)
    metadata = dict(body.get("metadata") or {})
    metadata.pop("managedFields", None)
    body["metadata"] = metadata
    return body


_MAX_UPDATE_MANAGERS = 10
_ANCIENT = "ancient-changes"


def _cap_updaters(entries: list[_Entry]) -> list[_Entry]:
    """capManagersManager: fold the oldest Update entries into "ancient-changes"."""
    updaters = [e for e in entries if e.operation != "Apply"]
    if len(updaters) <= _MAX_UPDATE_MANAGERS:
        return entries
    updaters.sort(key=lambda e: (e.time or "", e.identity))
    excess = len(updaters) - _MAX_UPDATE_MANAGERS
    drop: list[_Entry] = []
    buckets: dict[str, _Entry] = {}
    firsts: dict[str, _Entry] = {}
    for entry in updaters:
        if excess <= 0:
            break
        version = entry.api_version
        if version not in firsts:
            firsts[version] = entry
            continue
        bucket = buckets.get(version)
        if bucket is None:
            first = firsts[version]
            bucket = _Entry(_ANCIENT, "Update", version, set(first.fields), first.time)
            buckets[version] = bucket
            drop.append(first)
        bucket.fields = bucket.fields | entry.fields
        bucket.time = entry.time
        drop.append(entry)
        excess -= 1
    dropped = {id(e) for e in drop}
    return [e for e in entries if id(e) not in dropped] + list(buckets.values())


# --- ignored fields per endpoint ---------------------------------------------------------


def _ignored(kind: Kind | None, subresource: str | None, body: dict[str, Any]) -> FieldSet:
    """Fields a write through this endpoint cannot change (the strategy's reset fields)."""
    if subresource == "status":
        return frozenset((f"f:{k}",) for k in body if k not in ("status", "metadata"))
    if subresource is None and kind is not None and "status" in kind.subresources:
        return frozenset({("f:status",)})
    return _EMPTY


def _clean(paths: set[Path], ignored: FieldSet) -> set[Path]:
    return {p for p in paths if p not in _STRIPPED and not _under_any(p, ignored)}


def _kind_of(obj: dict[str, Any]) -> Kind | None:
    return lookup(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))


def _zero(kind: Kind | None, new: dict[str, Any]) -> dict[str, Any]:
    """The empty object a create is compared with: Go's zero value keeps struct fields."""
    zero: dict[str, Any] = {"metadata": {}}
    if kind is None or not kind.builtin:
        return zero
    for name in ("spec", "status"):
        if isinstance(new.get(name), dict):
            zero[name] = {}
    # PodSpec.containers has no omitempty: the zero value holds it (as null), so creating
    # it does not add the list itself, only its items.
    spec = new.get("spec")
    if kind.kind == "Pod" and isinstance(spec, dict):
        zero["spec"]["containers"] = []
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        zero["spec"]["template"] = {"metadata": {}, "spec": {"containers": []}}
    return zero


# --- apply ------------------------------------------------------------------------------


def server_side_apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    manager: str,
    force: bool,
    kind: Kind,
    now: str,
    subresource: str | None = None,
    schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Apply ``applied`` (an apply configuration) to ``live`` (None when creating).

    Returns the new object (sharing untouched subtrees with ``live``, which is never
    changed) with ``metadata.managedFields`` updated: ``manager`` owns exactly
    the fields of ``applied`` (an ``Apply`` entry stamped ``now`` when the object changed);
    fields it applied last time and no longer applies are removed unless another manager
    owns them; a manager that loses all its fields loses its entry. Writes to the main
    resource leave ``status`` alone when the kind has a status subresource. ``schema`` is
    a custom resource's ``openAPIV3Schema``: with it, lists merge by its
    ``x-kubernetes-list-type``/``-list-map-keys`` and fields it declares are owned as
    upstream owns them; without it, maps are structs of unknown fields and lists atomic.

    Raises ``ApplyConflict`` when another manager owns a field ``applied`` would change and
    ``force`` is false (with ``force`` the manager takes those fields over); on an object
    without managed fields its current fields belong to ``before-first-apply``. As upstream,
    manager ``kubectl`` may take over fields whose live value still equals the client-side
    apply annotation, and keeps that annotation in step. Raises ``PatchError``: 400 for a
    configuration of another API version or one that sets ``metadata.managedFields``, 422
    for an associative list item that lacks a key field.
    """
    if not isinstance(applied, dict):
        raise PatchError("apply configuration must be an object", code=400)
    # structuredMergeManager.Apply's checks on the configuration.
    if applied.get("apiVersion") != kind.api_version:
        raise PatchError(
            "Incorrect version specified in apply patch. Specified patch version: "
            f"{applied.get('apiVersion') or ''}, expected: {kind.api_version}",
            code=400,
        )
    if (applied.get("metadata") or {}).get("managedFields") is not None:
        raise PatchError("metadata.managedFields must be nil", code=400)
    spec = root_type(kind, schema)
    live_body = _body(live)
    config = clone(applied)
    ignored = _ignored(kind, subresource, config)
    # The strategy resets what this endpoint may not change, so the config never sets it.
    config = {k: v for k, v in config.items() if (f"f:{k}",) not in ignored}
    if subresource == "status" and isinstance(config.get("metadata"), dict):
        # Status strategies keep the stored metadata; only the object's identity counts.
        config["metadata"] = {
            k: v for k, v in config["metadata"].items() if k in ("name", "namespace")
        }
    entries = _decode((live or {}).get("metadata", {}).get("managedFields"))
    if live is not None and not entries:
        # skipNonAppliedManager: an object nobody tracked yet gets its current fields
        # recorded for "before-first-apply", so the first apply can conflict with them.
        entries = _decode(
            update_managed_fields(
                None,
                live_body,
                manager=_BEFORE_FIRST_APPLY,
                operation="Update",
                now=now,
                kind=kind,
                schema=schema,
            )["metadata"].get("managedFields")
        )
    this = _Entry(manager, "Apply", kind.api_version, set(), None, subresource or "")
    previous = next((e for e in entries if e.identity == this.identity), None)
    if previous is not None:
        this.time = previous.time
    others = [e for e in entries if e is not previous]

    merged = _merge(live_body if live is not None else _MISSING, config, spec)
    # Identity fields count as applied while pruning (upstream strips them afterwards).
    applied_set = {p for p in _field_set(config, spec, strict=True) if not _under_any(p, ignored)}
    config_set = _clean(applied_set, ignored)
    this.fields = config_set

    # Pruning can only drop what the manager applied before and not now (the expansion
    # to named parents is monotone), so a config covering the last one skips it.
    if previous is not None and previous.fields - applied_set:
        owned = _with_named_parents(set().union(applied_set, *(e.fields for e in others)), spec)
        last = _with_named_parents(previous.fields, spec)
        merged_set = _with_named_parents(_field_set(merged, spec), spec)
        merged = _remove(merged, spec, (last - owned) & merged_set)

    base = live_body if live is not None else _zero(kind, merged)
    comparison = _compare(base, merged, spec)
    comparison.drop(ignored | _STRIPPED)
    changed = comparison.changed()

    conflicts = [(e, p) for e in others for p in e.fields & changed]
    if (
        conflicts
        and not force
        and not (manager == _KUBECTL and _upgradable(live_body, conflicts, spec))
    ):
        raise ApplyConflict(
            [
                {"manager": e.describe(), "field": path_string(p)}
                for e in others
                for p in _iterate(e.fields & changed)
            ]
        )
    for entry in others:
        entry.discard(changed | comparison.removed)

    if manager == _KUBECTL:
        _sync_last_applied(live_body, merged, applied)
    if live is None or not comparison.same() or previous is None:
        this.time = now
    result = merged if isinstance(merged, dict) else {}
    return _set_managed(result, [*others, this])


def _upgradable(
    live_body: dict[str, Any], conflicts: list[tuple[_Entry, Path]], spec: TypeSpec
) -> bool:
    """lastAppliedManager: conflicts on fields still equal to the client-side annotation."""
    annotations = live_body.get("metadata", {}).get("annotations") or {}
    raw = annotations.get(LAST_APPLIED_ANNOTATION)
    if not raw:
        return False
    try:
        last = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(last, dict):
        return False
    allowed = _field_set(last, spec) - _compare(last, live_body, spec).modified
    return all(path in allowed for _, path in conflicts)


def _sync_last_applied(live_body: dict[str, Any], merged: Any, applied: dict[str, Any]) -> None:
    """lastAppliedUpdater: kubectl's apply rewrites an existing client-side annotation."""
    annotations = live_body.get("metadata", {}).get("annotations") or {}
    if not annotations.get(LAST_APPLIED_ANNOTATION) or not isinstance(merged, dict):
        return
    config = clone(applied)
    config_annotations = (config.get("metadata") or {}).get("annotations")
    if isinstance(config_annotations, dict):
        config_annotations.pop(LAST_APPLIED_ANNOTATION, None)
        if not config_annotations:
            config["metadata"].pop("annotations")
    # The merged object shares untouched subtrees with the live one: copy before writing.
    metadata = merged.setdefault("metadata", {})
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        LAST_APPLIED_ANNOTATION: _json(config),
    }


# --- update -----------------------------------------------------------------------------


def update_managed_fields(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    operation: str,
    now: str,
    subresource: str | None = None,
    kind: Kind | None = None,
    schema: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Record a write of ``old`` into ``new`` by ``manager`` (``old`` None for a create).

    Returns a shallow copy of ``new`` (with its own ``metadata``) whose
    ``metadata.managedFields`` gives ``manager`` (an entry
    with ``operation``, normally ``Update``, stamped ``now``) the fields it added or changed
    and takes them, and the fields it removed, from every other entry. As upstream:
    managed fields sent in ``new`` replace the stored ones (an empty list, or one empty
    entry, clears them), except through a subresource; a write that changes nothing leaves
    the entries as they were; an existing object without managed fields stays untracked;
    more than ten Update entries fold the oldest into
    ``ancient-changes``. ``kind`` defaults to the one ``new`` names; ``schema`` is a custom
    resource's ``openAPIV3Schema`` (its list types and map types), as for
    ``server_side_apply``.
    """
    kind = kind or _kind_of(new)
    spec: TypeSpec = root_type(kind, schema) if kind is not None else Struct("Object")
    out = dict(new)
    sent = (new.get("metadata") or {}).get("managedFields")
    stored = _decode((old or {}).get("metadata", {}).get("managedFields"))
    if subresource:
        entries = stored
    elif isinstance(sent, list) and (not sent or sent == [{}]):
        entries = []
    else:
        entries = _decode(sent) or stored

    if old is not None and not entries:
        # skipNonAppliedManager: fields of an object nobody tracks stay untracked on
        # update (and a request that clears them keeps them cleared).
        return _set_managed(out, [])
    old_body = _body(old) if old is not None else _zero(kind, new)
    new_body = _body(new)
    comparison = _compare(old_body, new_body, spec)
    comparison.drop(_ignored(kind, subresource, new_body) | _STRIPPED)
    if comparison.same():
        return _set_managed(out, entries)

    changed = comparison.changed()
    for entry in entries:
        entry.discard(changed | comparison.removed)
    version = str(new.get("apiVersion") or (kind.api_version if kind else ""))
    this = _Entry(manager, operation, version, set(), None, subresource or "")
    previous = next((e for e in entries if e.identity == this.identity), None)
    if changed:
        if previous is None:
            entries.append(this)
            previous = this
        previous.fields = previous.fields | changed
        previous.time = now
    return _set_managed(out, _cap_updaters(entries))
