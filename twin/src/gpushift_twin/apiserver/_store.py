"""The twin's object store: every object, one global resourceVersion counter, watch fan-out.

The store is the cluster's state; the HTTP layer (``_server``) and in-process controllers both
go through it. It is thread-safe: writes take one lock, and watchers are called inside it, in
resourceVersion order, so they must only hand the event on (e.g. to an event loop's queue).

Objects are held as parsed dicts that are never mutated once stored, next to their JSON
encoding, which the server sends as-is. Readers get fresh copies.
"""

from __future__ import annotations

import base64
import builtins
import json
import math
import random
import threading
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from gpushift.common import Kind, Obj, builtin_kinds
from gpushift_twin.apiserver import _apply, _gc, _validation
from gpushift_twin.apiserver._names import name_errors
from gpushift_twin.apiserver._quantities import canonicalize
from gpushift_twin.apiserver._selectors import LabelSelector, match_labels
from gpushift_twin.apiserver._status import (
    MODIFIED,
    ApiError,
    StatusDetails,
    already_exists,
    bad_request,
    conflict,
    gone,
    invalid,
    not_found,
)
from gpushift_twin.apiserver._watch import Encoded, Event, Watcher, encode

Key = tuple[str, str]  # (group, plural)
Propagation = Literal["Background", "Foreground", "Orphan"]

# k8s.io/apiserver/pkg/storage/names: generateName suffix alphabet and length.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_NO_GENERATION = {
    "",
    "coordination.k8s.io",
    "rbac.authorization.k8s.io",
    "events.k8s.io",
    "node.k8s.io",
    "scheduling.k8s.io",
}
FOREGROUND = _gc.FOREGROUND
ORPHAN = _gc.ORPHAN
_UNDELETABLE = ("default", "kube-system", "kube-public")
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def decode(raw: bytes) -> Any:
    """A fresh object from JSON (the store's copies of what it holds)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:  # integers beyond 64 bits
        return json.loads(raw)


def uuid4_text(n: int) -> str:
    """``str(uuid.UUID(int=n, version=4))`` without building the UUID (every create makes
    one): the version and variant bits set, formatted 8-4-4-4-12."""
    n = (n & ~(0xC000 << 48) | 0x8000 << 48) & ~(0xF000 << 64) | 4 << 76
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def utcnow() -> datetime:
    """The wall clock in UTC (the default clock of a store)."""
    return datetime.now(UTC)


def rfc3339(when: datetime) -> str:
    """``metav1.Time`` format: seconds precision, ``Z``."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """Where a kind keeps what its ``scale`` subresource reads and writes.

    Mirrors a CRD's ``subresources.scale`` paths.
    """

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = None


@dataclass(slots=True)
class Resource:
    """A served resource (all versions of one group and plural) and how the store treats it."""

    kinds: dict[str, Kind]  # by version
    storage_version: str
    selectable_fields: tuple[str, ...] = ()
    scale: ScalePaths | None = None
    crd: str | None = None  # name of the defining CustomResourceDefinition

    @property
    def kind(self) -> Kind:
        """The storage-version kind."""
        return self.kinds[self.storage_version]


_Entry = Encoded


@dataclass(frozen=True, slots=True)
class Page:
    """A list result: the ``objects`` (shared, read-only), their JSON (``raw``, made when
    read), the list's resourceVersion and continuation."""

    encoded: list[Encoded]
    objects: list[Obj]
    resource_version: int
    continue_token: str
    remaining: int | None

    @property
    def raw(self) -> list[bytes]:
        """The items' JSON, in order."""
        return [e.raw for e in self.encoded]


def _split_path(path: str) -> list[str]:
    return [p for p in path.lstrip(".").split(".") if p]


def get_path(obj: Obj, path: str) -> Any:
    """The value at a ``.a.b`` path, or None."""
    cur: Any = obj
    for key in _split_path(path):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def set_path(obj: Obj, path: str, value: Any) -> Obj:
    """A copy of ``obj`` with ``value`` at a ``.a.b`` path (copying only the dicts on the way)."""
    keys = _split_path(path)
    out = dict(obj)
    cur = out
    for key in keys[:-1]:
        nxt = cur.get(key)
        nxt = dict(nxt) if isinstance(nxt, dict) else {}
        cur[key] = nxt
        cur = nxt
    cur[keys[-1]] = value
    return out


#: The classes kube-apiserver creates at start (pkg/apis/scheduling/types.go).
_SYSTEM_PRIORITY = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


def _forbidden_pod(name: str, why: str) -> ApiError:
    # admission.NewForbidden: `pods "x" is forbidden: <why>`.
    details: StatusDetails = {"name": name, "kind": "pods"}
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {why}', details=details)


