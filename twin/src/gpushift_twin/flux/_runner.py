"""Flux's controllers and the charts' operators, run in-process on the cluster's clock."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpushift.common import FLUX_VERSION, Kind, Obj, by_kind, lookup
from gpushift.flux import read_tree
from gpushift.gitops import own_sources
from gpushift_twin.apiserver import ApiError, Event, Store, rfc3339
from gpushift_twin.charts import Operators
from gpushift_twin.cluster import AgentThread
from gpushift_twin.flux import _crds
from gpushift_twin.flux._helmreleases import HelmReleases
from gpushift_twin.flux._kustomizations import Kustomizations
from gpushift_twin.flux._roots import Roots, synthetic_root
from gpushift_twin.flux._sources import Sources

log = logging.getLogger("gpushift_twin.flux")
#: Kinds whose changes do not wake the controllers: none of them reconciles on these (the
#: real controllers watch their own kinds, their sources and what they apply), and pods and
#: the kubelets' writes change far more often than anything Flux reads. Health checks and
#: Helm's wait poll on their own timers.
_IGNORED = {
    "events",
    "leases",
    "pods",
    "nodes",
    "replicasets",
    "controllerrevisions",
    "resourceclaims",
    "resourceslices",
    "endpoints",
    "endpointslices",
}


class Flux(AgentThread):
    """source-, kustomize- and helm-controller plus the GPU Operator and llmkube operators.

    ``clock`` is the cluster's :class:`~gpushift_twin.cluster.VirtualClock` (its
    ``seconds()``/``now()``), so intervals, timeouts and the operator's delay run at the
    cluster's ``--time-scale``. ``lenient`` suits partial repositories: missing files and
    dependencies that the repository does not define are skipped. Health checks on what the
    twin does not model pass as "assumed healthy" unless ``strict_health``.
    ``default_source`` (namespace, name) is the GitRepository of Kustomizations that set no
    ``sourceRef`` (the twin's synthetic root stands in for one that would patch it in).
    ``flux_version`` is the Flux release modelled ("2.9"): which older API versions its CRDs
    serve (``gpushift.common.FLUX_VERSIONS``).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Any,
        operator_delay: float = 10.0,
        lenient: bool = False,
        strict_health: bool = False,
        default_source: tuple[str, str] | None = None,
        whole: bool = False,
        flux_version: str = FLUX_VERSION,
    ) -> None:
        super().__init__(store, thread_name="gpushift-flux")
        self.clock = clock
        _crds.install_crds(store, flux=flux_version)
        stamp = lambda: rfc3339(clock.now())  # noqa: E731
        self.sources = Sources(
            store, clock.seconds, stamp, assume_remote=lenient and not strict_health
        )
        self.helmreleases = HelmReleases(store, clock.seconds, stamp, lenient=lenient)
        self.kustomizations = Kustomizations(
            store,
            clock.seconds,
            stamp,
            self.sources.artifacts,
            lenient=lenient,
            default_source=default_source,
            strict_health=strict_health,
            unmodelled=self.helmreleases.unmodelled,
            whole=whole,
        )
        self.operators = Operators(store, now=clock.seconds, delay=operator_delay)
        self._lock = threading.Lock()
        self._on_stop: list[Callable[[], None]] = []

    def on_stop(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when the controllers stop (removing a temporary repository, …)."""
        self._on_stop.append(fn)

    def run_once(self) -> float | None:
        """One pass of every controller; returns the virtual time of the next timer."""
        with self._lock:
            dues = [
                self.sources.sync(),
                self.kustomizations.sync(),
                self.helmreleases.sync(),
                self.operators.sync(),
            ]
        found = [x for x in dues if x is not None]
        return min(found) if found else None

    def _on_event(self, event: Event) -> None:
        if event.kind.plural not in _IGNORED:
            self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                due = self.run_once()
            except Exception:
                log.exception("flux pass failed")
                due = None
            wait = 1.0
            if due is not None:
                wait = min(self.clock.wall_delay(due - self.clock.seconds()), 1.0)
            # Let a burst of changes settle into one pass (and leave the CPU to the cluster).
            time.sleep(0.02)
            if wait > 0:
                self._wake.wait(wait)

    def stop(self) -> None:
        """Stop the controllers (objects stay)."""
        super().stop()
        self.kustomizations.close()
        self.sources.close()
        while self._on_stop:
            self._on_stop.pop()()


def bootstrap(
    store: Store,
    *,
    directory: Path,
    path: str,
    variables: dict[str, str] | None = None,
    roots: Roots | None = None,
) -> None:
    """What ``flux bootstrap`` leaves behind, pointed at a local directory: the namespace, the
    GitRepository and the root Kustomizations. ``roots`` are the repository's own
    (:func:`find_roots`); without them the twin makes ``flux-system/cluster-apps`` for ``path``.

    ``variables`` are substituted by each root Kustomization, which also patches them into
    every Kustomization it applies (as the home-ops cluster templates patch substituteFrom).
    The ConfigMaps and Secrets the roots substitute from (``roots.variables``) are created
    first, as the cluster's bootstrap applies them by hand.
    """
    roots = roots or synthetic_root(directory, path=path)
    git = lookup("source.toolkit.fluxcd.io/v1", "GitRepository")
    ks = lookup("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
    assert git is not None and ks is not None
    bodies: list[tuple[Kind, Obj]] = [(git, copy.deepcopy(roots.git))]
    made = {(roots.git["metadata"]["namespace"], roots.git["metadata"]["name"])}
    for namespace, name in own_sources(read_tree(directory, [directory])[0]):
        # A source the repository reads but does not define for another repository is the
        # repository itself, as check takes it (gitops.own_sources).
        if (namespace, name) not in made:
            made.add((namespace, name))
            alias = copy.deepcopy(roots.git)
            alias["metadata"] = {**alias["metadata"], "name": name, "namespace": namespace}
            bodies.append((git, alias))
    for root in roots.kustomizations:
        body = copy.deepcopy(root)
        if variables:
            _with_variables(body.setdefault("spec", {}), variables)
        bodies.append((ks, body))
    ns_kind = by_kind("Namespace")
    for namespace in sorted({str(b["metadata"].get("namespace")) for _, b in bodies}):
        try:
            store.create(ns_kind, {"metadata": {"name": namespace}}, manager="flux")
        except ApiError as err:
            if err.code != 409:
                raise
    for kind, body in bodies:
        try:
            store.create(kind, body, namespace=body["metadata"]["namespace"], manager="flux")
        except ApiError as err:
            if err.code != 409:
                raise
    for body in roots.variables:
        try:
            store.create(
                by_kind(str(body["kind"])),
                copy.deepcopy(body),
                namespace=body["metadata"]["namespace"],
                manager="kubectl",
            )
        except ApiError as err:
            if err.code != 409:
                raise


def _with_variables(spec: Obj, variables: dict[str, str]) -> None:
    # Inline values, so Kustomizations in any namespace see them (substituteFrom would
    # need a ConfigMap in each namespace); inline substitute wins over substituteFrom.
    post = spec.setdefault("postBuild", {})
    post["substitute"] = {**(post.get("substitute") or {}), **variables}
    lines = "".join(f"      {k}: {json.dumps(str(v))}\n" for k, v in sorted(variables.items()))
    spec["patches"] = [
        *(spec.get("patches") or []),
        {
            "patch": (
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
                "metadata:\n  name: not-used\nspec:\n  postBuild:\n    substitute:\n" + lines
            ),
            "target": {"group": "kustomize.toolkit.fluxcd.io", "kind": "Kustomization"},
        },
    ]


@contextlib.contextmanager
def run_gitops(
    inventory: Any,
    *,
    directory: Path,
    path: str = "./kubernetes/apps",
    variables: dict[str, str] | None = None,
    time_scale: float = 100.0,
    operator_delay: float = 10.0,
    lenient: bool = False,
    node_faults: dict[str, str] | None = None,
    tls: bool = False,
    strict_health: bool = False,
) -> Iterator[tuple[Any, Any, Flux]]:
    """A twin with the cluster's agents and Flux running on ``directory`` from ``path``.

    Yields ``(twin, cluster, flux)`` (see ``gpushift_twin.cluster.run_cluster``); everything
    stops on exit. ``node_faults`` maps node names to scenario faults; ``tls`` serves HTTPS
    (kubectl sends the bearer token only over TLS).
    """
    from gpushift_twin.cluster import run_cluster

    with run_cluster(inventory, time_scale=time_scale, node_faults=node_faults, tls=tls) as (
        twin,
        cluster,
    ):
        flux = Flux(
            twin.store,
            clock=cluster.clock,
            operator_delay=operator_delay,
            lenient=lenient,
            strict_health=strict_health,
            default_source=("flux-system", "flux-system"),
        )
        flux.start()
        try:
            bootstrap(twin.store, directory=directory, path=path, variables=variables)
            yield twin, cluster, flux
        finally:
            flux.stop()
