"""The twin's HTTP layer: the Kubernetes REST API over a :class:`Store`.

Paths, verbs, query parameters and response shapes follow kube-apiserver
(k8s.io/apiserver/pkg/endpoints); errors are ``Status`` bodies from ``_status``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from gpushift import common
from gpushift.common import Kind, Obj
from gpushift_twin.apiserver import (
    _auth,
    _discovery,
    _openapi,
    _ops,
    _podlog,
    _protobuf,
    _tables,
)
from gpushift_twin.apiserver._faults import HEALTH_PATHS, Faults
from gpushift_twin.apiserver._selectors import (
    compile_fields,
    parse_fields,
    parse_labels,
    selector_string,
)
from gpushift_twin.apiserver._status import (
    ApiError,
    bad_request,
    conflict,
    invalid_group_kind,
    method_not_allowed,
    not_found,
    unsupported_media_type,
)
from gpushift_twin.apiserver._store import Store, get_path, rfc3339, set_path
from gpushift_twin.apiserver._watch import Event, encode

log = logging.getLogger("gpushift_twin")

_JSON = "application/json"
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource path names."""

    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=encode(body), status=status, content_type=_JSON, headers=headers)


def _raw(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=_JSON)


def error_response(err: ApiError) -> web.Response:
    """``err`` as kube-apiserver answers it: its Status body, code and headers."""
    return _json(err.status(), err.code, err.headers or None)


def _is_table(accept: str) -> bool:
    return "as=Table" in accept


#: The options kind each verb's query parameters decode into (metav1).
_OPTIONS = {
    "POST": "CreateOptions",
    "PUT": "UpdateOptions",
    "PATCH": "PatchOptions",
    "DELETE": "DeleteOptions",
}


def _dry_run_causes(values: list[Any]) -> list[tuple[str, str, str]]:
    # metav1 validation.ValidateDryRun: a field.NotSupported on the whole value list.
    if all(value == "All" for value in values):
        return []
    listed = json.dumps(values, separators=(",", ":"))
    return [("dryRun", f"Unsupported value: {listed}", 'supported values: "All"')]


def _dry_run(request: web.Request, body: Obj | None = None) -> bool:
    values = request.query.getall("dryRun", [])
    if body is not None:
        extra = body.get("dryRun") or []
        values = [*values, *(extra if isinstance(extra, list) else [extra])]
    causes = _dry_run_causes(values)
    if causes:
        raise invalid_group_kind("meta.k8s.io", _OPTIONS.get(request.method, ""), "", causes)
    return bool(values)


def _check_patch_options(request: web.Request, ctype: str) -> None:
    """metav1 validation.ValidatePatchOptions: a 422 on PatchOptions."""
    q = request.query
    causes: list[tuple[str, str, str]] = []
    if ctype != "application/apply-patch+yaml":
        if "force" in q:
            causes.append(("force", "Forbidden", "may not be specified for non-apply patch"))
    elif not q.get("fieldManager"):
        causes.append(("fieldManager", "Required value", "is required for apply patch"))
    causes += _dry_run_causes(q.getall("dryRun", []))
    if causes:
        raise invalid_group_kind("meta.k8s.io", "PatchOptions", "", causes)


def _manager(request: web.Request) -> str:
    # Default field manager: the user agent up to its first "/" (fieldmanager.prefixFromUserAgent).
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("User-Agent", "")
    return agent.split("/", 1)[0][:128] or "unknown"


def authorize(request: web.Request, path: str, token: str) -> web.Response | None:
    """None when the request may go on. A wrong token is 401 everywhere; no token is the
    anonymous user, whom kube-apiserver's default RBAC lets read only the public paths."""
    known = _auth.authenticate(request.headers.get("Authorization"), token)
    if known is False:
        return _json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            },
            401,
        )
    if known is None and path not in _auth.PUBLIC_PATHS:
        info = _auth.request_info(request.method, path, request.query)
        return error_response(_auth.forbidden(info))
    return None


