"""The reconcile mechanics kustomize- and helm-controller share (fluxcd/pkg runtime).

One :class:`Reconciler` per Flux kind: a pass over every object, the finalizer added on
first sight and removed on deletion, ``spec.suspend``, the ``status`` subresource written
under the controller's field manager.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from gpushift.common import Obj, lookup
from gpushift.common import as_dict as d
from gpushift.flux import FINALIZER
from gpushift_twin.apiserver import ApiError, Store
from gpushift_twin.charts import served

log = logging.getLogger("gpushift_twin.flux")


@dataclass(slots=True)
class Reconciler:
    """Base of the per-kind controllers; subclasses set the class constants and implement
    :meth:`_reconcile` and :meth:`_finalize`.

    ``now`` is the controller's clock in seconds, ``stamp`` the same instant as RFC 3339 for
    condition times.
    """

    #: apiVersion and kind of the reconciled objects.
    API_VERSION: ClassVar[str]
    KIND: ClassVar[str]
    #: Field manager of the controller's writes.
    MANAGER: ClassVar[str]

    store: Store
    now: Callable[[], float]
    stamp: Callable[[], str]

    @property
    def kind(self) -> Any:
        return lookup(self.API_VERSION, self.KIND)

    def sync(self) -> float | None:
        """One pass over every object of the kind; returns the next time one is due, or
        ``None`` when none is (or the kind is not served)."""
        kind = self.kind
        if kind is None or not served(self.store, kind):
            return None
        due: float | None = None
        for obj in self.store.list(kind).objects:
            try:
                nxt = self._one(obj)
            except ApiError as err:  # raced a client's write; look again soon
                log.debug("%s %s: %s", self.KIND, obj["metadata"]["name"], err)
                nxt = self.now() + 1.0
            if nxt is not None:
                due = nxt if due is None else min(due, nxt)
        return due

    def _one(self, obj: Obj) -> float | None:
        # The order every Flux reconciler follows: deletion, then the finalizer (its own
        # write, requeued at once), then suspend, then the kind's own reconcile.
        meta = obj["metadata"]
        now = self.now()
        if meta.get("deletionTimestamp"):
            self._finalize(obj)
            return None
        if FINALIZER not in (meta.get("finalizers") or []):
            self._edit_finalizers(obj, lambda fs: [*fs, FINALIZER])
            return now
        if d(obj.get("spec")).get("suspend") is True:
            return None
        return self._reconcile(obj, now=now)

    def _reconcile(self, obj: Obj, *, now: float) -> float | None:
        """Reconcile one live, finalized, unsuspended object at ``now``; returns when it is
        due again (``None``: not until it changes)."""
        raise NotImplementedError

    def _finalize(self, obj: Obj) -> None:
        """Clean up after a deleted object; must call :meth:`_drop_finalizer` so it goes."""
        raise NotImplementedError

    def _drop_finalizer(self, obj: Obj) -> None:
        """Remove the Flux finalizer, if present, so the deletion completes."""
        if FINALIZER in (obj["metadata"].get("finalizers") or []):
            self._edit_finalizers(obj, lambda fs: [f for f in fs if f != FINALIZER])

    def _edit_finalizers(self, obj: Obj, edit: Callable[[list[str]], list[str]]) -> None:
        """Replace the live object's finalizers with ``edit`` of them (read at write time)."""
        meta = obj["metadata"]
        self.store.update(
            self.kind,
            name=meta["name"],
            namespace=meta.get("namespace"),
            mutate=lambda c: {
                **c,
                "metadata": {
                    **c["metadata"],
                    "finalizers": edit(c["metadata"].get("finalizers") or []),
                },
            },
            manager=self.MANAGER,
        )

    def _key(self, obj: Obj) -> str:
        return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"

    def _status(self, obj: Obj, update: Callable[[Obj], None]) -> None:
        """Write the status subresource: ``update`` edits the current status in place."""
        meta = obj["metadata"]

        def put(cur: Obj) -> Obj:
            st = d(cur.get("status"))
            update(st)
            cur["status"] = st
            return cur

        self.store.update(
            self.kind,
            name=meta["name"],
            namespace=meta.get("namespace"),
            mutate=put,
            subresource="status",
            manager=self.MANAGER,
        )
