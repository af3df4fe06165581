"""One input on an upstream control plane, from an empty cluster to the outcome List."""

from __future__ import annotations

import copy
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpushift import engine, kube, upstream
from gpushift._obj import Obj
from gpushift.crosscheck import _compare, _load, _outcome, _settle

#: kube-controller-manager's controllers: all but the node lifecycle controller, since no
#: kubelet renews the nodes' Leases (docs/decisions.md).
CONTROLLERS = ("*", "-node-lifecycle-controller")
#: What a reset deletes, dependents first; namespaces (and their ServiceAccounts) are kept,
#: since without the namespace controller running a deleted namespace would stay Terminating.
_RESET_KINDS = (
    "Pod",
    "ResourceClaim",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "DeviceClass",
    "Node",
    "PriorityClass",
    "RuntimeClass",
)


@dataclass(slots=True)
class UpstreamRun:
    """The outcome of one input on the control plane."""

    #: Pods, ResourceClaims and Events as a v1 List (preemption victims annotated).
    result: Obj
    plan: _load.Plan
    settled: _settle.Settled
    #: Seconds: reset, write, controllers, release, settle, read.
    timings: dict[str, float] = field(default_factory=dict)


class Session:
    """A control plane for one or more runs; a context manager.

    Without ``plane`` one is started on entry (its controller manager and scheduler deferred)
    and stopped on exit. Each :meth:`run` after the first resets the cluster first.
    """

    def __init__(
        self,
        plane: upstream.ControlPlane | None = None,
        *,
        timeout: float = 180.0,
        quiet: float = 2.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self._own = plane is None
        self.plane = plane
        self.timeout = timeout
        self.quiet = quiet
        self.progress = progress or (lambda _line: None)
        self._dirty = plane is not None
        self._client: kube.Kube | None = None

    def __enter__(self) -> Session:
        if self.plane is None:
            self.plane = upstream.ControlPlane(
                controllers=CONTROLLERS,
                controller_manager=False,
                scheduler=False,
                progress=self.progress,
            )
            self.plane.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._own and self.plane is not None:
            self.plane.stop()

    @property
    def client(self) -> kube.Kube:
        """The admin client of the control plane."""
        if self._client is None:
            assert self.plane is not None and self.plane.kubeconfig is not None
            self._client = kube.connect(kubeconfig=self.plane.kubeconfig, field_manager="gpushift")
        return self._client

    def _stop_controllers(self) -> None:
        assert self.plane is not None
        self.plane.stop_scheduler()
        self.plane.stop_controller_manager()

    def reset(self) -> None:
        """Stop the scheduler and the controller manager and delete every object a run made
        (namespaces stay, empty). Waits until each list is empty."""
        self._stop_controllers()
        client = self.client
        for kind in _RESET_KINDS:
            ref = kube.ResourceRef.named(kind)
            for obj in client.list(ref):
                meta = obj.get("metadata") or {}
                if kind == "PriorityClass" and str(meta.get("name")).startswith("system-"):
                    continue
                if meta.get("finalizers"):
                    client.patch(
                        ref,
                        name=meta["name"],
                        namespace=meta.get("namespace"),
                        patch={"metadata": {"finalizers": None}},
                    )
                _delete_now(client, ref, meta)
        deadline = time.monotonic() + 60
        for kind in _RESET_KINDS:
            ref = kube.ResourceRef.named(kind)
            while True:
                left = [
                    o
                    for o in client.list(ref)
                    if not (
                        kind == "PriorityClass" and str(o["metadata"]["name"]).startswith("system-")
                    )
                ]
                if not left:
                    break
                if time.monotonic() > deadline:
                    raise _settle.SettleTimeoutError(f"reset: {len(left)} {kind} objects left")
                time.sleep(0.05)

    def run(self, objects: Sequence[Mapping[str, Any]]) -> UpstreamRun:
        """Load ``objects`` (as simulate reads them), let the controllers and the scheduler
        act, and read the outcome.

        Raises:
            InputError: kube-apiserver refused an object of the input.
            SettleTimeoutError: the cluster did not settle within ``timeout`` seconds.
        """
        assert self.plane is not None
        timings: dict[str, float] = {}
        t = time.monotonic()
        if self._dirty:
            self.reset()
        self._dirty = True
        timings["reset"] = time.monotonic() - t
        deadline = time.monotonic() + self.timeout
        the_plan = _load.plan(objects)
        t = time.monotonic()
        written = _load.write(self.client, the_plan, objects)
        timings["write"] = time.monotonic() - t
        self.progress(f"wrote {len(the_plan.objects())} objects")
        self.plane.controllers = CONTROLLERS
        self.plane.start_controller_manager()
        driver = _settle.Driver(
            self.client,
            the_plan,
            written,
            deadline=deadline,
            quiet=self.quiet,
            progress=self.progress,
        )
        driver.wait_for_controllers()
        self.plane.start_scheduler()
        self.progress(f"releasing {len(the_plan.queue)} pods in simulate's queue order")
        driver.release_all()
        driver.settle()
        t = time.monotonic()
        namespaces = {str(ns["metadata"]["name"]) for ns in the_plan.namespaces}
        result = _outcome.read(self.client, namespaces=namespaces, victims=driver.settled.victims)
        timings["read"] = time.monotonic() - t
        timings.update(driver.settled.timings)
        return UpstreamRun(result, the_plan, driver.settled, timings)


def _delete_now(client: kube.Kube, ref: kube.ResourceRef, meta: Mapping[str, Any]) -> None:
    import lightkube

    kw: dict[str, Any] = {"namespace": meta.get("namespace")} if ref.namespaced else {}
    try:
        client.client.delete(ref.model, meta["name"], grace_period=0, **kw)
    except lightkube.ApiError as err:
        if err.status.code != 404:
            raise


def run_upstream(
    objects: Sequence[Mapping[str, Any]],
    *,
    timeout: float = 180.0,
    progress: Callable[[str], None] | None = None,
) -> UpstreamRun:
    """:meth:`Session.run` on a control plane of its own, started and stopped here.

    Raises:
        upstream.NotBuiltError: the binaries are not built.
        upstream.StartError: the control plane did not start.
    """
    with Session(timeout=timeout, progress=progress) as session:
        return session.run(objects)


@dataclass(slots=True)
class Comparison:
    """simulate's outcome beside kube-scheduler's on the same input."""

    #: simulate's List, as ``simulate -o json`` gives it.
    simulate: Obj
    #: The control plane's List of the same shape (:mod:`._outcome`).
    upstream: Obj
    #: Every compared value, side by side (:func:`._compare.rows`).
    rows: list[_compare.Difference]
    #: Seconds: the control plane's start, then the run's phases (:class:`UpstreamRun`).
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def differences(self) -> list[_compare.Difference]:
        """The rows whose two sides differ."""
        return [r for r in self.rows if r.simulate != r.upstream]

    @property
    def exit_code(self) -> int:
        """0 when the two agree, 1 on any difference."""
        return 1 if self.differences else 0

    def as_dict(self) -> Obj:
        """``{"kind": "SimulationComparison", "simulate", "upstream", "differences"}``."""
        return {
            "kind": "SimulationComparison",
            "simulate": self.simulate,
            "upstream": self.upstream,
            "differences": [d.as_dict() for d in self.differences],
        }

    def text(self) -> str:
        """The rows as a table (one line per value), then the verdict."""
        lines = [("OBJECT", "FIELD", "SIMULATE", "KUBE-SCHEDULER", "")]
        for r in self.rows:
            n = max(len(r.simulate), len(r.upstream), 1)
            mark = "" if r.simulate == r.upstream else "differs"
            for i in range(n):
                lines.append(
                    (
                        r.object if i == 0 else "",
                        r.field if i == 0 else "",
                        r.simulate[i] if i < len(r.simulate) else "",
                        r.upstream[i] if i < len(r.upstream) else "",
                        mark if i == 0 else "",
                    )
                )
        widths = [max(len(line[c]) for line in lines) for c in range(5)]
        out = [
            "   ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip()
            for line in lines
        ]
        n = len(self.differences)
        verdict = (
            f"simulate and kube-scheduler {upstream.VERSION} agree"
            if n == 0
            else f"{n} difference(s) between simulate and kube-scheduler {upstream.VERSION}"
        )
        return "\n".join(out) + f"\n\n{verdict}\n"


def against_upstream(
    objects: Sequence[Mapping[str, Any]],
    simulated: Mapping[str, Any],
    *,
    session: Session | None = None,
    timeout: float = 180.0,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """Run ``objects`` (the input, as simulate reads it) on a control plane and compare the
    outcome with ``simulated`` (simulate's List for the same input).

    ``session`` reuses a control plane (tests); without it one is started and stopped here.

    Raises:
        upstream.NotBuiltError: the binaries are not built (no ``session``).
        upstream.StartError: the control plane did not start.
        InputError: kube-apiserver refused an object of the input.
        SettleTimeoutError: the cluster did not settle within ``timeout`` seconds.
    """
    timings: dict[str, float] = {}
    if session is None:
        t = time.monotonic()
        with Session(timeout=timeout, progress=progress) as own:
            timings["start"] = time.monotonic() - t
            run = own.run(objects)
    else:
        run = session.run(objects)
    timings.update(run.timings)
    cluster = _compare.Cluster.of(objects)
    rows = _compare.rows(simulated, run.result, cluster, alternatives=tie_breaks(objects))
    return Comparison(dict(simulated), run.result, rows, timings)


#: How many of kube-scheduler's random choices among nodes of equal score simulate tries.
TIE_BREAKS = 16


def tie_breaks(objects: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """simulate's Lists for ``objects`` under :data:`TIE_BREAKS` seeded random choices among
    nodes of equal score, as kube-scheduler's selectHost makes them: the GPU use they reach
    is what kube-scheduler may reach too."""
    out: list[Obj] = []
    for seed in range(TIE_BREAKS):
        inputs = engine.from_objects(copy.deepcopy([dict(o) for o in objects]))
        sim = engine.simulate(inputs, tie_break=random.Random(seed))
        out.append(json.loads(json.dumps(engine.as_list(sim))))
    return out
