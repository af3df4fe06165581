"""Garbage collection by ownerReferences, finalizers and namespace termination.

The store runs it synchronously inside its write lock after each write, so a cascade is
complete when the write returns; k8s.io/kubernetes/pkg/controller/garbagecollector and the
namespace controller do the same work asynchronously.

The collector keeps its own work queues and sees the store only through :class:`Objects`,
the few public store methods it needs; it imports nothing of the store.
"""

from __future__ import annotations

from typing import Protocol

from gpushift.common import Obj

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


class Objects(Protocol):
    """The store as the collector sees it. Every method is called inside a store write."""

    def by_uid(self, uid: str) -> Obj | None:
        """The stored object with this uid (read-only), or None when there is none."""

    def dependents(self, uid: str) -> list[str]:
        """The uids of stored objects that have an ownerReference to ``uid``."""

    def namespace_members(self, namespace: str) -> list[Obj]:
        """Every stored object in ``namespace`` (read-only)."""

    def namespace(self, name: str) -> Obj | None:
        """The stored Namespace ``name`` (read-only), or None."""

    def put(self, old: Obj, new: Obj) -> None:
        """Store ``new`` in place of ``old`` as the system: no admission, a new version."""

    def drop(self, obj: Obj) -> None:
        """Remove the stored object ``obj`` (its last state) and tell watchers."""

    def timestamp(self) -> str:
        """Now, as the store's clock gives it (``metav1.Time``)."""


class Collector:
    """The garbage collector of one store: queues of what to look at, and the fixed point."""

    def __init__(self, objects: Objects) -> None:
        self._objects = objects
        self._orphans: list[str] = []  # uids removed, whose dependents may now be orphaned
        self._owners: list[str] = []  # uids deleting, whose finalizers may now be done
        self._namespaces: list[str] = []  # namespaces that may have emptied
        self._running = False

    def written(self, obj: Obj) -> None:
        """``obj`` was stored; a deleting owner is checked for its finalizers."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            self._owners.append(meta["uid"])

    def removed(self, obj: Obj, *, namespace: str | None) -> None:
        """``obj`` was removed: its dependents, its owners and ``namespace`` are checked."""
        meta = obj["metadata"]
        self._orphans.append(meta["uid"])
        for ref in meta.get("ownerReferences") or []:
            self._owners.append(str(ref.get("uid")))
        if namespace is not None:
            self._namespaces.append(namespace)

    def terminating(self, namespace: str) -> None:
        """The namespace was marked for deletion; it is emptied, then removed."""
        self._namespaces.append(namespace)

    def run(self) -> None:
        """Delete what the last writes orphaned, to a fixed point.

        Dependents whose owners are all gone are deleted (background propagation); owners
        marked ``foregroundDeletion`` go once their dependents are gone; ``orphan`` strips the
        owner reference from dependents; a terminating namespace is emptied, then removed.
        Re-entrant calls (from the collector's own writes) return at once.
        """
        if self._running:
            return
        self._running = True
        try:
            while self._orphans or self._owners or self._namespaces:
                if self._orphans:
                    self._orphaned(self._orphans.pop())
                elif self._owners:
                    self._owner(self._owners.pop())
                else:
                    self._namespace(self._namespaces.pop())
        finally:
            self._running = False

    def _present(self, uids: list[str]) -> list[str]:
        return [u for u in uids if self._objects.by_uid(u) is not None]

    def _orphaned(self, uid: str) -> None:
        for dep_uid in self._objects.dependents(uid):
            dep = self._objects.by_uid(dep_uid)
            if dep is None:
                continue
            owners = [r.get("uid") for r in dep["metadata"].get("ownerReferences") or []]
            if all(not isinstance(o, str) or self._objects.by_uid(o) is None for o in owners):
                self.delete(dep_uid)

    def _owner(self, uid: str) -> None:
        owner = self._objects.by_uid(uid)
        if owner is None:
            return
        ometa = owner["metadata"]
        if not ometa.get("deletionTimestamp"):
            return
        fins = list(ometa.get("finalizers") or [])
        deps = self._present(self._objects.dependents(uid))
        if ORPHAN in fins:
            for dep_uid in deps:
                dobj = self._objects.by_uid(dep_uid)
                if dobj is None:
                    continue
                dmeta = dict(dobj["metadata"])
                refs = [r for r in dmeta.get("ownerReferences") or [] if r.get("uid") != uid]
                if refs:
                    dmeta["ownerReferences"] = refs
                else:
                    dmeta.pop("ownerReferences", None)
                self._objects.put(dobj, {**dobj, "metadata": dmeta})
            fins.remove(ORPHAN)
        elif FOREGROUND in fins:
            if deps:
                for dep_uid in deps:
                    self.delete(dep_uid)
                deps = self._present(self._objects.dependents(uid))
            if not deps:
                fins.remove(FOREGROUND)
        if fins == list(ometa.get("finalizers") or []):
            return
        new_meta = {**ometa, "finalizers": fins}
        if not fins:
            new_meta.pop("finalizers")
            self._objects.drop({**owner, "metadata": new_meta})
        else:
            self._objects.put(owner, {**owner, "metadata": new_meta})

    def _namespace(self, ns: str) -> None:
        nsobj = self._objects.namespace(ns)
        if nsobj is None or not nsobj["metadata"].get("deletionTimestamp"):
            return
        members = self._objects.namespace_members(ns)
        for obj in members:
            if not obj["metadata"].get("deletionTimestamp"):
                self.delete(obj["metadata"]["uid"])
        if not members or not self._objects.namespace_members(ns):
            nsobj = self._objects.namespace(ns)
            if nsobj is not None and not nsobj["metadata"].get("finalizers"):
                self._objects.drop(nsobj)

    def delete(self, uid: str) -> None:
        """Delete one stored object, or mark it deleting while it has finalizers."""
        obj = self._objects.by_uid(uid)
        if obj is None:
            return
        meta = obj["metadata"]
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                new_meta = {
                    **meta,
                    "deletionTimestamp": self._objects.timestamp(),
                    "deletionGracePeriodSeconds": 0,
                }
                self._objects.put(obj, {**obj, "metadata": new_meta})
            return
        self._objects.drop(obj)
