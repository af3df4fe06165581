"""A :class:`Store` whose objects live on a real Kubernetes API server.

The twin's agents (kubelets, device and DRA plugins, GFD, DCGM, chart models, Flux) act on a
``Store``. :class:`ApiStore` is one that reads from informers and writes through the API, so
the same agents run against kube-apiserver:

* reads (``get``/``peek``/``list``/``changed_at``/``watch``) come from a local cache that a
  list-and-watch per kind keeps current; a kind's informer starts on its first read (the
  first read lists synchronously), so only the kinds the agents use are watched;
* writes are API calls: POST, PUT with the object's resourceVersion (a 409 Conflict reads the
  object afresh and runs ``mutate`` again), the ``status`` subresource for status writes as
  kube-apiserver requires, DELETE with preconditions, propagation and grace period, and
  server-side apply (:meth:`ApiStore.apply`). What the server answers goes into the cache at
  once, so an agent reads its own writes before the watch event arrives.

Cached objects keep the server's resourceVersions; the cache's own counter
(``resource_version``, ``changed_at``, watch replay) is local and only orders its changes.
The server's garbage collector, admission and defaulting apply, not the twin's.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import orjson

from gpushift.common import Kind, Obj, by_kind
from gpushift.kube import Kube, KubeError, ResourceRef
from gpushift_twin.apiserver._crd import kinds_of
from gpushift_twin.apiserver._selectors import LabelSelector
from gpushift_twin.apiserver._status import ApiError
from gpushift_twin.apiserver._store import Page, Propagation, Store
from gpushift_twin.apiserver._watch import Encoded, Event, Watcher

log = logging.getLogger("gpushift_twin.remote")

Key = tuple[str, str]
#: Kinds never informed: written often, read only by the writer (an update reads them fresh).
_NOT_INFORMED = {("", "events"), ("events.k8s.io", "events")}
#: A watch stream the server ends after this long (then it is watched again from where it was).
_WATCH_SECONDS = 240
#: Attempts of a read-modify-write that keeps meeting 409 Conflict.
_CONFLICT_ATTEMPTS = 8
#: Seconds before a kind the server did not serve (404) is listed again.
_ABSENT_RETRY = 3.0


def _decode(raw: bytes) -> Any:
    return orjson.loads(raw)


def _copy(obj: Obj) -> Obj:
    out: Obj = orjson.loads(orjson.dumps(obj))
    return out


def _rv(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def _skey(kind: Kind, obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or "") if kind.namespaced else "", str(meta.get("name")))


def _established(crd: Obj) -> bool:
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


class _Informer:
    """One kind's list and watch into the cache, on a daemon thread."""

    def __init__(self, store: ApiStore, kind: Kind, version: str) -> None:
        self.store = store
        self.kind = kind
        self.version = version
        self.thread = threading.Thread(
            target=self._run, name=f"gpushift-informer-{kind.plural}", daemon=True
        )

    def _run(self) -> None:
        store, kind = self.store, self.kind
        ref = ResourceRef.of(kind)
        while not store.closed.is_set():
            try:
                if not self.version:
                    items, self.version = store.kube.list_at(ref)
                    store.resync(kind, items)
                for type_, obj in store.kube.watch(
                    ref, resource_version=self.version, server_timeout=_WATCH_SECONDS
                ):
                    if store.closed.is_set():
                        return
                    if type_ == "BOOKMARK":
                        continue
                    self.version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                    store.mirror(kind, obj, deleted=type_ == "DELETED")
            except KubeError as err:
                if store.closed.is_set():
                    return
                if err.code == 410:
                    self.version = ""  # expired: list again
                    continue
                log.debug("watch %s: %s", kind.plural, err)
                store.closed.wait(1.0)
            except Exception:  # pragma: no cover - keep the cache alive whatever happens
                log.exception("informer %s failed", kind.plural)
                store.closed.wait(1.0)


