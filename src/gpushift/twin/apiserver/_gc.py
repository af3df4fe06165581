"""Garbage collection by ownerReferences, finalizers and namespace termination.

The store runs it synchronously inside its write lock after each write, so a cascade is
complete when the write returns; k8s.io/kubernetes/pkg/controller/garbagecollector and the
namespace controller do the same work asynchronously.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpushift.twin.apiserver._store import Key, Store

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def collect(store: Store) -> None:
    """Delete what the last writes orphaned, to a fixed point.

    Dependents whose owners are all gone are deleted (background propagation); owners marked
    ``foregroundDeletion`` go once their dependents are gone; ``orphan`` strips the owner
    reference from dependents; a terminating namespace is emptied, then removed.
    """
    if store._collecting:
        return
    store._collecting = True
    try:
        while store._orphans or store._owners_to_check or store._namespaces_to_check:
            if store._orphans:
                uid = store._orphans.pop()
                for dep_uid in list(store._dependents.get(uid, ())):
                    loc = store._by_uid.get(dep_uid)
                    if loc is None:
                        continue
                    dep = store._data[loc[0]][loc[1]].obj
                    owners = [r.get("uid") for r in dep["metadata"].get("ownerReferences") or []]
                    if all(o not in store._by_uid for o in owners):
                        delete_entry(store, loc)
                continue
            if store._owners_to_check:
                uid = store._owners_to_check.pop()
                loc = store._by_uid.get(uid)
                if loc is None:
                    continue
                owner = store._data[loc[0]][loc[1]].obj
                ometa = owner["metadata"]
                if not ometa.get("deletionTimestamp"):
                    continue
                fins = list(ometa.get("finalizers") or [])
                deps = [
                    store._by_uid[d] for d in store._dependents.get(uid, ()) if d in store._by_uid
                ]
                if ORPHAN in fins:
                    for dloc in deps:
                        dobj = store._data[dloc[0]][dloc[1]].obj
                        dmeta = dict(dobj["metadata"])
                        refs = [
                            r for r in dmeta.get("ownerReferences") or [] if r.get("uid") != uid
                        ]
                        if refs:
                            dmeta["ownerReferences"] = refs
                        else:
                            dmeta.pop("ownerReferences", None)
                        store._store(
                            store._kind_of(dloc[0], dobj), dobj, {**dobj, "metadata": dmeta}
                        )
                    fins.remove(ORPHAN)
                elif FOREGROUND in fins:
                    if deps:
                        for dloc in deps:
                            delete_entry(store, dloc)
                        deps = [
                            store._by_uid[d]
                            for d in store._dependents.get(uid, ())
                            if d in store._by_uid
                        ]
                    if not deps:
                        fins.remove(FOREGROUND)
                if fins == list(ometa.get("finalizers") or []):
                    continue
                kind = store._kind_of(loc[0], owner)
                new_meta = {**ometa, "finalizers": fins}
                if not fins:
                    new_meta.pop("finalizers")
                    store._remove(kind, {**owner, "metadata": new_meta})
                else:
                    store._store(kind, owner, {**owner, "metadata": new_meta})
                continue
            ns = store._namespaces_to_check.pop()
            nsloc = (("", "namespaces"), ("", ns))
            entry = store._data[("", "namespaces")].get(nsloc[1])
            if entry is None or not entry.obj["metadata"].get("deletionTimestamp"):
                continue
            left = False
            for key, table in store._data.items():
                if not store._resources[key].kind.namespaced:
                    continue
                for skey in [k for k in table if k[0] == ns]:
                    left = True
                    if not table[skey].obj["metadata"].get("deletionTimestamp"):
                        delete_entry(store, (key, skey))
            if not left or not any(k[0] == ns for t in store._data.values() for k in t):
                nsobj = store._data[("", "namespaces")].get(("", ns))
                if nsobj is not None and not nsobj.obj["metadata"].get("finalizers"):
                    store._remove(store._resources[("", "namespaces")].kind, nsobj.obj)
    finally:
        store._collecting = False


def delete_entry(store: Store, loc: tuple[Key, tuple[str, str]]) -> None:
    """Delete one stored object, or mark it deleting while it has finalizers."""
    entry = store._data[loc[0]].get(loc[1])
    if entry is None:
        return
    obj = entry.obj
    meta = obj["metadata"]
    kind = store._kind_of(loc[0], obj)
    if meta.get("finalizers"):
        if not meta.get("deletionTimestamp"):
            new_meta = {
                **meta,
                "deletionTimestamp": store._now(),
                "deletionGracePeriodSeconds": 0,
            }
            store._store(kind, obj, {**obj, "metadata": new_meta})
        return
    store._remove(kind, obj)
