"""Running every agent in-process against the store, on the virtual clock.

One background thread runs passes: the workload controllers, the taint-eviction controller,
the resourceclaim controller, the scheduler, every kubelet, the invariant monitor and the DCGM
sampler. A pass starts when the store reports a change or when an agent's timer (a start
delay, a grace period, a toleration running out) falls due.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from aiohttp import web

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver import (
    DEFAULT_KUBERNETES_VERSION,
    ApiError,
    Event,
    Store,
    Twin,
    new_store,
    run_twin,
)
from gpushift_twin.cluster import _claims, _cronjobs, _volumes, _workloads
from gpushift_twin.cluster._clock import VirtualClock
from gpushift_twin.cluster._context import Context, Delays
from gpushift_twin.cluster._dcgm import Metrics
from gpushift_twin.cluster._heartbeat import Heartbeat
from gpushift_twin.cluster._http import routes
from gpushift_twin.cluster._inventory import Inventory
from gpushift_twin.cluster._kubelet import Kubelet
from gpushift_twin.cluster._logs import LogBook
from gpushift_twin.cluster._loop import AgentThread, collector_paused
from gpushift_twin.cluster._monitor import Monitor, ViolationList
from gpushift_twin.cluster._nodes import node_object
from gpushift_twin.cluster._scheduler import Scheduler
from gpushift_twin.cluster._taints import TaintEviction

log = logging.getLogger("gpushift_twin.cluster")

# Changes that can make an unschedulable pod fit: kube-scheduler's queueing hints, coarsely.
_CAPACITY_KINDS = {
    "nodes",
    "resourceslices",
    "deviceclasses",
    "resourceclaimtemplates",
    "priorityclasses",
}
#: Shortest wall time between two passes, so a burst of API writes is handled together.
_MIN_INTERVAL = 0.005


class Cluster(AgentThread):
    """Nodes from an inventory, and the agents that make the store behave like a cluster.

    Use as a context manager (or :meth:`start`/:meth:`stop`); :meth:`run_once` runs one pass
    on the caller's thread instead.
    """

    def __init__(
        self,
        store: Store,
        inventory: Inventory,
        *,
        time_scale: float = 1.0,
        delays: Delays | None = None,
        events: bool = True,
        clock: VirtualClock | None = None,
        node_faults: dict[str, str] | None = None,
        kubernetes_version: str = DEFAULT_KUBERNETES_VERSION,
    ) -> None:
        super().__init__(store, thread_name="gpushift-cluster")
        self.inventory = inventory
        self.kubelet_version = f"v{kubernetes_version}"
        self.clock = clock or VirtualClock(time_scale=time_scale)
        # Object timestamps come from cluster time, like the agents' timers; it starts in
        # the past (VirtualClock.lead), so objects already stored are dated to its start.
        store.set_clock(self.clock.now)
        self.ctx = Context(store, self.clock, delays or Delays(), events)
        self.scheduler = Scheduler(self.ctx)
        self.taint_eviction = TaintEviction(self.ctx)
        self.kubelet = Kubelet(
            self.ctx, {n.name: n.gpus for n in inventory.nodes}, faults=node_faults
        )
        self.monitor = Monitor(self.ctx)
        self.metrics = Metrics(self.ctx)
        #: On a real API server (``store.remote``) its scheduler and controllers do what the
        #: twin's own do here; the node side (kubelets, plugins, GFD, DCGM) stays the twin's,
        #: and Leases keep the node lifecycle controller from marking nodes NotReady.
        self.remote = store.remote
        self.heartbeat = Heartbeat(self.ctx, [n.name for n in inventory.nodes])
        self.passes = 0
        self.token: str | None = None
        self._lock = threading.Lock()
        self._bootstrap()

    def _bootstrap(self) -> None:
        existing = {n["metadata"]["name"] for n in self.ctx.list(self.ctx.kinds.node)}
        for i, spec in enumerate(self.inventory.nodes):
            if spec.name not in existing:
                body = node_object(
                    spec, index=i, now=self.ctx.stamp(), kubelet_version=self.kubelet_version
                )
                status: Obj = body.pop("status")

                def with_status(cur: Obj, status: Obj = status) -> Obj:
                    return {**cur, "status": status}

                self.store.create(self.ctx.kinds.node, body)
                self.store.update(
                    self.ctx.kinds.node, name=spec.name, mutate=with_status, subresource="status"
                )

    # -- the loop --

    def _on_event(self, event: Event) -> None:
        plural = event.kind.plural
        if plural == "events":
            return
        if (
            plural in _CAPACITY_KINDS
            or (plural in ("pods", "resourceclaims") and event.type == "DELETED")
            or (
                plural == "pods"
                and (event.obj.get("status") or {}).get("phase")
                in (
                    "Succeeded",
                    "Failed",
                )
            )
        ):
            self.scheduler.epoch += 1
        self._wake.set()

    def run_once(self) -> float | None:
        """One pass of every agent; returns the virtual time of the next timer, if any.

        An agent that fails is logged and skipped for this pass, so one bad object cannot
        stop the others.
        """
        with self._lock, collector_paused():
            ctx = self.ctx
            kinds = ctx.kinds
            self.passes += 1

            # Each stage sees what the stages before it wrote; a stage that wrote nothing
            # leaves the lists as they were, so they are read again only after a write.
            listed: dict[str, tuple[int, list[Obj]]] = {}

            def current(kind: Kind) -> list[Obj]:
                hit = listed.get(kind.plural)
                if hit is None or hit[0] < ctx.store.changed_at(kind):
                    hit = listed[kind.plural] = (ctx.store.resource_version, ctx.list(kind))
                return hit[1]

            def pods() -> list[Obj]:
                return current(kinds.pod)

            def nodes() -> list[Obj]:
                return current(kinds.node)

            stages: list[tuple[str, Callable[[], object]]] = [
                ("cronjobs", lambda: _cronjobs.sync_cronjobs(ctx)),
                ("jobs", lambda: _cronjobs.sync_jobs(ctx, pods())),
                ("deployments", lambda: _workloads.sync_deployments(ctx, pods())),
                ("replicasets", lambda: _workloads.sync_replicasets(ctx, pods())),
                ("statefulsets", lambda: _workloads.sync_statefulsets(ctx, pods())),
                ("daemonsets", lambda: _workloads.sync_daemonsets(ctx, pods=pods(), nodes=nodes())),
                ("taint eviction", lambda: self.taint_eviction.sync(pods=pods(), nodes=nodes())),
                ("resourceclaims", lambda: _claims.create_claims(ctx, pods())),
                ("resourceclaim cleanup", lambda: _claims.clean_claims(ctx, pods())),
                ("volumes", lambda: _volumes.sync_claims(ctx)),
                ("scheduler", self.scheduler.sync),
                ("kubelets", lambda: self.kubelet.sync(pods=pods(), nodes=nodes())),
                ("monitor", lambda: self.monitor.sync(self.kubelet, nodes())),
                ("dcgm", lambda: self.metrics.sync(self.kubelet, nodes=nodes(), pods=pods())),
            ]
            if self.remote:
                twin_only = {
                    "cronjobs",
                    "jobs",
                    "deployments",
                    "replicasets",
                    "statefulsets",
                    "daemonsets",
                    "taint eviction",
                    "resourceclaims",
                    "resourceclaim cleanup",
                    "volumes",
                    "scheduler",
                }
                stages = [s for s in stages if s[0] not in twin_only]
                stages.insert(0, ("leases", self.heartbeat.sync))
                stages.insert(1, ("provisioner", lambda: _volumes.provision(ctx)))
            for name, stage in stages:
                try:
                    stage()
                except ApiError as err:  # a write raced a client's; the next pass retries
                    log.debug("%s: %s", name, err)
                    ctx.wake_at(self.clock.seconds())
                except Exception:
                    log.exception("cluster agent %s failed", name)
                    ctx.wake_at(self.clock.seconds() + self.clock.time_scale)
            due = min(ctx.wakeups) if ctx.wakeups else None
            ctx.wakeups.clear()
            return due

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            started = time.monotonic()
            # Without a timer due, sleep until the store changes: an idle pass over a large
            # cluster is not free.
            wait: float | None = None
            due = self.run_once()
            if due is not None:
                wait = min(self.clock.wall_delay(due - self.clock.seconds()), 1.0)
            if wait is not None:
                wait = max(wait, _MIN_INTERVAL - (time.monotonic() - started), 0.0)
                if wait > 0:
                    self._wake.wait(wait)
            else:
                self._wake.wait()
                time.sleep(_MIN_INTERVAL)  # a burst of API writes is handled in one pass

    # -- surfaces --

    def restart_kubelet(self, node: str) -> bool:
        """Restart one node's kubelet (device-plugin resources come back at 0).

        Returns False when the twin has no kubelet for ``node``.
        """
        with self._lock:
            if node not in self.kubelet.agents:
                return False
            self.kubelet.restart(node)
        self._wake.set()
        return True

    @property
    def logs(self) -> LogBook:
        """Every container's log, for the API server's ``pods/log``."""
        return self.kubelet.logs

    def violations(self) -> ViolationList:
        """The monitor's record, as served at ``/twin/v1/violations``."""
        return self.monitor.as_json()

    def routes(self, app: web.Application) -> None:
        """Add the violations and Prometheus endpoints to the twin's application."""
        routes(
            monitor=self.monitor,
            metrics=self.metrics,
            token=lambda: self.token,
            restart_kubelet=self.restart_kubelet,
        )(app)


@contextlib.contextmanager
def run_cluster(
    inventory: Inventory,
    *,
    time_scale: float = 100.0,
    delays: Delays | None = None,
    events: bool = True,
    store: Store | None = None,
    tls: bool = False,
    kubeconfig: Path | None = None,
    node_faults: dict[str, str] | None = None,
    access_log: bool = False,
) -> Iterator[tuple[Twin, Cluster]]:
    """A twin API server with the cluster's agents running, for tests and in-process callers.

    Yields the running :class:`Twin` (url, token, kubeconfig, store) and the :class:`Cluster`.
    ``node_faults`` maps node names to scenario faults (``NODE_FAULTS``).
    """
    store = store or new_store()
    cluster = Cluster(
        store,
        inventory,
        time_scale=time_scale,
        delays=delays,
        events=events,
        node_faults=node_faults,
    )
    with (
        cluster,
        run_twin(
            store=store,
            tls=tls,
            kubeconfig=kubeconfig,
            routes=cluster.routes,
            access_log=access_log,
        ) as twin,
    ):
        cluster.token = twin.token
        twin.server.logs = cluster.logs
        yield twin, cluster
