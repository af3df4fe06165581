"""Patches and server-side apply as the API answers them: ``_patch`` and ``_apply`` do the
work, and this module turns their errors into API errors (``ApiError``)."""

from __future__ import annotations

from typing import Any

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver import _apply, _patch
from gpushift_twin.apiserver._status import ApiError, StatusDetails

_REASONS = {400: "BadRequest", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType"}


def _patch_error(err: _patch.PatchError) -> ApiError:
    return ApiError(err.code, _REASONS.get(err.code, "Invalid"), err.message)


def json_patch(obj: Obj, ops: list[Any]) -> Obj:
    """RFC 6902 JSON patch; raises ApiError (422, 400, 413) when it cannot be applied."""
    try:
        return _patch.json_patch(obj, ops)
    except _patch.PatchError as err:
        raise _patch_error(err) from err


def merge_patch(obj: Obj, patch: Any) -> Obj:
    """RFC 7386 JSON merge patch."""
    try:
        return _patch.merge_patch(obj, patch)
    except _patch.PatchError as err:
        raise _patch_error(err) from err


def strategic_merge_patch(obj: Obj, patch: Any, *, kind: Kind) -> Obj:
    """Strategic merge patch; 415 for kinds without patch strategies (custom resources)."""
    try:
        return _patch.strategic_merge_patch(obj, patch, kind=kind)
    except _patch.PatchError as err:
        raise _patch_error(err) from err


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
