"""The pure object operations the store and server use: patches, apply, managed fields, tables.

They live in ``_patch``, ``_apply`` and ``_tables``; this module binds to them and keeps a
minimal stand-in for any that is not importable, so the server core works on its own.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

import jsonpatch

from gpushift._kinds import Kind
from gpushift.twin._status import ApiError

Obj = dict[str, Any]


class PatchRejectedError(ApiError):
    """A patch that cannot be applied (422 or 415, as the patch module decides)."""


def _optional(module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(f"gpushift.twin.{module}"), name)
    except (ImportError, AttributeError):
        return None


def _merge(obj: Any, patch: Any) -> Any:
    # RFC 7386
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _wrap(err: Exception) -> ApiError:
    code = getattr(err, "code", 422)
    code = code if isinstance(code, int) else 422
    reason = {415: "UnsupportedMediaType", 400: "BadRequest"}.get(code, "Invalid")
    return PatchRejectedError(code, reason, str(getattr(err, "message", None) or err))


def json_patch(obj: Obj, ops: list[Any]) -> Obj:
    """RFC 6902 JSON patch; raises ApiError (422) when an operation fails."""
    impl = _optional("_patch", "json_patch")
    try:
        if impl is not None:
            return cast(Obj, impl(obj, ops))
        return cast(Obj, jsonpatch.apply_patch(obj, ops))
    except ApiError:
        raise
    except Exception as err:
        raise _wrap(err) from err


def merge_patch(obj: Obj, patch: Any) -> Obj:
    """RFC 7386 JSON merge patch."""
    impl = _optional("_patch", "merge_patch")
    try:
        if impl is not None:
            return cast(Obj, impl(obj, patch))
        return cast(Obj, _merge(obj, patch))
    except ApiError:
        raise
    except Exception as err:
        raise _wrap(err) from err


def strategic_merge_patch(obj: Obj, patch: Any, *, kind: Kind) -> Obj:
    """Strategic merge patch; 415 for kinds without patch strategies (custom resources)."""
    impl = _optional("_patch", "strategic_merge_patch")
    try:
        if impl is not None:
            return cast(Obj, impl(obj, patch, kind=kind))
        if not kind.builtin:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "strategic merge patch format is not supported",
            )
        return cast(Obj, _merge(obj, patch))
    except ApiError:
        raise
    except Exception as err:
        raise _wrap(err) from err


def server_side_apply(
    live: Obj | None, applied: Obj, *, manager: str, force: bool, kind: Kind, now: str
) -> Obj:
    """Server-side apply; raises ApiError 409 with the conflicts on a field-ownership conflict."""
    impl = _optional("_apply", "server_side_apply")
    conflict_type = _optional("_apply", "ApplyConflict")
    if impl is None:
        merged = _merge(live or {}, applied)
        return update_managed_fields(live, merged, manager=manager, operation="Apply", now=now)
    try:
        return cast(Obj, impl(live, applied, manager=manager, force=force, kind=kind, now=now))
    except ApiError:
        raise
    except Exception as err:
        if conflict_type is not None and isinstance(err, conflict_type):
            causes = [
                {
                    "reason": "FieldManagerConflict",
                    "message": str(c.get("message", c)),
                    "field": str(c.get("field", "")),
                }
                if isinstance(c, dict)
                else {"reason": "FieldManagerConflict", "message": str(c), "field": ""}
                for c in getattr(err, "conflicts", [])
            ]
            raise ApiError(409, "Conflict", str(err), details={"causes": causes}) from err
        raise _wrap(err) from err


def _fields(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {f"f:{k}": _fields(v) for k, v in obj.items()}
    return {}


def update_managed_fields(
    old: Obj | None,
    new: Obj,
    *,
    manager: str,
    operation: str,
    now: str,
    subresource: str | None = None,
) -> Obj:
    """``new`` with ``metadata.managedFields`` updated for a write by ``manager``."""
    impl = _optional("_apply", "update_managed_fields")
    if impl is not None:
        return cast(
            Obj,
            impl(old, new, manager=manager, operation=operation, now=now, subresource=subresource),
        )
    out = dict(new)
    meta = dict(out.get("metadata") or {})
    body = {k: v for k, v in out.items() if k not in ("apiVersion", "kind", "metadata")}
    labels = {k: meta[k] for k in ("labels", "annotations") if k in meta}
    entry: Obj = {
        "manager": manager,
        "operation": operation,
        "apiVersion": out.get("apiVersion", ""),
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": _fields({**body, **({"metadata": labels} if labels else {})}),
    }
    if subresource:
        entry["subresource"] = subresource
    kept = [
        m
        for m in meta.get("managedFields") or []
        if not (
            m.get("manager") == manager
            and m.get("operation") == operation
            and m.get("subresource") == subresource
        )
    ]
    meta["managedFields"] = [*kept, entry]
    out["metadata"] = meta
    return out


def _age(ts: str | None, now: datetime) -> str:
    if not ts:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return "<invalid>"
    secs = int((now - then).total_seconds())
    # k8s.io/apimachinery/pkg/util/duration HumanDuration, coarse form
    if secs < 0:
        return "<invalid>"
    if secs < 120:
        return f"{secs}s"
    mins, hours, days = secs // 60, secs // 3600, secs // 86400
    if mins < 10:
        return f"{mins}m{secs % 60}s" if secs % 60 else f"{mins}m"
    if hours < 3:
        return f"{mins}m"
    if hours < 8:
        return f"{hours}h{mins % 60}m" if mins % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"


def to_table(
    kind: Kind, objects: list[Obj], *, now: datetime, include_object: str = "Metadata"
) -> Obj:
    """A ``meta.k8s.io/v1`` Table for ``objects``."""
    impl = _optional("_tables", "to_table")
    if impl is not None:
        return cast(Obj, impl(kind, objects, now=now, include_object=include_object))
    rows: list[Obj] = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        row: Obj = {"cells": [meta.get("name", ""), _age(meta.get("creationTimestamp"), now)]}
        if include_object == "Object":
            row["object"] = obj
        elif include_object == "Metadata":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {
                "name": "Name",
                "type": "string",
                "format": "name",
                "description": "Name must be unique within a namespace.",
                "priority": 0,
            },
            {
                "name": "Age",
                "type": "string",
                "format": "",
                "description": (
                    "CreationTimestamp is a timestamp representing the server time when this "
                    "object was created."
                ),
                "priority": 0,
            },
        ],
        "rows": rows,
    }


Patcher = Callable[[Obj], Obj]