class TwinServer:
    """The aiohttp application serving one store."""

    def __init__(
        self,
        store: Store,
        *,
        token: str | None,
        faults: Faults | None = None,
        bookmark_interval: float = 5.0,
        access_log: bool = False,
        kubernetes_version: str = _discovery.DEFAULT_KUBERNETES_VERSION,
    ) -> None:
        self.store = store
        self.version = _discovery.version_info(kubernetes_version)
        self.token = token
        self.faults = faults or Faults()
        self.bookmark_interval = bookmark_interval
        self.access_log = access_log
        self.requests = 0
        #: Where ``pods/log`` reads container logs (the cluster's agents); None: empty logs.
        self.logs: _podlog.LogSource | None = None
        self._openapi_cache: dict[tuple[int, str], bytes] = {}
        self._watch_queues: set[asyncio.Queue[Event | None]] = set()

    def app(self) -> web.Application:
        """A fresh aiohttp application for this server."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_shutdown.append(self._end_watches)
        return app

    async def _end_watches(self, app: web.Application) -> None:
        # Open watch streams would otherwise hold shutdown until their timeout; a real
        # apiserver ends them too, and clients re-list and re-watch.
        del app
        for queue in list(self._watch_queues):
            queue.put_nowait(None)

    # --- entry -------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request: faults, authentication, then the API."""
        self.requests += 1
        start = time.perf_counter() if self.access_log else 0.0
        faults = self.faults
        await faults.hold()
        path = request.path
        if self.token is not None:
            refused = authorize(request, path, self.token)
            if refused is not None:
                return refused
        try:
            injected = faults.error_for(path)
            if injected is not None:
                raise injected
            response = await self._dispatch(request, path)
        except ApiError as err:
            response = error_response(err)
        except web.HTTPException:
            raise
        except Exception as err:  # a bug in the twin: answer as kube-apiserver's panic filter does
            log.exception("%s %s failed", request.method, path)
            response = error_response(
                ApiError(500, "InternalError", f"Internal error occurred: {err}")
            )
        if self.access_log:
            # Method, path and status only: headers (the bearer token) are never logged.
            log.info(
                "%s %s %d %.1fms",
                request.method,
                path,
                response.status,
                (time.perf_counter() - start) * 1000,
            )
        return response

    async def _dispatch(self, request: web.Request, path: str) -> web.StreamResponse:
        segs = [s for s in path.split("/") if s]
        if not segs:
            return _json(
                {
                    "paths": [
                        "/api",
                        "/api/v1",
                        "/apis",
                        "/healthz",
                        "/livez",
                        "/openapi/v2",
                        "/openapi/v3",
                        "/readyz",
                        "/version",
                    ]
                }
            )
        head = segs[0]
        if path in HEALTH_PATHS:
            return web.Response(text="ok")
        if head == "version" and len(segs) == 1:
            return _json(self.version)
        if path.rstrip("/") == _discovery.TWIN_MARKER_PATH:
            return _json(_discovery.TWIN_MARKER)
        if head == "openapi":
            return self._openapi(request, segs)
        if head == "api":
            if len(segs) == 1:
                return self._discovery_root(request, legacy=True)
            group, version, rest = "", segs[1], segs[2:]
        elif head == "apis":
            if len(segs) == 1:
                return self._discovery_root(request, legacy=False)
            if len(segs) == 2:
                doc = _discovery.api_group(self.store.kinds(), segs[1])
                if doc is None:
                    raise ApiError(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                return _json(doc)
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            doc = _discovery.resource_list(self.store.kinds(), group, version)
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return _json(doc)
        target = self._target(group, version, rest)
        return await self._resource(request, target)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        store = self.store
        if rest[0] == "namespaces" and len(rest) >= 3:
            kind = store._by_gvr.get((group, version, rest[2]))
            if kind is not None and kind.namespaced:
                if len(rest) > 5:
                    raise ApiError(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                return Target(
                    kind,
                    rest[1],
                    rest[3] if len(rest) > 3 else None,
                    rest[4] if len(rest) > 4 else None,
                )
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        kind = store.kind_for(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return Target(kind, None, name, sub)

    # --- discovery and openapi ---------------------------------------------------------------

    def _discovery_root(self, request: web.Request, *, legacy: bool) -> web.Response:
        accept = request.headers.get("Accept", "")
        if _discovery.wants_aggregated(accept):
            body = _discovery.aggregated(self.store.kinds(), legacy=legacy)
            return web.Response(
                body=encode(body), headers={"Content-Type": _discovery.AGGREGATED_V2}
            )
        if legacy:
            return _json(_discovery.api_versions(server_address=request.host))
        return _json(_discovery.api_group_list(self.store.kinds()))

    def _openapi(self, request: web.Request, segs: list[str]) -> web.Response:
        kinds = self.store.kinds()
        generation = hash(tuple((k.group, k.version, k.plural) for k in kinds))
        if segs[1:2] == ["v3"]:
            if len(segs) == 2:
                return _json(_openapi.v3_index(kinds))
            gv = "/".join(segs[2:])
            key = (generation, gv)
            if key not in self._openapi_cache:
                doc = _openapi.v3_group_version(kinds, gv)
                if doc is None:
                    raise ApiError(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                self._openapi_cache[key] = encode(doc)
            return _raw(self._openapi_cache[key])
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # --- resources ---------------------------------------------------------------------------

    async def _resource(self, request: web.Request, t: Target) -> web.StreamResponse:
        method = request.method
        if t.subresource is not None:
            if t.subresource not in t.kind.subresources or t.name is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return await self._subresource(request, t)
        if t.name is None:
            if method == "GET":
                q = request.query
                if q.get("watch") in ("true", "1"):
                    return await self._watch(request, t)
                return self._list(request, t)
            if method == "POST":
                return await self._create(request, t)
            if method == "DELETE":
                return self._delete_collection(request, t)
            raise method_not_allowed(method)
        if method == "GET":
            accept = request.headers.get("Accept", "")
            if _is_table(accept):
                obj = self.store.get(t.kind, name=t.name, namespace=t.namespace)
                return _json(self._table(request, t.kind, [obj]))
            return _raw(self.store.get_raw(t.kind, name=t.name, namespace=t.namespace))
        if method == "PUT":
            body = await self._body(request)
            dry = _dry_run(request)
            out = self.store.replace(
                t.kind,
                body,
                name=t.name,
                namespace=t.namespace,
                dry_run=dry,
                manager=_manager(request),
            )
            return _json(out)
        if method == "PATCH":
            return await self._patch(request, t)
        if method == "DELETE":
            return await self._delete(request, t)
        raise method_not_allowed(method)

    async def _body(self, request: web.Request) -> Any:
        data = await request.read()
        ctype = request.content_type
        if ctype == "application/vnd.kubernetes.protobuf":
            try:
                return _protobuf.decode(data)
            except _protobuf.ProtobufError as err:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: application/json, application/yaml ({err})",
                ) from err
        if "protobuf" in ctype or "cbor" in ctype:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml",
            )
        if not data:
            raise bad_request("the body of the request was in an unknown format")
        try:
            if request.content_type.endswith("yaml"):
                return common.load_yaml(data)
            return json.loads(data)
        except (ValueError, yaml.YAMLError) as err:
            raise bad_request(f"the body of the request was in an unknown format: {err}") from err

    def _table(self, request: web.Request, kind: Kind, objects: list[Obj]) -> Obj:
        include = request.query.get("includeObject", "Metadata")
        columns = None
        crd_name = self.store.resource(kind).crd
        if crd_name is not None:
            crd_kind = self.store.kind_for(
                "apiextensions.k8s.io", "v1", "customresourcedefinitions"
            )
            try:
                crd = self.store.get(crd_kind, name=crd_name)
            except ApiError:
                crd = None
            if crd is not None:
                columns = _tables.printer_columns(crd, kind.version)
        return _tables.to_table(
            kind, objects, now=self.store.clock(), include_object=include, columns=columns
        )

    def _selectors(
        self, request: web.Request, kind: Kind
    ) -> tuple[Any, Callable[[Obj], bool] | None]:
        q = request.query
        labels = parse_labels(q["labelSelector"]) if q.get("labelSelector") else ()
        fields = None
        if q.get("fieldSelector"):
            extra = self.store.resource(kind).selectable_fields
            fields = compile_fields(parse_fields(q["fieldSelector"]), kind, extra)
        return labels, fields

    def _list(self, request: web.Request, t: Target) -> web.Response:
        q = request.query
        labels, fields = self._selectors(request, t.kind)
        try:
            limit = int(q.get("limit") or 0)
        except ValueError as err:
            raise bad_request(f"invalid limit: {q.get('limit')}") from err
        page = self.store.list(
            t.kind,
            namespace=t.namespace,
            labels=labels,
            fields=fields,
            limit=max(limit, 0),
            continue_token=q.get("continue", ""),
        )
        meta: Obj = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            meta["continue"] = page.continue_token
            if page.remaining is not None:
                meta["remainingItemCount"] = page.remaining
        if _is_table(request.headers.get("Accept", "")):
            table = self._table(request, t.kind, page.objects)
            table["metadata"] = meta
            return _json(table)
        head = encode(
            {"kind": f"{t.kind.kind}List", "apiVersion": t.kind.api_version, "metadata": meta}
        )
        return _raw(head[:-1] + b',"items":[' + b",".join(page.raw) + b"]}")

    async def _create(self, request: web.Request, t: Target) -> web.Response:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise bad_request("the body of the request was in an unknown format")
        dry = _dry_run(request)
        out = self.store.create(
            t.kind, body, namespace=t.namespace, dry_run=dry, manager=_manager(request)
        )
        return _json(out, 201)

    def _patcher(self, request: web.Request, t: Target, body: Any) -> Callable[[Obj], Obj]:
        ctype = request.content_type
        if ctype == "application/json-patch+json":
            if not isinstance(body, list):
                raise bad_request("the body of the request was in an unknown format")
            return lambda obj: _ops.json_patch(obj, body)
        if ctype == "application/merge-patch+json":
            return lambda obj: _ops.merge_patch(obj, body)
        if ctype == "application/strategic-merge-patch+json":
            return lambda obj: _ops.strategic_merge_patch(obj, body, kind=t.kind)
        raise unsupported_media_type(ctype)

    async def _patch(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        ctype = request.content_type
        if ctype not in _PATCH_TYPES:
            raise unsupported_media_type(ctype)
        _check_patch_options(request, ctype)
        body = await self._body(request)
        dry = _dry_run(request)
        manager = request.query.get("fieldManager", "")
        store = self.store
        if ctype == "application/apply-patch+yaml":
            if not isinstance(body, dict):
                raise bad_request("the body of the request was in an unknown format")
            force = request.query.get("force") in ("true", "1")
            now = rfc3339(store.clock())
            with store._lock:
                try:
                    store.get_raw(t.kind, name=t.name, namespace=t.namespace)
                except ApiError as err:
                    if err.code != 404:
                        raise
                    merged = _ops.server_side_apply(
                        None, body, manager=manager, force=force, kind=t.kind, now=now
                    )
                    merged.setdefault("metadata", {}).setdefault("name", t.name)
                    out = store.create(
                        t.kind,
                        merged,
                        namespace=t.namespace,
                        dry_run=dry,
                        manager=manager,
                        keep_managed_fields=True,
                    )
                    return _json(out, 201)
                out = store.update(
                    t.kind,
                    name=t.name,
                    namespace=t.namespace,
                    dry_run=dry,
                    managed=False,
                    mutate=lambda live: _ops.server_side_apply(
                        live, body, manager=manager, force=force, kind=t.kind, now=now
                    ),
                )
            return _json(out)
        patch = self._patcher(request, t, body)
        out = store.update(
            t.kind,
            name=t.name,
            namespace=t.namespace,
            mutate=patch,
            dry_run=dry,
            manager=_manager(request),
        )
        return _json(out)

    def _delete_options(self, request: web.Request, body: Any) -> Obj:
        opts: Obj = body if isinstance(body, dict) else {}
        q = request.query
        policy = q.get("propagationPolicy") or opts.get("propagationPolicy")
        orphan = q.get("orphanDependents") or opts.get("orphanDependents")
        if policy is None and orphan in (True, "true"):
            policy = "Orphan"
        if policy not in (None, "Background", "Foreground", "Orphan"):
            raise bad_request(
                f'propagationPolicy: Unsupported value: "{policy}": supported values: '
                '"Foreground", "Background", "Orphan"'
            )
        pre = opts.get("preconditions") or {}
        return {
            "propagation": policy,
            "uid": pre.get("uid"),
            "resource_version": pre.get("resourceVersion"),
            "dry_run": _dry_run(request, opts),
        }

    async def _delete(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        data = await request.read()
        body = json.loads(data) if data else None
        opts = self._delete_options(request, body)
        out = self.store.delete(t.kind, name=t.name, namespace=t.namespace, **opts)
        return _json(out)

    def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        labels, fields = self._selectors(request, t.kind)
        opts = self._delete_options(request, None)
        page = self.store.list(t.kind, namespace=t.namespace, labels=labels, fields=fields)
        items = []
        for obj in page.objects:
            meta = obj["metadata"]
            try:
                items.append(
                    self.store.delete(
                        t.kind, name=meta["name"], namespace=meta.get("namespace"), **opts
                    )
                )
            except ApiError as err:
                if err.code != 404:
                    raise
        return _json(
            {
                "kind": f"{t.kind.kind}List",
                "apiVersion": t.kind.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": items,
            }
        )

    # --- subresources ------------------------------------------------------------------------

    async def _subresource(self, request: web.Request, t: Target) -> web.StreamResponse:
        assert t.name is not None and t.subresource is not None
        method, sub, store = request.method, t.subresource, self.store
        if sub == "status":
            if method == "GET":
                return _raw(store.get_raw(t.kind, name=t.name, namespace=t.namespace))
            if method == "PUT":
                body = await self._body(request)
                return _json(
                    store.replace(
                        t.kind,
                        body,
                        name=t.name,
                        namespace=t.namespace,
                        subresource="status",
                        dry_run=_dry_run(request),
                        manager=_manager(request),
                    )
                )
            if method == "PATCH":
                ctype = request.content_type
                if ctype not in _PATCH_TYPES or ctype == "application/apply-patch+yaml":
                    if ctype == "application/apply-patch+yaml":
                        body = await self._body(request)
                        patch: Callable[[Obj], Obj] = lambda obj: _ops.merge_patch(obj, body)  # noqa: E731
                    else:
                        raise unsupported_media_type(ctype)
                else:
                    body = await self._body(request)
                    patch = self._patcher(request, t, body)
                return _json(
                    store.update(
                        t.kind,
                        name=t.name,
                        namespace=t.namespace,
                        mutate=patch,
                        subresource="status",
                        dry_run=_dry_run(request),
                        manager=_manager(request),
                    )
                )
            raise method_not_allowed(method)
        if sub == "scale":
            return await self._scale(request, t)
        if sub == "log":
            return await _podlog.serve(
                request,
                store=store,
                kind=t.kind,
                namespace=t.namespace,
                name=t.name,
                source=self.logs,
            )
        if sub == "binding" and method == "POST":
            body = await self._body(request)
            return self._bind(request, t, body)
        raise method_not_allowed(method)

    def _scale_of(self, kind: Kind, obj: Obj) -> Obj:
        paths = self.store.resource(kind).scale
        assert paths is not None
        meta = obj["metadata"]
        status: Obj = {"replicas": int(get_path(obj, paths.status_replicas) or 0)}
        if kind.builtin:
            selector = (obj.get("spec") or {}).get("selector") or {}
            text = selector_string(selector)
            if text:
                status["selector"] = text
        elif paths.label_selector:
            value = get_path(obj, paths.label_selector)
            if value:
                status["selector"] = value
        scale_meta = {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        }
        replicas = int(get_path(obj, paths.spec_replicas) or 0)
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": scale_meta,
            # autoscaling/v1 ScaleSpec.Replicas is omitempty: zero replicas, an empty spec.
            "spec": {"replicas": replicas} if replicas else {},
            "status": status,
        }

    async def _scale(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        store, method = self.store, request.method
        if method == "GET":
            return _json(
                self._scale_of(t.kind, store.get(t.kind, name=t.name, namespace=t.namespace))
            )
        if method not in ("PUT", "PATCH"):
            raise method_not_allowed(method)
        body = await self._body(request)
        patch = self._patcher(request, t, body) if method == "PATCH" else None
        paths = store.resource(t.kind).scale
        assert paths is not None

        def mutate(obj: Obj) -> Obj:
            scale = self._scale_of(t.kind, obj)
            new_scale = patch(scale) if patch is not None else body
            want_rv = ((new_scale or {}).get("metadata") or {}).get("resourceVersion")
            if want_rv and want_rv != obj["metadata"]["resourceVersion"]:
                raise conflict(t.kind, t.name or "", _MODIFIED)
            # Absent (omitempty) or null decodes to Go's zero.
            replicas = (new_scale.get("spec") or {}).get("replicas") or 0
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Scale.autoscaling "{t.name}" is invalid: '
                    f"spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0",
                )
            return set_path(obj, paths.spec_replicas, replicas)

        out = store.update(
            t.kind,
            name=t.name,
            namespace=t.namespace,
            mutate=mutate,
            dry_run=_dry_run(request),
            manager=_manager(request),
        )
        return _json(self._scale_of(t.kind, out))

    def _bind(self, request: web.Request, t: Target, body: Any) -> web.Response:
        assert t.name is not None
        if t.kind.group != "" or t.kind.plural != "pods":
            raise method_not_allowed("POST")
        target = (body or {}).get("target") or {}
        node = target.get("name")
        if not node:
            raise ApiError(
                422, "Invalid", f'Binding "{t.name}" is invalid: target.name: Required value'
            )
        now = rfc3339(self.store.clock())

        def mutate(pod: Obj) -> Obj:
            spec = pod.get("spec") or {}
            if spec.get("nodeName"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{t.name}": '
                    f'pod {t.name} is already assigned to node "{spec["nodeName"]}"',
                )
            pod["spec"] = {**spec, "nodeName": node}
            return pod

        self.store.update(
            t.kind,
            name=t.name,
            namespace=t.namespace,
            mutate=mutate,
            dry_run=_dry_run(request),
            manager=_manager(request),
        )

        def scheduled(pod: Obj) -> Obj:
            status = dict(pod.get("status") or {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now,
                }
            )
            status["conditions"] = conds
            pod["status"] = status
            return pod

        if not _dry_run(request):
            self.store.update(
                t.kind,
                name=t.name,
                namespace=t.namespace,
                mutate=scheduled,
                subresource="status",
                manager=_manager(request),
            )
        return _json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
            201,
        )

    # --- watch -------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        labels, fields = self._selectors(request, t.kind)
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        lag = self.faults.watch_lag(t.kind.plural)
        #: When each queued event happened (``watch_lag``: sent that long after).
        stamps: collections.deque[float] = collections.deque()

        def deliver(event: Event) -> None:
            if lag:
                stamps.append(time.monotonic())
            if threading.get_ident() == loop_thread:
                queue.put_nowait(event)
            else:
                # A writer on another thread must not fail because this stream's loop is gone.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(queue.put_nowait, event)

        async def held(event: Event | None) -> None:
            # asyncio's loop clock is time.monotonic(): the stamps compare with it.
            if lag and event is not None and stamps:
                due = stamps.popleft() + lag
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())

        table = _is_table(request.headers.get("Accept", ""))
        bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
        initial_events = q.get("sendInitialEvents") in ("true", "1")
        rv = q.get("resourceVersion")
        if initial_events:
            rv = ""
        try:
            timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else 1800.0
        except ValueError as err:
            raise bad_request(f"invalid timeoutSeconds: {q['timeoutSeconds']}") from err
        timeout = self.faults.watch_timeout(timeout)
        response = web.StreamResponse(
            status=200, headers={"Content-Type": _JSON, "Cache-Control": "no-cache, private"}
        )
        await response.prepare(request)
        try:
            watcher = self.store.watch(
                t.kind,
                deliver=deliver,
                namespace=t.namespace,
                labels=labels,
                fields=fields,
                resource_version=rv,
            )
        except ApiError as err:
            await response.write(b'{"type":"ERROR","object":' + encode(err.status()) + b"}\n")
            return response
        deadline = loop.time() + timeout
        self._watch_queues.add(queue)
        try:
            if initial_events:
                await self._drain(response, queue, t, table, request, held)
                await response.write(self._bookmark(t.kind, initial_end=True))
            next_bookmark = loop.time() + self.bookmark_interval
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                wait = deadline - now
                if bookmarks:
                    wait = min(wait, max(next_bookmark - now, 0))
                try:
                    event = await asyncio.wait_for(queue.get(), timeout=wait)
                except TimeoutError:
                    if bookmarks and loop.time() >= next_bookmark:
                        await response.write(self._bookmark(t.kind))
                        next_bookmark = loop.time() + self.bookmark_interval
                    continue
                if event is None:
                    break
                if self.faults.paused:
                    await self.faults.wait_running()
                await held(event)
                await response.write(self._frame(event, t, table, request))
                while not queue.empty():
                    more = queue.get_nowait()
                    if more is None:
                        return response
                    await held(more)
                    await response.write(self._frame(more, t, table, request))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watch_queues.discard(queue)
            watcher.cancel()
        return response

    async def _drain(
        self,
        response: web.StreamResponse,
        queue: asyncio.Queue[Event | None],
        t: Target,
        table: bool,
        request: web.Request,
        held: Callable[[Event | None], Awaitable[None]],
    ) -> None:
        while not queue.empty():
            event = queue.get_nowait()
            if event is not None:
                await held(event)
                await response.write(self._frame(event, t, table, request))

    def _bookmark(self, kind: Kind, *, initial_end: bool = False) -> bytes:
        meta: Obj = {"resourceVersion": str(self.store.resource_version)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + encode(obj) + b"}\n"

    def _frame(self, event: Event, t: Target, table: bool, request: web.Request) -> bytes:
        if table:
            tab = self._table(request, t.kind, [event.obj])
            tab["metadata"] = {"resourceVersion": str(event.rv)}
            raw = encode(tab)
        elif event.obj.get("apiVersion") != t.kind.api_version:
            raw = encode({**event.obj, "apiVersion": t.kind.api_version})
        else:
            raw = event.raw
        return b'{"type":"' + event.type.encode() + b'","object":' + raw + b"}\n"


_MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def not_found_for(kind: Kind, name: str) -> ApiError:
    """Re-exported for callers that build their own 404s."""
    return not_found(kind, name)