class ApiStore(Store):
    """The objects of a real API server behind :class:`Store`'s interface (module docstring).

    ``kube`` is a connected client (``gpushift.kube.connect``); ``field_manager`` names the
    writes that name no manager. :meth:`close` stops the informers.
    """

    remote = True

    def __init__(self, kube: Kube, *, field_manager: str = "gpushift-twin") -> None:
        # No namespaces are made: the server has its own.
        super().__init__(namespaces=())
        self.kube = kube
        self.field_manager = field_manager
        self.http: Any = kube.client._client._client  # lightkube's httpx client: auth, base URL
        self.closed = threading.Event()
        self._informers: dict[Key, _Informer] = {}
        self._absent: dict[Key, float] = {}
        # Objects deleted through this store, by key, with their last resourceVersion: older
        # watch events of them that arrive later must not bring them back.
        self._tombstones: dict[tuple[Key, tuple[str, str]], int] = {}
        self.requests = 0
        self._ensure(by_kind("CustomResourceDefinition"))

    def close(self) -> None:
        """Stop every informer (their threads end at their next event or reconnect)."""
        self.closed.set()

    # --- the cache ---------------------------------------------------------------------------

    def _ensure(self, kind: Kind) -> None:
        key = (kind.group, kind.plural)
        if key in self._informers or key in _NOT_INFORMED:
            return
        absent = self._absent.get(key)
        if absent is not None and time.monotonic() < absent:
            return
        with self._lock:
            if key in self._informers:
                return
            try:
                items, version = self.kube.list_at(ResourceRef.of(kind))
            except KubeError as err:
                if err.code == 404:  # not served (yet): a CRD still to come
                    self._absent[key] = time.monotonic() + _ABSENT_RETRY
                    return
                raise _api_error(err) from None
            self._absent.pop(key, None)
            self.resync(kind, items)
            informer = self._informers[key] = _Informer(self, kind, version)
        informer.thread.start()

    def resync(self, kind: Kind, items: builtins.list[Obj]) -> None:
        """Make the cache of ``kind`` hold exactly ``items`` (a fresh list)."""
        kind = self._storage_kind(kind)
        with self._lock:
            listed = {_skey(kind, o) for o in items}
            table = self._data.setdefault((kind.group, kind.plural), {})
            for skey in [k for k in table if k not in listed]:
                self._drop(kind, table[skey].obj)
            for obj in items:
                self.mirror(kind, obj)

    def _storage_kind(self, kind: Kind) -> Kind:
        try:
            return self.resource(kind).kind
        except ApiError:
            return kind

    def mirror(self, kind: Kind, obj: Obj, *, deleted: bool = False) -> None:
        """Put what the server holds (or, ``deleted``, no longer holds) into the cache."""
        with self._lock:
            key = (kind.group, kind.plural)
            if key not in self._resources:
                self.register(kind)
            table = self._data.setdefault(key, {})
            skey = _skey(kind, obj)
            rv = _rv(obj)
            cached = table.get(skey)
            if cached is not None and _rv(cached.obj) >= rv and not deleted:
                return  # this version, or a newer one, is already here
            stone = self._tombstones.get((key, skey))
            if stone is not None:
                if rv <= stone:
                    return
                del self._tombstones[(key, skey)]
            if deleted:
                if cached is not None and _rv(cached.obj) <= rv:
                    self._drop(kind, cached.obj)
                self._tombstones[(key, skey)] = rv
                return
            obj = {**obj, "apiVersion": kind.api_version, "kind": kind.kind}
            entry = Encoded(obj)
            if cached is None:
                self._sorted.pop(key, None)
            table[skey] = entry
            local = self._next_rv()
            self._changed[key] = local
            old = cached.obj if cached is not None else None
            self._emit(Event("ADDED" if old is None else "MODIFIED", kind, obj, entry, local, old))
            if key == ("apiextensions.k8s.io", "customresourcedefinitions"):
                self._serve_crd(obj)

    def _drop(self, kind: Kind, obj: Obj) -> None:
        key = (kind.group, kind.plural)
        table = self._data.get(key, {})
        if table.pop(_skey(kind, obj), None) is None:
            return
        self._sorted.pop(key, None)
        local = self._next_rv()
        self._changed[key] = local
        self._emit(Event("DELETED", kind, obj, Encoded(obj), local))
        if key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            spec = obj.get("spec") or {}
            group = str(spec.get("group", ""))
            plural = str((spec.get("names") or {}).get("plural", ""))
            self._informers.pop((group, plural), None)
            self.unregister(group=group, plural=plural)

    def _serve_crd(self, crd: Obj) -> None:
        if not _established(crd) or crd["metadata"].get("deletionTimestamp"):
            return
        for kind, storage, fields, scale in sorted(kinds_of(crd), key=lambda d: not d[1]):
            super().register(
                kind,
                storage=storage,
                selectable_fields=fields,
                scale=scale,
                crd=crd["metadata"]["name"],
            )
            self._absent.pop((kind.group, kind.plural), None)

    def unregister(self, *, group: str, plural: str, versions: Iterable[str] | None = None) -> None:
        """Stop serving a resource from the cache (no write reaches the server)."""
        with self._lock:
            res = self._resources.get((group, plural))
            if res is None:
                return
            drop = set(res.kinds) if versions is None else set(versions) & set(res.kinds)
            if drop == set(res.kinds):
                del self._resources[(group, plural)]
                self._data.pop((group, plural), None)
                self._sorted.pop((group, plural), None)
            for version in drop:
                res.kinds.pop(version, None)
                self._by_gvr.pop((group, version, plural), None)

    # --- reads: the cache, once the kind is informed -----------------------------------------

    def _entry(self, kind: Kind, namespace: str | None, name: str) -> Any:
        self._ensure(kind)
        return super()._entry(kind, namespace, name)

    def changed_at(self, kind: Kind) -> int:
        """The local counter of the newest change to ``kind`` seen (see :class:`Store`)."""
        self._ensure(kind)
        return super().changed_at(kind)

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        labels: LabelSelector = (),
        fields: Callable[[Obj], bool] | None = None,
        limit: int = 0,
        continue_token: str = "",
    ) -> Page:
        """Objects of ``kind`` from the cache (see :meth:`Store.list`)."""
        self._ensure(kind)
        return super().list(
            kind,
            namespace=namespace,
            labels=labels,
            fields=fields,
            limit=limit,
            continue_token=continue_token,
        )

    def watch(
        self,
        kind: Kind | None,
        *,
        deliver: Callable[[Event], None],
        namespace: str | None = None,
        labels: LabelSelector = (),
        fields: Callable[[Obj], bool] | None = None,
        resource_version: str | None = None,
    ) -> Watcher:
        """Changes to the cache (see :meth:`Store.watch`); ``kind`` None: every informed kind."""
        if kind is not None:
            self._ensure(kind)
        return super().watch(
            kind,
            deliver=deliver,
            namespace=namespace,
            labels=labels,
            fields=fields,
            resource_version=resource_version,
        )

    def set_clock(self, clock: Callable[[], datetime]) -> int:
        """Only the twin's own timestamps follow ``clock``; the server stamps its objects."""
        self.clock = clock
        return 0

    # --- writes: API calls -------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        self.requests += 1
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        content = None if body is None else orjson.dumps(body)
        try:
            resp = self.http.request(
                method, path, content=content, params=params or {}, headers=headers
            )
        except Exception as err:  # httpx transport errors
            raise ApiError(503, "ServiceUnavailable", f"{method} {path}: {err}") from None
        try:
            answer = resp.json() if resp.content else {}
        except ValueError:
            answer = {}
        if resp.status_code >= 400:
            if not isinstance(answer, dict):
                answer = {}
            details = answer.get("details") if isinstance(answer.get("details"), dict) else None
            raise ApiError(
                resp.status_code,
                str(answer.get("reason") or ""),
                str(answer.get("message") or f"{method} {path}: {resp.status_code}"),
                details=details,
            )
        out: Obj = answer if isinstance(answer, dict) else {}
        return out

    def _params(self, *, manager: str = "", dry_run: bool = False) -> dict[str, str]:
        params = {"fieldManager": manager or self.field_manager}
        if dry_run:
            params["dryRun"] = "All"
        return params

    def _remember(self, kind: Kind, obj: Obj) -> None:
        if (kind.group, kind.plural) in self._informers and obj.get("metadata"):
            self.mirror(self._storage_kind(kind), obj)

    def create(
        self,
        kind: Kind,
        obj: Obj,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        manager: str = "",
        keep_managed_fields: bool = False,
        shared: bool = False,
    ) -> Obj:
        """POST ``obj``; returns what the server stored (see :meth:`Store.create`)."""
        meta = dict(obj.get("metadata") or {})
        meta.pop("resourceVersion", None)
        if not keep_managed_fields:
            meta.pop("managedFields", None)
        ns = (namespace or meta.get("namespace") or "default") if kind.namespaced else None
        body = {**obj, "apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}
        out = self._request(
            "POST",
            kind.path(namespace=ns),
            body=body,
            params=self._params(manager=manager, dry_run=dry_run),
        )
        if not dry_run:
            self._remember(kind, out)
            if (kind.group, kind.plural) == ("apiextensions.k8s.io", "customresourcedefinitions"):
                self._await_established(str(meta.get("name")))
        return out

    def _await_established(self, name: str, timeout: float = 30.0) -> None:
        kind = by_kind("CustomResourceDefinition")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            crd = self._request("GET", kind.path(name=name))
            if _established(crd):
                self.mirror(kind, crd)
                return
            time.sleep(0.05)

    def _current(self, kind: Kind, name: str, namespace: str | None, *, fresh: bool) -> Obj:
        if not fresh and (kind.group, kind.plural) in self._informers:
            with contextlib.suppress(ApiError):
                return _copy(self.peek(kind, name=name, namespace=namespace))
        out = self._request("GET", kind.path(namespace=namespace, name=name))
        self._remember(kind, out)
        return out

    def update(
        self,
        kind: Kind,
        *,
        name: str,
        namespace: str | None = None,
        mutate: Callable[[Obj], Obj],
        subresource: str | None = None,
        dry_run: bool = False,
        manager: str = "",
        operation: str = "Update",
        managed: bool = True,
        shared: bool = False,
    ) -> Obj:
        """Read-modify-write through PUT (see :meth:`Store.update`): ``mutate`` gets a copy of
        the cached object and runs again on a fresh read after a 409 Conflict. A body that
        changes nothing is not sent."""
        ns = namespace if kind.namespaced else None
        fresh = False
        for attempt in range(_CONFLICT_ATTEMPTS):
            cur = self._current(kind, name, ns, fresh=fresh)
            proposed = mutate(_copy(cur))
            if not isinstance(proposed, dict):
                raise ApiError(
                    400, "BadRequest", "the body of the request was in an unknown format"
                )
            if _unchanged(kind, cur, proposed, subresource):
                return cur
            meta = dict(proposed.get("metadata") or {})
            meta.pop("managedFields", None)
            meta.setdefault("resourceVersion", cur["metadata"].get("resourceVersion"))
            body = {**proposed, "apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}
            path = kind.path(namespace=ns, name=name)
            if subresource:
                path += f"/{subresource}"
            try:
                out = self._request(
                    "PUT", path, body=body, params=self._params(manager=manager, dry_run=dry_run)
                )
            except ApiError as err:
                if err.code == 409 and attempt + 1 < _CONFLICT_ATTEMPTS:
                    fresh = True
                    continue
                raise
            if not dry_run:
                self._remember(kind, out)
            return out
        raise AssertionError("unreachable")  # pragma: no cover

    def delete(
        self,
        kind: Kind,
        *,
        name: str,
        namespace: str | None = None,
        propagation: Propagation | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        dry_run: bool = False,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        """DELETE with options (see :meth:`Store.delete`); ``grace_period_seconds`` 0 removes a
        pod at once, as a kubelet does when its containers have stopped."""
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation is not None:
            options["propagationPolicy"] = propagation
        pre = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v is not None
        }
        if pre:
            options["preconditions"] = pre
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        ns = namespace if kind.namespaced else None
        out = self._request("DELETE", kind.path(namespace=ns, name=name), body=options)
        if dry_run:
            return out
        key = (kind.group, kind.plural)
        meta = out.get("metadata") or {}
        if out.get("kind") == kind.kind and meta.get("finalizers"):
            # Still there: a DELETE never removes an object that keeps a finalizer (removing
            # the last one does). The watch may have brought this state first, with the same
            # resourceVersion: that is no sign it is gone.
            self._remember(kind, out)
            return out
        if out.get("kind") == kind.kind and meta.get("deletionTimestamp"):
            # A pod's grace period: the newer state, or gone when the answer is its last state.
            with self._lock:
                cached = self._data.get(key, {}).get(_skey(kind, out))
                if cached is not None and _rv(cached.obj) == _rv(out):
                    self._forget(kind, out)
                else:
                    self._remember(kind, out)
            return out
        if out.get("kind") == kind.kind:
            self._forget(kind, out)
        else:
            self._forget(kind, {"metadata": {"name": name, "namespace": ns}})
        return out

    def _forget(self, kind: Kind, obj: Obj) -> None:
        kind = self._storage_kind(kind)
        with self._lock:
            key = (kind.group, kind.plural)
            cached = self._data.get(key, {}).get(_skey(kind, obj))
            rv = max(_rv(obj), _rv(cached.obj) if cached is not None else 0)
            if cached is not None:
                self._drop(kind, cached.obj)
            self._tombstones[(key, _skey(kind, obj))] = rv

    def apply(self, kind: Kind, obj: Obj, *, manager: str, force: bool = True) -> Obj:
        """Server-side apply ``obj`` as ``manager`` (PATCH ``application/apply-patch+yaml``)."""
        meta = obj.get("metadata") or {}
        ns = (meta.get("namespace") or "default") if kind.namespaced else None
        body = {**obj, "apiVersion": kind.api_version, "kind": kind.kind}
        params = self._params(manager=manager)
        if force:
            params["force"] = "true"
        out = self._request(
            "PATCH",
            kind.path(namespace=ns, name=str(meta.get("name"))),
            body=body,
            params=params,
            content_type="application/apply-patch+yaml",
        )
        self._remember(kind, out)
        if (kind.group, kind.plural) == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._await_established(str(meta.get("name")))
        return out


def _unchanged(kind: Kind, cur: Obj, proposed: Obj, subresource: str | None) -> bool:
    if subresource == "status":
        return bool(proposed.get("status") == cur.get("status"))
    if subresource is not None:
        return False

    def strip(o: Obj) -> Obj:
        meta = {k: v for k, v in (o.get("metadata") or {}).items() if k != "managedFields"}
        out = {k: v for k, v in o.items() if k not in ("metadata", "apiVersion", "kind")}
        if "status" in kind.subresources:
            out.pop("status", None)
        return {**out, "metadata": meta}

    return bool(strip(cur) == strip(proposed))


def _api_error(err: KubeError) -> ApiError:
    return ApiError(err.code or 503, err.reason or "", str(err))
