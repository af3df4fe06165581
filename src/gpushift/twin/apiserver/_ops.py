"""The pure object operations the store and server use: patches, apply, managed fields, tables.

They live in ``_patch``, ``_apply`` and ``_tables``; this module turns their errors into API
errors, and stands in minimally for any operation that is not implemented yet.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import jsonpatch

from gpushift._kinds import Kind
from gpushift.twin.apiserver import _apply, _patch, _tables
from gpushift.twin.apiserver._status import ApiError, StatusDetails

Obj = dict[str, Any]
_REASONS = {400: "BadRequest", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType"}


def _patch_error(err: _patch.PatchError) -> ApiError:
    return ApiError(err.code, _REASONS.get(err.code, "Invalid"), err.message)


def json_patch(obj: Obj, ops: list[Any]) -> Obj:
    """RFC 6902 JSON patch; raises ApiError (422, 400, 413) when it cannot be applied."""
    try:
        return _patch.json_patch(obj, ops)
    except _patch.PatchError as err:
        raise _patch_error(err) from err
    except NotImplementedError:
        try:
            out: Obj = jsonpatch.apply_patch(obj, ops)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            raise ApiError(422, "Invalid", str(err)) from err
        return out


def merge_patch(obj: Obj, patch: Any) -> Obj:
    """RFC 7386 JSON merge patch."""
    try:
        return _patch.merge_patch(obj, patch)
    except _patch.PatchError as err:
        raise _patch_error(err) from err
    except NotImplementedError:
        out: Obj = _patch.merge_value(obj, patch)
        return out


def strategic_merge_patch(obj: Obj, patch: Any, *, kind: Kind) -> Obj:
    """Strategic merge patch; 415 for kinds without patch strategies (custom resources)."""
    try:
        return _patch.strategic_merge_patch(obj, patch, kind=kind)
    except _patch.PatchError as err:
        raise _patch_error(err) from err
    except NotImplementedError:
        if not kind.builtin:
            raise ApiError(
                415, "UnsupportedMediaType", "strategic merge patch format is not supported"
            ) from None
        out: Obj = _patch.merge_value(obj, patch)
        return out


def server_side_apply(
    live: Obj | None, applied: Obj, *, manager: str, force: bool, kind: Kind, now: str
) -> Obj:
    """Server-side apply; raises ApiError 409 listing the conflicts on an ownership conflict."""
    try:
        return _apply.server_side_apply(
            live, applied, manager=manager, force=force, kind=kind, now=now
        )
    except _apply.ApplyConflict as err:
        details: StatusDetails = {"causes": err.causes}
        raise ApiError(409, "Conflict", err.message or str(err), details=details) from err
    except _patch.PatchError as err:
        raise _patch_error(err) from err
    except NotImplementedError:
        merged: Obj = _patch.merge_value(live or {}, applied)
        return _fallback_managed_fields(live, merged, manager=manager, operation="Apply", now=now)


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
    try:
        return _apply.update_managed_fields(
            old, new, manager=manager, operation=operation, now=now, subresource=subresource
        )
    except NotImplementedError:
        return _fallback_managed_fields(
            old, new, manager=manager, operation=operation, now=now, subresource=subresource
        )


def _fallback_managed_fields(
    old: Obj | None,
    new: Obj,
    *,
    manager: str,
    operation: str,
    now: str,
    subresource: str | None = None,
) -> Obj:
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


def printer_columns(crd: Obj, version: str) -> list[Obj] | None:
    """A CRD's printer columns for ``version`` (None when not available)."""
    try:
        return _tables.printer_columns(crd, version)
    except NotImplementedError:
        return None


def to_table(
    kind: Kind,
    objects: list[Obj],
    *,
    now: datetime,
    include_object: str = "Metadata",
    columns: list[Obj] | None = None,
) -> Obj:
    """A ``meta.k8s.io/v1`` Table for ``objects``."""
    try:
        return _tables.to_table(
            kind, objects, now=now, include_object=include_object, columns=columns
        )
    except NotImplementedError:
        pass
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