def _qos_class(spec: Obj) -> str:
    # k8s.io/kubernetes/pkg/apis/core/helper/qos.GetPodQOS, for cpu and memory.
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    requested = False
    guaranteed = bool(containers)
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for name in ("cpu", "memory"):
            if name in req or name in lim:
                requested = True
            if name not in lim or (name in req and str(req[name]) != str(lim[name])):
                guaranteed = False
    if not requested:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _spec_part(obj: Obj, with_status: bool = False) -> Obj:
    skip = (
        ("metadata", "apiVersion", "kind")
        if with_status
        else ("metadata", "status", "apiVersion", "kind")
    )
    return {k: v for k, v in obj.items() if k not in skip}


class Store:
    """In-memory API objects with Kubernetes write semantics.

    Every public method is keyword-only after the kind and raises :class:`ApiError` with the
    status code and message kube-apiserver would answer with.
    """

    #: Whether the objects live on a real API server (``ApiStore``) rather than here.
    remote = False

    def __init__(
        self,
        *,
        kinds: Iterable[Kind] | None = None,
        window: int = 10_000,
        clock: Callable[[], datetime] = utcnow,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        seed: int | None = None,
    ) -> None:
        self._lock = threading.RLock()
        self._rv = 1
        self._gc = _gc.Collector(self)
        self.clock = clock
        self._random = random.Random(seed)
        self._resources: dict[Key, Resource] = {}
        self._by_gvr: dict[tuple[str, str, str], Kind] = {}
        self._data: dict[Key, dict[tuple[str, str], _Entry]] = {}
        # Each table's keys in list order, kept until a key is added or removed: agents list
        # large tables many times between such changes.
        self._sorted: dict[Key, builtins.list[tuple[str, str]]] = {}
        self._changed: dict[Key, int] = {}
        self._stamp: tuple[float, str] = (math.nan, "")
        self._history: deque[Event] = deque(maxlen=window)
        self._expired_upto = 0  # the newest resourceVersion that fell out of the history window
        self._watchers: dict[Key | None, list[Watcher]] = {}
        self._by_uid: dict[str, tuple[Key, tuple[str, str]]] = {}
        self._dependents: dict[str, set[str]] = {}
        for kind in builtin_kinds() if kinds is None else kinds:
            self.register(kind)
        for ns in namespaces:
            self.create(self.kind_for("", "v1", "namespaces"), {"metadata": {"name": ns}})

    # --- resources ---------------------------------------------------------------------------

    def register(
        self,
        kind: Kind,
        *,
        storage: bool = True,
        selectable_fields: tuple[str, ...] = (),
        scale: ScalePaths | None = None,
        crd: str | None = None,
    ) -> None:
        """Serve ``kind`` (idempotent); the first version registered, or ``storage``, stores."""
        with self._lock:
            key = (kind.group, kind.plural)
            res = self._resources.get(key)
            if res is None:
                if scale is None and "scale" in kind.subresources:
                    scale = ScalePaths(label_selector=".status.selector")
                res = Resource({}, kind.version, selectable_fields, scale, crd)
                self._resources[key] = res
                self._data.setdefault(key, {})
            elif storage and crd is not None:
                res.storage_version = kind.version
                res.selectable_fields = selectable_fields
                res.scale = scale
            res.kinds[kind.version] = kind
            self._by_gvr[(kind.group, kind.version, kind.plural)] = kind

    def unregister(self, *, group: str, plural: str, versions: Iterable[str] | None = None) -> None:
        """Stop serving versions of a resource; with no version left, its objects are dropped."""
        with self._lock:
            res = self._resources.get((group, plural))
            if res is None:
                return
            drop = set(res.kinds) if versions is None else set(versions) & set(res.kinds)
            if drop == set(res.kinds):
                kind = res.kind
                for entry in builtins.list(self._data.get((group, plural), {}).values()):
                    self._remove(kind, entry.obj)
                self._gc.run()
                del self._resources[(group, plural)]
                self._data.pop((group, plural), None)
                self._sorted.pop((group, plural), None)
            for version in drop:
                res.kinds.pop(version, None)
                self._by_gvr.pop((group, version, plural), None)
            if res.kinds and res.storage_version not in res.kinds:
                res.storage_version = next(iter(res.kinds))

    def kinds(self) -> list[Kind]:
        """Every served kind, all versions."""
        with self._lock:
            return list(self._by_gvr.values())

    def kind_for(self, group: str, version: str, plural: str) -> Kind:
        """The kind served at that group, version and plural.

        Raises:
            ApiError: 404 NotFound when it is not served.
        """
        kind = self._by_gvr.get((group, version, plural))
        if kind is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return kind

    def resource(self, kind: Kind) -> Resource:
        """How the store treats ``kind`` (selectable fields, scale paths, storage version)."""
        res = self._resources.get((kind.group, kind.plural))
        if res is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return res

    @property
    def resource_version(self) -> int:
        """The newest resourceVersion issued."""
        return self._rv

    def changed_at(self, kind: Kind) -> int:
        """The resourceVersion of the newest change to objects of ``kind`` (0 for none yet):
        a reader holding a list taken at or after it holds the current objects."""
        return self._changed.get((kind.group, kind.plural), 0)

    # --- reads -------------------------------------------------------------------------------

    def _entry(self, kind: Kind, namespace: str | None, name: str) -> _Entry:
        table = self._data.get((kind.group, kind.plural))
        entry = (
            None
            if table is None
            else table.get((namespace or "", name) if kind.namespaced else ("", name))
        )
        if entry is None:
            raise not_found(kind, name)
        return entry

    def get_raw(self, kind: Kind, *, name: str, namespace: str | None = None) -> bytes:
        """The stored JSON of one object (the object as a GET returns it).

        Raises:
            ApiError: 404 NotFound.
        """
        entry = self._entry(kind, namespace, name)
        if kind.version != self.resource(kind).storage_version:
            return encode(self._as_version(entry.obj, kind))
        return entry.raw

    def get(self, kind: Kind, *, name: str, namespace: str | None = None) -> Obj:
        """A copy of one object.

        Raises:
            ApiError: 404 NotFound.
        """
        out: Obj = decode(self.get_raw(kind, name=name, namespace=namespace))
        return out

    def peek(self, kind: Kind, *, name: str, namespace: str | None = None) -> Obj:
        """The stored object itself, at its storage version: shared and read-only, never
        mutate it. For the agents' reads of objects they only look at (a source's revision,
        a dependency's Ready), where :meth:`get`'s copy is most of the cost.

        Raises:
            ApiError: 404 NotFound.
        """
        out: Obj = self._entry(kind, namespace, name).obj
        return out

    def _as_version(self, obj: Obj, kind: Kind) -> Obj:
        if obj.get("apiVersion") == kind.api_version:
            return obj
        return {**obj, "apiVersion": kind.api_version}

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
        """Objects of ``kind``, sorted by namespace and name, filtered and paginated.

        Raises:
            ApiError: 400 for a malformed continue token.
        """
        start = ("", "")
        if continue_token:
            try:
                state = json.loads(
                    base64.urlsafe_b64decode(continue_token + "=" * (-len(continue_token) % 4))
                )
                start = (str(state["start"][0]), str(state["start"][1]))
            except (ValueError, KeyError, TypeError, IndexError) as err:
                raise bad_request(
                    "continue key is not valid: incorrect encoded start resourceVersion "
                    "(version meta.k8s.io/v1)"
                ) from err
        with self._lock:
            rv = self._rv
            table = self._data.get((kind.group, kind.plural), {})
            keys = self._keys((kind.group, kind.plural), table)
            if namespace is not None and kind.namespaced and not continue_token:
                keys = keys[bisect_left(keys, (namespace, "")) :]
            convert = kind.version != self.resource(kind).storage_version
            raws: builtins.list[Encoded] = []
            objs: builtins.list[Obj] = []
            last: tuple[str, str] | None = None
            remaining = 0
            for key in keys:
                if continue_token and key <= start:
                    continue
                if namespace is not None and kind.namespaced and key[0] != namespace:
                    if key[0] > namespace:
                        break
                    continue
                entry = table[key]
                meta = entry.obj["metadata"]
                if labels and not match_labels(labels, meta.get("labels")):
                    continue
                if fields is not None and not fields(entry.obj):
                    continue
                if limit and len(raws) >= limit:
                    remaining += 1
                    continue
                obj = self._as_version(entry.obj, kind) if convert else entry.obj
                raws.append(Encoded(obj) if convert else entry)
                objs.append(obj)
                last = key
        token = ""
        if remaining and last is not None:
            token = (
                base64.urlsafe_b64encode(
                    encode({"v": "meta.k8s.io/v1", "rv": rv, "start": list(last)})
                )
                .decode()
                .rstrip("=")
            )
        return Page(raws, objs, rv, token, remaining if remaining else None)

    def _keys(
        self, key: Key, table: dict[tuple[str, str], _Entry]
    ) -> builtins.list[tuple[str, str]]:
        keys = self._sorted.get(key)
        if keys is None or len(keys) != len(table):
            keys = self._sorted[key] = sorted(table)
        return keys

    def objects(self, kind: Kind, *, namespace: str | None = None) -> builtins.list[Obj]:
        """Copies of all objects of ``kind`` (in ``namespace`` when given)."""
        page = self.list(kind, namespace=namespace)
        return [decode(raw) for raw in page.raw]

    def dump(self) -> builtins.list[Obj]:
        """Copies of every stored object, in a stable order (namespaces first)."""
        with self._lock:
            out: builtins.list[Obj] = []
            keys = sorted(self._data, key=lambda k: (k != ("", "namespaces"), k))
            for key in keys:
                table = self._data[key]
                out.extend(decode(table[k].raw) for k in sorted(table))
            return out

    def set_clock(self, clock: Callable[[], datetime]) -> int:
        """Stamp objects by ``clock`` from now on; returns how many objects were re-dated.

        An object created on the earlier clock later than ``clock``'s now (the built-in
        namespaces, stamped at wall time before a cluster's clock that starts in the past
        took over, or a restored state) gets ``creationTimestamp`` = that now: no age reads
        negative. Meant for before anything watches, so no event is sent.
        """
        with self._lock:
            self.clock = clock
            now = self._now()
            count = 0
            for table in self._data.values():
                for entry in table.values():
                    meta = entry.obj["metadata"]
                    stamp = meta.get("creationTimestamp")
                    # RFC 3339 in UTC with whole seconds: text order is time order.
                    if isinstance(stamp, str) and stamp > now:
                        # A new dict: stored objects are shared with readers, never mutated.
                        entry.replace({**entry.obj, "metadata": {**meta, "creationTimestamp": now}})
                        count += 1
            return count

    # --- writes ------------------------------------------------------------------------------

    def _now(self) -> str:
        # Timestamps have whole seconds: format each second once (every create stamps one).
        now = self.clock()
        second = math.floor(now.timestamp())
        if second != self._stamp[0]:
            self._stamp = (second, rfc3339(now))
        return self._stamp[1]

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _uid(self) -> str:
        return uuid4_text(self._random.getrandbits(128))

    def _generate_name(self, prefix: str) -> str:
        return prefix + "".join(self._random.choice(_NAME_ALPHABET) for _ in range(5))

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
        """Store a new object; returns it as stored (with uid, resourceVersion, …).

        ``keep_managed_fields`` keeps the body's managedFields (server-side apply computed
        them) instead of recording an Update by ``manager``. ``shared`` returns the stored
        object itself rather than a copy: read-only, never to be mutated (in-process agents
        that write thousands of objects a pass and only read what comes back).

        Raises:
            ApiError: 409 AlreadyExists, 404 when the namespace is missing, 422 Invalid,
                400 when the body's namespace differs from ``namespace``.
        """
        with self._lock:
            new = self._prepare_create(
                kind, obj, namespace=namespace, manager="" if keep_managed_fields else manager
            )
            if keep_managed_fields and (obj.get("metadata") or {}).get("managedFields"):
                new["metadata"]["managedFields"] = obj["metadata"]["managedFields"]
            if dry_run:
                new["metadata"].pop("resourceVersion", None)
                return new
            return self._store(kind, None, new, shared=shared)

    def _prepare_create(self, kind: Kind, obj: Obj, *, namespace: str | None, manager: str) -> Obj:
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata", {}), dict):
            raise bad_request("the body of the request was in an unknown format")
        meta: Obj = dict(obj.get("metadata") or {})
        body_ns = meta.get("namespace")
        if kind.namespaced:
            if namespace and body_ns and body_ns != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            ns = namespace or body_ns or ""
            if not ns:
                raise invalid(
                    kind, meta.get("name", ""), [("metadata.namespace", "Required value", "")]
                )
            meta["namespace"] = ns
            nskind = self._by_gvr[("", "v1", "namespaces")]
            if ("", ns) not in self._data[("", "namespaces")]:
                raise not_found(nskind, ns)
            nsobj = self._data[("", "namespaces")][("", ns)].obj
            if nsobj["metadata"].get("deletionTimestamp"):
                raise ApiError(
                    403,
                    "Forbidden",
                    f'{kind.plural} "{meta.get("name", "")}" is forbidden: unable to create new '
                    f"content in namespace {ns} because it is being terminated",
                )
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise ApiError(
                500, "InternalError", "resourceVersion should not be set on objects to be created"
            )
        name = meta.get("name") or ""
        if not name:
            if meta.get("generateName"):
                # KEP-4420 RetryGenerateName (GA in 1.32): a generated name that is taken is
                # generated again, up to 8 attempts in all, before the create fails.
                table = self._data[(kind.group, kind.plural)]
                scope = (meta.get("namespace") or "") if kind.namespaced else ""
                for _ in range(8):
                    name = self._generate_name(str(meta["generateName"]))
                    if (scope, name) not in table:
                        break
                meta["name"] = name
            else:
                raise invalid(
                    kind,
                    "",
                    [("metadata.name", "Required value", "name or generateName is required")],
                )
        if kind.namespaced and kind.group == "resource.k8s.io":
            _validation.check_admin_access(
                kind, {**obj, "metadata": meta}, self._data[("", "namespaces")][("", ns)].obj
            )
        problems = name_errors(kind.group, kind.kind, str(name))
        if problems:
            value = f'Invalid value: "{name}"'
            raise invalid(kind, str(name), [("metadata.name", value, p) for p in problems])
        _validation.check_size(kind, {**obj, "metadata": meta})
        key = ((meta.get("namespace") or ""), name)
        if key in self._data[(kind.group, kind.plural)]:
            raise already_exists(kind, name)
        now = self._now()
        meta["uid"] = self._uid()
        meta["creationTimestamp"] = now
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        meta.pop("managedFields", None)
        if kind.group not in _NO_GENERATION or kind.plural == "pods":
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        new: Obj = {"apiVersion": kind.api_version, "kind": kind.kind, **obj, "metadata": meta}
        new["apiVersion"], new["kind"] = kind.api_version, kind.kind
        if kind.group == "" and kind.plural == "namespaces":
            # pkg/registry/core/namespace/strategy.go PrepareForCreate
            spec = dict(new.get("spec") or {})
            finalizers = [f for f in spec.get("finalizers") or [] if f != "kubernetes"]
            spec["finalizers"] = [*finalizers, "kubernetes"]
            new["spec"] = spec
            new["status"] = {"phase": "Active"}
        if "status" in kind.subresources and kind.plural not in ("namespaces", "nodes"):
            # Strategies' PrepareForCreate reset status; it is written through /status.
            new.pop("status", None)
            if kind.group == "" and kind.plural == "pods":
                new["spec"] = self._admit_priority(dict(new.get("spec") or {}), name)
                new["status"] = {"phase": "Pending", "qosClass": _qos_class(new.get("spec") or {})}
                if (new.get("spec") or {}).get("schedulingGates"):
                    # pkg/registry/core/pod/strategy.go applySchedulingGatedCondition.
                    new["status"]["conditions"] = [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "lastProbeTime": None,
                            "lastTransitionTime": now,
                            "reason": "SchedulingGated",
                            "message": "Scheduling is blocked due to non-empty scheduling gates",
                        }
                    ]
        if manager:
            new = _apply.update_managed_fields(
                None, new, manager=manager, operation="Update", now=now
            )
        return new

    def _admit_priority(self, spec: Obj, name: str) -> Obj:
        """The Priority admission plugin: ``spec.priority`` and ``spec.preemptionPolicy`` from
        the pod's PriorityClass, else the highest ``globalDefault`` class, else 0.

        Raises:
            ApiError: 403 for a PriorityClass that does not exist, or a priority or policy
                the pod gives that differs from its class's.
        """
        # kubernetes plugin/pkg/admission/priority/admission.go (admitPod).
        table = self._data.get(("scheduling.k8s.io", "priorityclasses"), {})
        classes = {k[1]: e.obj for k, e in table.items()}
        policy = "PreemptLowerPriority"
        wanted = spec.get("priorityClassName")
        if not wanted:
            defaults = [c for c in classes.values() if c.get("globalDefault") is True]
            if defaults:
                best = max(defaults, key=lambda c: int(c.get("value") or 0))
                spec["priorityClassName"] = best["metadata"]["name"]
                value = int(best.get("value") or 0)
                policy = best.get("preemptionPolicy") or "PreemptLowerPriority"
            else:
                value = 0
        elif wanted in classes:
            value = int(classes[wanted].get("value") or 0)
            # The class's own default (pkg/apis/scheduling/v1 defaults.go).
            policy = classes[wanted].get("preemptionPolicy") or "PreemptLowerPriority"
        elif wanted in _SYSTEM_PRIORITY:
            value = _SYSTEM_PRIORITY[str(wanted)]
        else:
            raise _forbidden_pod(name, f"no PriorityClass with name {wanted} was found")
        given = spec.get("priority")
        if given is not None and given != value:
            raise _forbidden_pod(
                name,
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass "
                "name",
            )
        spec["priority"] = value
        had = spec.get("preemptionPolicy")
        if had is not None and had != policy:
            raise _forbidden_pod(
                name,
                f"the string value of PreemptionPolicy ({had}) must not be provided in pod "
                f"spec; priority admission controller computed {policy} from the given "
                "PriorityClass name",
            )
        spec["preemptionPolicy"] = policy
        return spec

    def restore(self, kind: Kind, obj: Obj) -> Obj:
        """Insert a saved object keeping its identity (uid, creationTimestamp, generation,
        managedFields); it gets a fresh resourceVersion. An existing object of that name
        is replaced.

        Raises:
            ApiError: 404 when its namespace is missing, 422 when it has no name.
        """
        with self._lock:
            meta = obj.get("metadata") if isinstance(obj, dict) else None
            if not isinstance(meta, dict) or not meta.get("name"):
                raise invalid(kind, "", [("metadata.name", "Required value", "name is required")])
            ns = meta.get("namespace") or ""
            if kind.namespaced and ns not in {k[1] for k in self._data[("", "namespaces")]}:
                raise not_found(self._by_gvr[("", "v1", "namespaces")], ns or '""')
            meta = dict(meta)
            meta.setdefault("uid", self._uid())
            meta.setdefault("creationTimestamp", self._now())
            if not kind.namespaced:
                meta.pop("namespace", None)
            new = {**obj, "apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}
            existing = self._data[(kind.group, kind.plural)].get(
                (ns if kind.namespaced else "", meta["name"])
            )
            if existing is not None:
                self._by_uid.pop(existing.obj["metadata"]["uid"], None)
                self._index_owners(existing.obj["metadata"]["uid"], existing.obj, None)
                self._by_uid[meta["uid"]] = (
                    (kind.group, kind.plural),
                    (ns if kind.namespaced else "", meta["name"]),
                )
            return self._store(kind, existing.obj if existing else None, new)

    def _store(self, kind: Kind, old: Obj | None, new: Obj, *, shared: bool = False) -> Obj:
        """Write ``new`` (already validated) with a fresh resourceVersion and notify; returns
        a copy of what was stored (with ``shared``, the stored object itself)."""
        rv = self._next_rv()
        meta = dict(new["metadata"])
        meta["resourceVersion"] = str(rv)
        # Kept at the storage version, as etcd keeps a custom resource written at another
        # served one (the None conversion: only apiVersion changes); reads convert back.
        stored = self.resource(kind).kind.api_version
        new = canonicalize(
            kind.group, kind.plural, {**new, "apiVersion": stored, "metadata": meta}, like=old
        )
        key = (kind.group, kind.plural)
        skey = (meta.get("namespace") or "", meta["name"])
        entry = Encoded(new)  # encoded when first read
        table = self._data[key]
        if skey not in table:
            self._sorted.pop(key, None)
        table[skey] = entry
        self._changed[key] = rv
        uid = meta["uid"]
        if old is None:
            self._by_uid[uid] = (key, skey)
        self._index_owners(uid, old, new)
        self._emit(Event("ADDED" if old is None else "MODIFIED", kind, new, entry, rv, old))
        self._collect(kind, new)
        if shared:
            return new
        out: Obj = decode(entry.raw)
        return out if stored == kind.api_version else {**out, "apiVersion": kind.api_version}

    def _index_owners(self, uid: str, old: Obj | None, new: Obj | None) -> None:
        if old is not None and new is not None:
            refs = old["metadata"].get("ownerReferences")
            if refs is new["metadata"].get("ownerReferences"):
                return  # the same list (a shared write) or neither has any
        before = {
            r.get("uid") for r in ((old or {}).get("metadata", {}).get("ownerReferences") or [])
        }
        after = {
            r.get("uid") for r in ((new or {}).get("metadata", {}).get("ownerReferences") or [])
        }
        for owner in before - after:
            deps = self._dependents.get(str(owner))
            if deps is not None:
                deps.discard(uid)
                if not deps:
                    del self._dependents[str(owner)]
        for owner in after - before:
            self._dependents.setdefault(str(owner), set()).add(uid)

    def _remove(self, kind: Kind, obj: Obj) -> Obj:
        rv = self._next_rv()
        meta = dict(obj["metadata"])
        meta["resourceVersion"] = str(rv)
        gone_obj = {**obj, "metadata": meta}
        key = (kind.group, kind.plural)
        table = self._data.get(key, {})
        if table.pop((meta.get("namespace") or "", meta["name"]), None) is not None:
            self._sorted.pop(key, None)
        self._changed[key] = rv
        self._by_uid.pop(meta["uid"], None)
        self._index_owners(meta["uid"], obj, None)
        self._emit(Event("DELETED", kind, gone_obj, Encoded(gone_obj), rv))
        is_namespace = kind.group == "" and kind.plural == "namespaces"
        namespace = (meta.get("namespace") or "") if kind.namespaced and not is_namespace else None
        self._gc.removed(gone_obj, namespace=namespace)
        return gone_obj

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
        """Read-modify-write one object atomically: ``mutate`` gets a copy and returns the new body.

        A ``metadata.resourceVersion`` in the returned body must match the stored one (409
        Conflict otherwise). Identity fields are kept; generation follows spec changes; the
        ``status`` subresource writes only status, the main resource everything else.

        ``shared`` spares both copies: ``mutate`` gets the stored object itself and must build
        the new body without changing it (new dicts on the way to what changes, the rest
        shared), and the result is the stored object, read-only. Comparing and re-encoding
        then skip the parts left shared.

        Raises:
            ApiError: 404 NotFound, 409 Conflict, 400 on a name mismatch, or what ``mutate`` raises.
        """
        with self._lock:
            entry = self._entry(kind, namespace, name)
            old = entry.obj
            proposed = mutate(old if shared else decode(entry.raw))
            return self._update(
                kind,
                old,
                proposed,
                subresource=subresource,
                dry_run=dry_run,
                manager=manager,
                operation=operation,
                managed=managed,
                shared=shared,
            )

    def replace(
        self,
        kind: Kind,
        obj: Obj,
        *,
        name: str,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        manager: str = "",
    ) -> Obj:
        """PUT: replace an object with ``obj`` (see :meth:`update` for the rules)."""
        if not isinstance(obj, dict):
            raise bad_request("the body of the request was in an unknown format")
        body_name = (obj.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        body_ns = (obj.get("metadata") or {}).get("namespace")
        if kind.namespaced and body_ns and namespace and body_ns != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
        return self.update(
            kind,
            name=name,
            namespace=namespace,
            mutate=lambda _old: obj,
            subresource=subresource,
            dry_run=dry_run,
            manager=manager,
        )

    def _update(
        self,
        kind: Kind,
        old: Obj,
        proposed: Obj,
        *,
        subresource: str | None,
        dry_run: bool,
        manager: str,
        operation: str,
        managed: bool,
        shared: bool = False,
    ) -> Obj:
        old_meta = old["metadata"]
        name = old_meta["name"]
        if not isinstance(proposed, dict) or not isinstance(proposed.get("metadata", {}), dict):
            raise bad_request("the body of the request was in an unknown format")
        pmeta: Obj = dict(proposed.get("metadata") or {})
        want_rv = pmeta.get("resourceVersion")
        if want_rv and str(want_rv) != old_meta["resourceVersion"]:
            raise conflict(kind, name, MODIFIED)
        if pmeta.get("uid") and pmeta["uid"] != old_meta["uid"]:
            raise conflict(
                kind,
                name,
                f"Precondition failed: UID in precondition: {pmeta['uid']}, "
                f"UID in object meta: {old_meta['uid']}",
            )
        if subresource == "status":
            new: Obj = (
                {**old, "status": proposed.get("status")} if "status" in proposed else dict(old)
            )
            if new.get("status") is None:
                new.pop("status", None)
            meta = dict(old_meta)
        else:
            new = {k: v for k, v in proposed.items() if k != "metadata"}
            if "status" in kind.subresources:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            meta = pmeta
            for keep in (
                "name",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if keep in old_meta:
                    meta[keep] = old_meta[keep]
                else:
                    meta.pop(keep, None)
            if kind.namespaced:
                meta["namespace"] = old_meta["namespace"]
            else:
                meta.pop("namespace", None)
            if old_meta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                if added:
                    raise invalid(
                        kind,
                        name,
                        [
                            (
                                "metadata.finalizers",
                                "Forbidden",
                                "no new finalizers can be added if the object is being deleted, "
                                "found new finalizers " + json.dumps(sorted(added)),
                            )
                        ],
                    )
            if "managedFields" not in meta and "managedFields" in old_meta:
                meta["managedFields"] = old_meta["managedFields"]
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        meta["resourceVersion"] = old_meta["resourceVersion"]
        new["metadata"] = meta
        if subresource is None:
            _validation.check_update(kind, old, new)
            _validation.check_size(kind, new)
        # Without a status subresource, status is part of what generation counts.
        with_status = "status" not in kind.subresources
        if "generation" in old_meta and _spec_part(new, with_status) != _spec_part(
            old, with_status
        ):
            meta["generation"] = int(old_meta["generation"]) + 1
        if managed and manager:
            new = _apply.update_managed_fields(
                old,
                new,
                manager=manager,
                operation=operation,
                now=self._now(),
                subresource=subresource,
            )
        # Managed fields a request sets are stored even when nothing else changes, as
        # fieldmanager.FieldManager.Update takes them (kubectl's csaupgrade patches only them).
        rewritten = (
            subresource is None
            and "managedFields" in pmeta
            and new["metadata"].get("managedFields") != old_meta.get("managedFields")
        )
        if not rewritten and self._same(old, new):
            if shared:
                return old
            current: Obj = decode(
                self._data[(kind.group, kind.plural)][(old_meta.get("namespace") or "", name)].raw
            )
            return current
        if dry_run:
            return new
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            gone_obj = self._remove(kind, new)
            self._gc.run()
            return gone_obj
        return self._store(kind, old, new, shared=shared)

    @staticmethod
    def _same(old: Obj, new: Obj) -> bool:
        if old == new:
            return True
        if "managedFields" not in old["metadata"] and "managedFields" not in new["metadata"]:
            return False  # compared whole already

        def strip(o: Obj) -> Obj:
            meta = {k: v for k, v in o["metadata"].items() if k != "managedFields"}
            return {**o, "metadata": meta}

        return bool(strip(old) == strip(new))

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
        """Delete an object, or mark it deleting while finalizers remain.

        Returns the object: with ``deletionTimestamp`` when it stays (finalizers), else its last
        state. Dependents are collected per ``propagation`` (default Background).
        ``grace_period_seconds`` is for stores backed by a real API server (``ApiStore``);
        this store has no graceful deletion of its own and removes at once.

        Raises:
            ApiError: 404 NotFound, 409 Conflict for failed preconditions.
        """
        with self._lock:
            entry = self._entry(kind, namespace, name)
            obj = entry.obj
            meta = obj["metadata"]
            if uid is not None and uid != meta["uid"]:
                raise conflict(
                    kind,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {meta['uid']}",
                )
            if resource_version is not None and resource_version != meta["resourceVersion"]:
                raise conflict(
                    kind,
                    name,
                    f"the ResourceVersion in the precondition ({resource_version}) does not match "
                    f"the ResourceVersion in record ({meta['resourceVersion']}). The object might "
                    "have been modified",
                )
            finalizers = builtins.list(meta.get("finalizers") or [])
            if kind.group == "" and kind.plural == "namespaces" and name in _UNDELETABLE:
                # plugin/pkg/admission/namespace/lifecycle
                raise ApiError(
                    403,
                    "Forbidden",
                    f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                    details={"name": name, "kind": "namespaces"},
                )
            if propagation == "Foreground" and FOREGROUND not in finalizers:
                finalizers.append(FOREGROUND)
            elif propagation == "Orphan" and ORPHAN not in finalizers:
                finalizers.append(ORPHAN)
            is_namespace = kind.group == "" and kind.plural == "namespaces"
            if dry_run:
                return decode(entry.raw)  # type: ignore[no-any-return]
            if finalizers or is_namespace:
                unchanged = finalizers == builtins.list(meta.get("finalizers") or [])
                if meta.get("deletionTimestamp") and unchanged:
                    return decode(entry.raw)  # type: ignore[no-any-return]
                new_meta = {**meta, "finalizers": finalizers}
                new_meta.setdefault("deletionTimestamp", self._now())
                new_meta.setdefault("deletionGracePeriodSeconds", 0)
                if not finalizers:
                    new_meta.pop("finalizers")
                new = {**obj, "metadata": new_meta}
                if is_namespace:
                    new["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
                    self._gc.terminating(name)
                return self._store(kind, obj, new)
            gone_obj = self._remove(kind, obj)
            self._gc.run()
            return gone_obj

    # --- garbage collection ------------------------------------------------------------------

    def _collect(self, kind: Kind, obj: Obj) -> None:
        self._gc.written(obj)
        self._gc.run()

    # The collector's view of the store (``_gc.Objects``): called inside a write, these read
    # stored objects without copying and write without admission. Other callers use the
    # methods above.

    def by_uid(self, uid: str) -> Obj | None:
        """The stored object with this uid (read-only), or None when there is none."""
        loc = self._by_uid.get(uid)
        return None if loc is None else self._data[loc[0]][loc[1]].obj

    def dependents(self, uid: str) -> builtins.list[str]:
        """The uids of stored objects that have an ownerReference to ``uid``."""
        return builtins.list(self._dependents.get(uid, ()))

    def namespace_members(self, namespace: str) -> builtins.list[Obj]:
        """Every stored object in ``namespace`` (read-only)."""
        return [
            table[skey].obj
            for key, table in self._data.items()
            if self._resources[key].kind.namespaced
            for skey in table
            if skey[0] == namespace
        ]

    def namespace(self, name: str) -> Obj | None:
        """The stored Namespace ``name`` (read-only), or None."""
        entry = self._data[("", "namespaces")].get(("", name))
        return None if entry is None else entry.obj

    def put(self, old: Obj, new: Obj) -> None:
        """Store ``new`` in place of the stored ``old`` (same uid) with no admission."""
        with self._lock:
            self._store(self._resources[self._by_uid[old["metadata"]["uid"]][0]].kind, old, new)

    def drop(self, obj: Obj) -> None:
        """Remove the stored object ``obj`` (its last state, same uid) and tell watchers."""
        with self._lock:
            self._remove(self._resources[self._by_uid[obj["metadata"]["uid"]][0]].kind, obj)

    def timestamp(self) -> str:
        """Now by the store's clock, as ``metav1.Time``."""
        return self._now()

    # --- watch -------------------------------------------------------------------------------

    def _emit(self, event: Event) -> None:
        if len(self._history) == self._history.maxlen and self._history:
            self._expired_upto = self._history[0].rv
        self._history.append(event)
        for key in ((event.kind.group, event.kind.plural), None):
            for watcher in self._watchers.get(key, ()):
                seen = watcher.translate(event)
                if seen is not None:
                    watcher.deliver(seen)

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
        """Register ``deliver`` for changes to ``kind`` (all kinds if None).

        ``resource_version`` None/"" or "0" first delivers every current object as ADDED; a
        number replays the changes after it from the history window.

        Raises:
            ApiError: 410 Expired when ``resource_version`` is older than the window.
        """
        with self._lock:
            watcher = Watcher(
                None if kind is None else (kind.group, kind.plural),
                namespace,
                labels,
                fields,
                deliver,
                self._remove_watcher,
            )
            if resource_version in (None, "", "0"):
                kinds = [kind] if kind is not None else [r.kind for r in self._resources.values()]
                for k in kinds:
                    if k is None:
                        continue
                    table = self._data.get((k.group, k.plural), {})
                    for skey in sorted(table):
                        entry = table[skey]
                        event = Event(
                            "ADDED",
                            k,
                            entry.obj,
                            entry,
                            int(entry.obj["metadata"]["resourceVersion"]),
                        )
                        if watcher.wants(event):
                            deliver(event)
            else:
                try:
                    since = int(str(resource_version))
                except ValueError as err:
                    raise bad_request(
                        "invalid resource version: strconv.ParseUint: "
                        f'parsing "{resource_version}": invalid syntax'
                    ) from err
                if since < self._expired_upto:
                    raise gone(since, self._history[0].rv if self._history else self._rv)
                for event in self._replay(since):
                    if (
                        watcher.key is not None
                        and (event.kind.group, event.kind.plural) != watcher.key
                    ):
                        continue
                    seen = watcher.translate(event)
                    if seen is not None:
                        deliver(seen)
            self._watchers.setdefault(watcher.key, []).append(watcher)
            return watcher

    def _replay(self, since: int) -> Iterator[Event]:
        for event in self._history:
            if event.rv > since:
                yield event

    def _remove_watcher(self, watcher: Watcher) -> None:
        with self._lock:
            lst = self._watchers.get(watcher.key)
            if lst is not None and watcher in lst:
                lst.remove(watcher)
