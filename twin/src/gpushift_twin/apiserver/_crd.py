"""CustomResourceDefinitions: serving and retiring custom resources as CRDs come and go.

Mirrors what apiextensions-apiserver does on a CRD write: served versions become resources,
and ``status`` reports ``NamesAccepted`` and ``Established`` with ``acceptedNames``.
"""

from __future__ import annotations

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver._store import ScalePaths, Store, rfc3339
from gpushift_twin.apiserver._watch import Event


def kinds_of(crd: Obj) -> list[tuple[Kind, bool, tuple[str, ...], ScalePaths | None]]:
    """The served kinds a CRD defines: ``(kind, is_storage, selectable_fields, scale)``."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = str(spec.get("group", ""))
    out: list[tuple[Kind, bool, tuple[str, ...], ScalePaths | None]] = []
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        subs = version.get("subresources") or {}
        subresources = tuple(s for s in ("status", "scale") if s in subs)
        scale = None
        if "scale" in subs:
            sc = subs["scale"] or {}
            scale = ScalePaths(
                sc.get("specReplicasPath", ".spec.replicas"),
                sc.get("statusReplicasPath", ".status.replicas"),
                sc.get("labelSelectorPath"),
            )
        fields = tuple(str(f.get("jsonPath", "")) for f in version.get("selectableFields") or [])
        kind = Kind(
            group=group,
            version=str(version.get("name", "")),
            kind=str(names.get("kind", "")),
            plural=str(names.get("plural", "")),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            subresources=subresources,
            builtin=False,
            singular=str(names.get("singular") or str(names.get("kind", "")).lower()),
        )
        out.append((kind, bool(version.get("storage")), fields, scale))
    return out


def _conditions(now: str) -> list[Obj]:
    return [
        {
            "type": "NamesAccepted",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "NoConflicts",
            "message": "no conflicts found",
        },
        {
            "type": "Established",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "InitialNamesAccepted",
            "message": "the initial names have been accepted",
        },
    ]


def install(store: Store) -> None:
    """Make ``store`` serve custom resources for every CRD it holds, now and later."""
    crd_kind = store.kind_for("apiextensions.k8s.io", "v1", "customresourcedefinitions")

    def on_event(event: Event) -> None:
        obj = event.obj
        spec = obj.get("spec") or {}
        group = str(spec.get("group", ""))
        plural = str((spec.get("names") or {}).get("plural", ""))
        if event.type == "DELETED" or obj["metadata"].get("deletionTimestamp"):
            store.unregister(group=group, plural=plural)
            return
        defined = kinds_of(obj)
        served = {k.version for k, *_ in defined}
        current = {k.version for k in store.kinds() if (k.group, k.plural) == (group, plural)}
        if current - served:
            store.unregister(group=group, plural=plural, versions=current - served)
        for kind, storage, fields, scale in sorted(defined, key=lambda d: not d[1]):
            store.register(
                kind,
                storage=storage,
                selectable_fields=fields,
                scale=scale,
                crd=obj["metadata"]["name"],
            )
        status = obj.get("status") or {}
        names = spec.get("names") or {}
        if status.get("acceptedNames") == names and status.get("conditions"):
            return
        now = rfc3339(store.clock())
        store.update(
            crd_kind,
            name=obj["metadata"]["name"],
            subresource="status",
            mutate=lambda o: {
                **o,
                "status": {
                    "conditions": _conditions(now),
                    "acceptedNames": names,
                    "storedVersions": [k.version for k, storage, *_ in defined if storage],
                },
            },
            manager="apiextensions-apiserver",
        )

    store.watch(crd_kind, deliver=on_event)
