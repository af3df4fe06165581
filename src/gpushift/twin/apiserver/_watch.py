"""Watch: the change events the store emits, and watchers with the namespace and selectors
that decide what each one sees.

The store keeps the history window and calls each watcher inside its write lock, in
resourceVersion order; a watcher's ``deliver`` must only hand the event on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from gpushift._kinds import Kind
from gpushift._obj import Obj
from gpushift.twin.apiserver._selectors import LabelSelector, match_labels

Key = tuple[str, str]  # (group, plural)
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Event:
    """One change: ``obj`` is the stored object after it (before it, for DELETED); ``old`` is
    the object before a MODIFIED change."""

    type: EventType
    kind: Kind
    obj: Obj
    raw: bytes
    rv: int
    old: Obj | None = None

    @property
    def namespace(self) -> str | None:
        """The object's namespace, or None for cluster-scoped objects."""
        ns = self.obj["metadata"].get("namespace")
        return ns if isinstance(ns, str) else None


@dataclass(slots=True)
class Watcher:
    """A registration for change events; ``cancel()`` ends it."""

    key: Key | None
    namespace: str | None
    labels: LabelSelector
    fields: Callable[[Obj], bool] | None
    deliver: Callable[[Event], None]
    _cancel: Callable[[Watcher], None] | None = field(default=None, repr=False)

    def matches(self, obj: Obj) -> bool:
        """Whether ``obj`` passes this watcher's namespace and selectors."""
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        if self.labels and not match_labels(self.labels, meta.get("labels")):
            return False
        return self.fields is None or self.fields(obj)

    def wants(self, event: Event) -> bool:
        """Whether ``event``'s object passes this watcher's namespace and selectors."""
        return self.matches(event.obj)

    def translate(self, event: Event) -> Event | None:
        """The event as this watcher sees it, or None.

        With selectors, a change that makes an object start matching arrives as ADDED and one
        that makes it stop matching as DELETED (k8s.io/apiserver/pkg/storage/cacher
        ``watchCacheEvent`` filtering).
        """
        now = self.matches(event.obj)
        if event.type != "MODIFIED" or event.old is None:
            return event if now else None
        before = self.matches(event.old)
        if now and before:
            return event
        if now:
            return dataclasses.replace(event, type="ADDED")
        if before:
            return dataclasses.replace(event, type="DELETED")
        return None

    def cancel(self) -> None:
        """Stop receiving events (idempotent)."""
        if self._cancel is not None:
            cancel, self._cancel = self._cancel, None
            cancel(self)
