"""The three PATCH bodies kube-apiserver accepts, applied to a stored object.

- ``application/json-patch+json``: RFC 6902, through the ``jsonpatch`` library;
- ``application/merge-patch+json``: RFC 7386;
- ``application/strategic-merge-patch+json``: Kubernetes' strategic merge patch, for built-in
  kinds only (k8s.io/apimachinery pkg/util/strategicpatch, server-side merge options).

Every function is pure: it returns a new object and never changes its arguments. Failures raise
``PatchError`` carrying the HTTP status the server answers with.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import jsonpointer

from gpushift.common import Kind
from gpushift_twin.apiserver._merge_keys import (
    ListOf,
    TypeSpec,
    child_type,
    item_type,
    list_type,
    root_type,
)

__all__ = [
    "MAX_JSON_PATCH_OPERATIONS",
    "UNSUPPORTED_PATCH_MESSAGE",
    "PatchError",
    "clone",
    "json_patch",
    "merge_patch",
    "merge_value",
    "strategic_merge_patch",
]

#: kube-apiserver's cap on operations in one JSON patch (maxJSONPatchOperations).
MAX_JSON_PATCH_OPERATIONS = 10000

#: The 415 message for a patch type a resource does not accept (apiserver handlers/patch.go).
UNSUPPORTED_PATCH_MESSAGE = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
)

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"

# Error texts of k8s.io/apimachinery pkg/util/mergepatch/errors.go.
_BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
_BAD_SET_ORDER = "invalid patch format of setElementOrder list"
_BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"


class PatchError(Exception):
    """A patch the server refuses.

    ``code`` is the HTTP status: 400 for a malformed body, 413 for too many JSON patch
    operations, 415 for a patch type the resource does not accept, 422 for a well-formed
    patch that cannot be applied to this object. ``message`` is the Status message.
    """

    def __init__(self, message: str, *, code: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def clone(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists, scalars), several times faster than
    ``copy.deepcopy``, which the write path would otherwise spend most of its time in."""
    if isinstance(value, dict):
        return {k: clone(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


# --- RFC 6902 ---------------------------------------------------------------------------


def json_patch(obj: dict[str, Any], ops: list[Any]) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch to ``obj``.

    Returns the patched copy. Raises ``PatchError`` with code 400 when ``ops`` is not a
    list of well-formed operations, 413 above ``MAX_JSON_PATCH_OPERATIONS`` operations, and
    422 when an operation does not apply (missing path, failed ``test``) or the result is not
    an object.
    """
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise PatchError(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch", code=400
        )
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS},"
            f" got {len(ops)}",
            code=413,
        )
    result: Any = clone(obj)
    for op in ops:
        kind = op.get("op")
        if kind not in _JSON_PATCH_OPS:
            raise PatchError(f"Unexpected kind: {kind}")
        try:
            result = jsonpatch.JsonPatch([op]).apply(result, in_place=True)
        except jsonpatch.InvalidJsonPatch as exc:
            raise PatchError(str(exc), code=400) from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError):
            raise PatchError(_json_patch_failure(op)) from None
    if not isinstance(result, dict):
        raise PatchError("the patched document is not an object", code=422)
    return result


_JSON_PATCH_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def _json_patch_failure(op: dict[str, Any]) -> str:
    """The evanphx/json-patch (v4) message for an operation that does not apply."""
    kind, path, source = op.get("op"), op.get("path"), op.get("from")
    if kind == "test":
        return f"testing value {path} failed: test failed"
    if kind == "remove":
        key = str(path).rsplit("/", 1)[-1]
        return (
            f"error in remove for path: '{path}': "
            f"Unable to remove nonexistent key: {key}: missing value"
        )
    if kind == "replace":
        return f"replace operation does not apply: doc is missing key: {path}: missing value"
    if kind in {"move", "copy"}:
        return (
            f'{kind} operation does not apply: doc is missing from path: "{source}": missing value'
        )
    return f'add operation does not apply: doc is missing path: "{path}": missing value'


# --- RFC 7386 ---------------------------------------------------------------------------


def merge_patch(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply an RFC 7386 JSON merge patch to ``obj``.

    Objects merge key by key, ``null`` deletes a key, anything else (lists included) replaces.
    Returns the patched copy; subtrees the patch does not touch are shared with ``obj``.
    Raises ``PatchError`` (400, "Invalid JSON Patch", as evanphx/json-patch words it) when
    ``patch`` is not an object.
    """
    if not isinstance(patch, dict):
        raise PatchError("Invalid JSON Patch", code=400)
    result = merge_value(obj, patch)
    assert isinstance(result, dict)
    return result


def merge_value(target: Any, patch: Any) -> Any:
    """RFC 7386 merge of ``patch`` into ``target``, for any JSON value: a non-object ``patch``
    replaces ``target`` (copied); the result shares untouched subtrees with ``target``."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_value(out.get(key), value)
    return out


# --- strategic merge patch --------------------------------------------------------------


def strategic_merge_patch(
    obj: dict[str, Any], patch: dict[str, Any], *, kind: Kind
) -> dict[str, Any]:
    """Apply a Kubernetes strategic merge patch to ``obj`` of a built-in ``kind``.

    Lists merge by the ``patchMergeKey`` of their k8s.io/api struct tag (containers by
    ``name``, ports by ``containerPort`` …) and are replaced when the field has no merge tag
    (``tolerations``). Directives: ``$patch: replace|delete`` in maps and list items,
    ``$retainKeys``, ``$setElementOrder/<field>`` and ``$deleteFromPrimitiveList/<field>``;
    ``null`` deletes a key. Directives never reach the result.

    Returns the patched copy. Raises ``PatchError`` with code 415 and upstream's message for a
    custom resource, 400 for a malformed body or directive list, 422 for a patch that does
    not fit the object (an item without its merge key, an unknown ``$patch`` value).
    """
    if not kind.builtin:
        raise PatchError(UNSUPPORTED_PATCH_MESSAGE, code=415)
    if not isinstance(patch, dict):
        raise PatchError(
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
            code=400,
        )
    result = _smp_map(clone(obj), clone(patch), root_type(kind))
    return result


def _smp_map(original: dict[str, Any], patch: dict[str, Any], spec: TypeSpec) -> dict[str, Any]:
    """mergeMap of strategicpatch/patch.go; ``original`` and ``patch`` are owned copies."""
    if _DIRECTIVE in patch:
        directive = patch.pop(_DIRECTIVE)
        if directive == "replace":
            replaced: dict[str, Any] = _strip_directives(patch)
            return replaced
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type: {directive} in map: {_go(patch)}")

    _apply_retain_keys(original, patch)
    _apply_set_element_order(original, patch, spec)

    deletions: list[tuple[str, Any]] = []
    for key, value in patch.items():
        if key.startswith(_SET_ORDER):
            continue
        if key.startswith(_DELETE_PRIMITIVES):
            deletions.append((key[len(_DELETE_PRIMITIVES) :], value))
            continue
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            original[key] = _smp_map(current, value, child_type(spec, key))
        elif isinstance(current, list) and isinstance(value, list):
            original[key] = _smp_list(current, value, list_type(spec, key))
        elif isinstance(value, dict):
            # A new map: merging into nothing drops directives and nulls, as a later
            # apply of the same patch would.
            original[key] = _smp_map({}, value, child_type(spec, key))
        elif isinstance(value, list):
            original[key] = _smp_list([], value, list_type(spec, key))
        else:
            original[key] = value
    for key, values in deletions:
        if not isinstance(values, list):
            raise PatchError(_BAD_PRIMITIVE_LIST, code=400)
        current = original.get(key)
        if isinstance(current, list):
            drop = {_hashable(v) for v in values}
            original[key] = [v for v in current if _hashable(v) not in drop]
    return original


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """applyRetainKeysDirective: clear original fields the patch does not list."""
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise PatchError(_BAD_RETAIN_KEYS, code=400)
    keep = {k for k in retain if isinstance(k, str)}
    for key, value in patch.items():
        if value is None or key.startswith((_SET_ORDER, _DELETE_PRIMITIVES)):
            continue
        if key not in keep:
            raise PatchError(_BAD_RETAIN_KEYS, code=400)
    for key in list(original):
        if key not in keep:
            del original[key]


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], spec: TypeSpec
) -> None:
    """mergePatchIntoOriginal: merge each ordered list and sort it by the directive."""
    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        order = patch.pop(key)
        field = key[len(_SET_ORDER) :]
        if not isinstance(order, list):
            raise PatchError(_BAD_SET_ORDER, code=400)
        meta = list_type(spec, field)
        merge_key = meta.patch_merge_key if meta.smp_merges else ""
        found_original = isinstance(original.get(field), list)
        found_patch = field in patch
        patch_list = patch.pop(field, None)
        if found_patch and not isinstance(patch_list, list):
            raise PatchError(_BAD_SET_ORDER, code=400)
        _check_order(patch_list or [], order, merge_key)
        if found_original and found_patch:
            assert patch_list is not None
            merged = _smp_list(original[field], patch_list, meta, reorder=False)
        elif found_patch:
            assert patch_list is not None
            merged = _smp_list([], patch_list, meta, reorder=False)
        elif found_original:
            merged = list(original[field])
        else:
            continue
        in_order, server_only = _partition(merged, order, merge_key)
        original[field] = _normalize_order(
            in_order, server_only, order, original.get(field) or [], merge_key
        )


def _check_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """validatePatchWithSetOrderList: patch items must appear in the order list, in order."""
    if not order or not patch_list:
        return
    items = [v for v in patch_list if not (isinstance(v, dict) and v.get(_DIRECTIVE) == "delete")]
    p = s = 0
    while p < len(items) and s < len(order):
        if isinstance(items[p], dict) and _DIRECTIVE in items[p]:
            p += 1
            continue
        if _identity(items[p], merge_key) == _identity(order[s], merge_key):
            p += 1
        s += 1
    if p < len(items):
        raise PatchError(_BAD_SET_ORDER, code=400)


def _smp_list(
    original: list[Any], patch: list[Any], meta: ListOf, *, reorder: bool = True
) -> list[Any]:
    """mergeSliceHandler/mergeSlice: replace, or merge by key, then restore the order."""
    if not meta.smp_merges:
        replaced: list[Any] = _strip_directives(patch)
        return replaced
    if not original and not patch:
        return original
    if not any(isinstance(v, dict) for v in [*original, *patch]):
        merged = list(original)
        seen = {_hashable(v) for v in merged}
        for value in patch:
            if _hashable(value) not in seen:
                seen.add(_hashable(value))
                merged.append(value)
        if not reorder:
            return merged
        in_patch, server_only = _partition(merged, patch, "")
        return _normalize_order(in_patch, server_only, patch, original, "")
    key = meta.patch_merge_key
    if not key:
        raise PatchError(f"cannot merge lists without merge key for {meta.item}")
    work, items = _special_elements(original, patch, key)
    for value in items:
        if not isinstance(value, dict) or key not in value:
            raise PatchError(f"map: {_go(value)} does not contain declared merge key: {key}")
        index = _find(work, key, value[key])
        if index is None:
            work.append(_smp_map({}, value, item_type(meta, value)))
        else:
            work[index] = _smp_map(work[index], value, item_type(meta, value))
    if not reorder:
        return work
    in_patch, server_only = _partition(work, items, key)
    return _normalize_order(in_patch, server_only, items, original, key)


def _special_elements(
    original: list[Any], patch: list[Any], key: str
) -> tuple[list[Any], list[Any]]:
    """mergeSliceWithSpecialElements: handle ``$patch`` items of a list of maps."""
    plain: list[Any] = []
    replace = False
    work = list(original)
    for value in patch:
        if not isinstance(value, dict) or _DIRECTIVE not in value:
            plain.append(value)
            continue
        directive = value[_DIRECTIVE]
        if directive == "delete":
            if key not in value:
                raise PatchError(f"map: {_go(value)} does not contain declared merge key: {key}")
            work = [v for v in work if not (isinstance(v, dict) and v.get(key) == value[key])]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {_go(value)}")
    if replace:
        return [], plain
    return work, plain


def _find(items: list[Any], key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get(key) == value:
            return index
    return None


def _identity(value: Any, merge_key: str) -> Any:
    """What an order list compares: the merge key's value, or the primitive itself."""
    if merge_key and isinstance(value, dict):
        return _hashable(value.get(merge_key))
    return _hashable(value)


def _partition(merged: list[Any], order: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    """Split ``merged`` into items present in ``order`` and items only on the server."""
    wanted = {_identity(v, merge_key) for v in order}
    present = [v for v in merged if _identity(v, merge_key) in wanted]
    server_only = [v for v in merged if _identity(v, merge_key) not in wanted]
    return present, server_only


def _normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
) -> list[Any]:
    """normalizeElementOrder: sort each side, then interleave by the live list's order."""

    def index_in(order: list[Any], value: Any) -> int:
        ident = _identity(value, merge_key)
        for i, candidate in enumerate(order):
            if _identity(candidate, merge_key) == ident:
                return i
        return -1

    # Items whose order entry is {"$patch": "delete"} are dropped (removeItems).
    deleted = {
        _identity(v, merge_key)
        for v in patch_order
        if isinstance(v, dict) and v.get(_DIRECTIVE) == "delete"
    }
    big = len(patch_order) + len(server_order) + 1
    left = sorted(server_only, key=lambda v: i if (i := index_in(server_order, v)) >= 0 else big)
    right = sorted(patch_items, key=lambda v: i if (i := index_in(patch_order, v)) >= 0 else big)
    right = [v for v in right if _identity(v, merge_key) not in deleted]
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li, ri = index_in(server_order, left[i]), index_in(server_order, right[j])
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _strip_directives(value: Any) -> Any:
    """A patch value taken as-is, without directive keys or nulls in its maps."""
    if isinstance(value, dict):
        return {
            k: _strip_directives(v)
            for k, v in value.items()
            if v is not None and not k.startswith("$")
        }
    if isinstance(value, list):
        return [
            _strip_directives(v) for v in value if not (isinstance(v, dict) and _DIRECTIVE in v)
        ]
    return value


def _hashable(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return ("bool", value)
    return value


def _go(value: Any) -> str:
    """Go's ``%v`` of a decoded JSON value, as upstream error messages print it."""
    if isinstance(value, dict):
        inner = " ".join(f"{k}:{_go(value[k])}" for k in sorted(value))
        return f"map[{inner}]"
    if isinstance(value, list):
        return "[" + " ".join(_go(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
