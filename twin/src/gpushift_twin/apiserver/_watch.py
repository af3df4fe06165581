"""Watch: the change events the store emits, and watchers with the namespace and selectors
that decide what each one sees.

The store keeps the history window and calls each watcher inside its write lock, in
resourceVersion order; a watcher's ``deliver`` must only hand the event on.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver._selectors import LabelSelector, match_labels

Key = tuple[str, str]  # (group, plural)
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


def encode(obj: Any) -> bytes:
    """Compact JSON, as the server sends it."""
    try:
        # orjson writes the same compact UTF-8 JSON several times faster; what it refuses
        # (integers beyond 64 bits, non-string keys) goes through the json module.
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class Encoded:
    """An object that is never changed, and its JSON (:func:`encode`), made when first read.

    Most versions of a busy object are replaced before anything reads their JSON (agents
    read the parsed objects), so the encoding is not paid for on every write.
    """

    __slots__ = ("_raw", "obj")

    def __init__(self, obj: Obj, raw: bytes | None = None) -> None:
        self.obj = obj
        self._raw = raw

    @property
    def raw(self) -> bytes:
        """The compact JSON of ``obj``."""
        raw = self._raw
        if raw is None:
            raw = self._raw = encode(self.obj)
        return raw

    def replace(self, obj: Obj) -> None:
        """Hold ``obj`` instead (its JSON made afresh when read)."""
        self.obj, self._raw = obj, None


@dataclass(frozen=True, slots=True)
class Event:
    """One change: ``obj`` is the stored object after it (before it, for DELETED); ``old`` is
    the object before a MODIFIED change. ``raw`` is ``obj``'s JSON."""

    type: EventType
    kind: Kind
    obj: Obj
    encoded: Encoded
    rv: int
    old: Obj | None = None

    @property
    def raw(self) -> bytes:
        """The JSON of ``obj``, as a watch stream sends it."""
        return self.encoded.raw

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
