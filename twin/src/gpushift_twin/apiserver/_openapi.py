"""OpenAPI v3 documents, as far as kubectl uses them.

kubectl 1.32 reads ``/openapi/v3`` (the index) and the group-version documents to learn whether
the server validates fields itself (the ``fieldValidation`` query parameter on PATCH); when it
does, it sends ``fieldValidation=Strict`` instead of validating against ``/openapi/v2``. Apply
then computes strategic merge patches from its compiled-in types for built-in kinds and JSON
merge patches for custom resources, so the documents carry paths, not schemas.
Document layout: k8s.io/kube-openapi/pkg/handler3 and k8s.io/client-go/openapi3.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver._discovery import VERSION

_FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "description": "fieldValidation instructs the server on how to handle objects in the "
    "request containing unknown or duplicate fields.",
    "schema": {"type": "string", "uniqueItems": True},
}
_DRY_RUN = {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
_FIELD_MANAGER = {
    "name": "fieldManager",
    "in": "query",
    "schema": {"type": "string", "uniqueItems": True},
}


def _gv_path(kind: Kind) -> str:
    return f"apis/{kind.group}/{kind.version}" if kind.group else f"api/{kind.version}"


def _group_versions(kinds: Iterable[Kind]) -> dict[str, list[Kind]]:
    out: dict[str, list[Kind]] = {}
    for kind in kinds:
        out.setdefault(_gv_path(kind), []).append(kind)
    return out


def v3_index(kinds: Iterable[Kind]) -> Obj:
    """``GET /openapi/v3``: one entry per served group-version, with a content hash."""
    paths: Obj = {}
    for gv, members in sorted(_group_versions(kinds).items()):
        digest = hashlib.sha512(repr(sorted(k.plural for k in members)).encode()).hexdigest()[:64]
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest.upper()}"}
    return {"paths": paths}


def _operation(kind: Kind, action: str, *, patch: bool = False) -> Obj:
    params = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION] if action != "get" else []
    op: Obj = {
        "operationId": f"{action}{kind.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": kind.group,
            "version": kind.version,
            "kind": kind.kind,
        },
    }
    if patch:
        op["requestBody"] = {
            "content": {
                t: {"schema": {"type": "object"}}
                for t in (
                    "application/apply-patch+yaml",
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                )
            }
        }
    return op


def v3_group_version(kinds: Iterable[Kind], gv: str) -> Obj | None:
    """``GET /openapi/v3/{api/v1 | apis/group/version}``, or None when not served."""
    members = _group_versions(kinds).get(gv.strip("/"))
    if not members:
        return None
    paths: Obj = {}
    for kind in sorted(members, key=lambda k: k.plural):
        base = "/" + gv.strip("/")
        if kind.namespaced:
            base += "/namespaces/{namespace}"
        collection = f"{base}/{kind.plural}"
        item = collection + "/{name}"
        paths[collection] = {"get": _operation(kind, "list"), "post": _operation(kind, "post")}
        paths[item] = {
            "get": _operation(kind, "get"),
            "put": _operation(kind, "put"),
            "patch": _operation(kind, "patch", patch=True),
            "delete": _operation(kind, "delete"),
        }
        for sub in kind.subresources:
            if sub in ("status", "scale"):
                paths[f"{item}/{sub}"] = {
                    "get": _operation(kind, "get"),
                    "put": _operation(kind, "put"),
                    "patch": _operation(kind, "patch", patch=True),
                }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }
