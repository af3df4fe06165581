"""Writing desired objects into the twin's store as a controller does: server-side apply."""

from __future__ import annotations

from gpushift.common import Kind, Obj, lookup
from gpushift_twin.apiserver import (
    ApiError,
    Store,
    rfc3339,
    server_side_apply,  # the same engine the API's PATCH uses
)


def kind_of(obj: Obj, store: Store | None = None) -> Kind:
    """The kind of ``obj``: from the kind table, else (with ``store``) one a CRD made served.

    Raises ``ApiError`` 404 with the API's "no matches for kind" text when neither knows it.
    """
    api, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    found = lookup(api, kind)
    if found is None and store is not None:
        group, _, version = api.rpartition("/")
        found = next(
            (
                k
                for k in store.kinds()
                if (k.group, k.version, k.kind) == (group, version or api, kind)
            ),
            None,
        )
    if found is None:
        group, _, _version = api.rpartition("/")
        raise ApiError(
            404,
            "NotFound",
            f'no matches for kind "{kind}" in version "{api}"',
            details={"group": group, "kind": kind},
        )
    return found


def served(store: Store, kind: Kind) -> bool:
    """Whether the store serves ``kind`` (a CRD for it is established)."""
    try:
        store.kind_for(kind.group, kind.version, kind.plural)
    except ApiError:
        return False
    return True


def apply(store: Store, obj: Obj, *, manager: str, force: bool = True) -> Obj:
    """Server-side apply ``obj`` as ``manager`` (create when missing); returns the stored object.

    Raises ``ApiError`` as the API would (404 for an unserved kind or a missing namespace,
    409 on a conflict without ``force``, 422 when invalid).
    """
    kind = kind_of(obj, store)
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    namespace = meta.get("namespace") if kind.namespaced else None
    if kind.namespaced and not namespace:
        namespace = "default"
        obj = {**obj, "metadata": {**meta, "namespace": namespace}}
    if store.remote:  # a real API server applies it
        from gpushift_twin.apiserver import ApiStore

        assert isinstance(store, ApiStore)
        return store.apply(kind, obj, manager=manager, force=force)
    now = rfc3339(store.clock())
    with store._lock:
        try:
            store.get_raw(kind, name=name, namespace=namespace)
        except ApiError as err:
            if err.code != 404:
                raise
            merged = server_side_apply(None, obj, manager=manager, force=force, kind=kind, now=now)
            return store.create(
                kind, merged, namespace=namespace, manager=manager, keep_managed_fields=True
            )
        return store.update(
            kind,
            name=name,
            namespace=namespace,
            managed=False,
            mutate=lambda live: server_side_apply(
                live, obj, manager=manager, force=force, kind=kind, now=now
            ),
        )


def delete(store: Store, kind: Kind, *, name: str, namespace: str | None) -> bool:
    """Delete one object (background propagation); False when it was already gone."""
    try:
        store.delete(kind, name=name, namespace=namespace if kind.namespaced else None)
    except ApiError as err:
        if err.code == 404:
            return False
        raise
    return True
