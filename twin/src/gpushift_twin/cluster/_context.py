"""What every agent of the cluster shares: the store, the clock, agent delays, Events."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpushift.common import Kind, Obj, by_kind, lookup
from gpushift_twin.apiserver import ApiError, Store, rfc3339
from gpushift_twin.cluster._clock import VirtualClock


@dataclass(frozen=True, slots=True)
class Delays:
    """How long each agent takes, in virtual seconds."""

    #: Bound pod → containers running (image present, sandbox and containers started).
    pod_start: float = 2.0
    #: Device-plugin pod Running → its resource registered with the kubelet.
    plugin_register: float = 1.0
    #: DRA kubelet-plugin pod Running → the node's ResourceSlice published.
    slice_publish: float = 1.0
    #: Kubelet ``endpointStopGracePeriod`` (pkg/kubelet/cm/devicemanager/types.go).
    device_plugin_grace: float = 300.0
    #: Used when a pod sets no ``terminationGracePeriodSeconds`` (the API default).
    termination_grace: float = 30.0
    #: A Job's pod Running → its containers exit 0 (the work a Job does, modelled as time).
    job_run: float = 30.0


class Kinds:
    """The kinds the agents read and write, looked up once."""

    def __init__(self) -> None:
        self.node = by_kind("Node")
        self.pod = by_kind("Pod")
        self.event = by_kind("Event")
        self.configmap = by_kind("ConfigMap")
        self.deployment = by_kind("Deployment")
        self.replicaset = by_kind("ReplicaSet")
        self.statefulset = by_kind("StatefulSet")
        self.daemonset = by_kind("DaemonSet")
        self.claim = by_kind("ResourceClaim")
        self.template = by_kind("ResourceClaimTemplate")
        self.slice = by_kind("ResourceSlice")
        self.device_class = by_kind("DeviceClass")
        self.priority_class = by_kind("PriorityClass")
        self.clusterrole = by_kind("ClusterRole")
        self.clusterrolebinding = by_kind("ClusterRoleBinding")


def kind_of(obj: Obj) -> Kind | None:
    """The kind of an object from its ``apiVersion`` and ``kind``."""
    return lookup(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))


@dataclass(slots=True)
class Context:
    """The store and clock the agents act on, their delays, and the Event recorder."""

    store: Store
    clock: VirtualClock
    delays: Delays = field(default_factory=Delays)
    events: bool = True
    kinds: Kinds = field(default_factory=Kinds)
    #: Virtual times at which some agent wants to look again (pruned by the loop).
    wakeups: list[float] = field(default_factory=list)
    _seq: int = 0
    _stamp: tuple[int, str] = (-1, "")
    _epoch: float | None = None  # the clock's start in Unix seconds
    _recorded: dict[tuple[str, str, str], str] = field(default_factory=dict)
    #: Workload template hashes by (uid, generation), for this store's objects only: uids
    #: come from the seeded generator, so another twin in the process repeats them.
    template_hashes: dict[tuple[str, int], str] = field(default_factory=dict)

    def now(self) -> float:
        """Virtual seconds since the start."""
        return self.clock.seconds()

    def stamp(self, at: float | None = None) -> str:
        """An RFC 3339 timestamp of virtual time ``at`` (now when None)."""
        if at is None:
            return self._second(self.clock.seconds())
        return rfc3339(self.clock.at(at))

    def _second(self, now: float) -> str:
        # Formatting dominates when thousands of objects change in one pass; timestamps
        # have whole seconds, so one string per virtual second is enough.
        if int(now) != self._stamp[0]:
            self._stamp = (int(now), rfc3339(self.clock.at(now)))
        return self._stamp[1]

    def wake_at(self, at: float) -> None:
        """Ask for another pass at virtual time ``at``."""
        self.wakeups.append(at)

    def list(self, kind: Kind, *, namespace: str | None = None) -> list[Obj]:
        """The stored objects of ``kind`` (shared, read-only: never mutate them)."""
        return self.store.list(kind, namespace=namespace).objects

    def event(
        self,
        obj: Obj,
        *,
        reason: str,
        message: str,
        component: str,
        warning: bool = False,
        host: str | None = None,
        field_path: str | None = None,
    ) -> None:
        """Record a core/v1 Event about ``obj`` as client-go's recorder does.

        A repeat of the same reason and message on the same object bumps ``count`` and
        ``lastTimestamp`` instead of adding an Event (client-go tools/record correlator).
        """
        if not self.events:
            return
        meta = obj.get("metadata") or {}
        kind = kind_of(obj)
        ns = str(meta.get("namespace") or "default")
        key = (str(meta.get("uid", "")), reason, message)
        seconds = self.clock.seconds()  # read once: the name's nanoseconds and the stamps
        ts = self._second(seconds)
        existing = self._recorded.get(key)
        if existing is not None:
            try:

                def bump(ev: Obj) -> Obj:
                    return {**ev, "count": int(ev.get("count") or 1) + 1, "lastTimestamp": ts}

                self.store.update(
                    self.kinds.event, name=existing, namespace=ns, mutate=bump, shared=True
                )
                return
            except ApiError:
                pass
        self._seq += 1
        # client-go tools/record events_cache.go: name "<object>.<unix nanos in hex>".
        if self._epoch is None:
            self._epoch = self.clock.at(0).timestamp()
        name = f"{meta.get('name', '')}.{int((self._epoch + seconds) * 1e9) + self._seq:x}"
        involved: Obj = {
            "kind": str(obj.get("kind", "")),
            "name": str(meta.get("name", "")),
            "uid": str(meta.get("uid", "")),
            "apiVersion": kind.api_version if kind else str(obj.get("apiVersion", "")),
            "resourceVersion": str(meta.get("resourceVersion", "")),
        }
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        if field_path:
            involved["fieldPath"] = field_path
        source: Obj = {"component": component}
        if host:
            source["host"] = host
        body: Obj = {
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
            "type": "Warning" if warning else "Normal",
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or "",
        }
        try:
            self.store.create(self.kinds.event, body, namespace=ns, shared=True)
        except ApiError:
            return  # the namespace is going away; kube-apiserver refuses such Events too
        self._recorded[key] = name
