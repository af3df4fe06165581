"""The twin's node-side agents and Flux on a real control plane: ``gpushift twin serve
--control-plane upstream`` with ``--example`` or ``--nodes`` (and ``--repo``).

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as ``make upstream``
built them; their workload, garbage-collection, resourceclaim and node lifecycle controllers
and their scheduler (with DRA) do what the twin's own do on its API server. The twin adds
what a cluster's nodes do: kubelets (with node Leases), the NVIDIA device plugin, the DRA
kubelet plugin, GFD, DCGM, the chart models, and Flux, all acting through the API
(:class:`~gpushift_twin.apiserver.ApiStore`). Time is wall time: there is no virtual clock.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpushift.common import FLUX_VERSION, UsageError

if TYPE_CHECKING:
    from gpushift_twin.cluster import Delays


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamOptions:
    """What :func:`serve_upstream_cluster` runs (the ``twin serve`` options it honours)."""

    port: int = 0
    kubeconfig_out: Path = Path("gpushift-twin.kubeconfig")
    nodes: Path | None = None
    example: str | None = None
    delays: Delays | None = None
    repo: Path | None = None
    root: str | None = None
    vars_file: Path | None = None
    secrets: tuple[str, ...] = ()
    write_example: Callable[[Path], Path] | None = None
    node_faults: tuple[str, ...] = ()
    strict_health: bool = False
    operator_delay: float = 10.0
    bin_dir: Path | None = None
    #: The control plane installs the CRDs of the Flux release gpushift models by default.
    flux_version: str | None = FLUX_VERSION


def serve_upstream_cluster(options: UpstreamOptions) -> None:
    """Start the control plane, then the agents and Flux through its API, and serve the
    twin's front on ``options.port``: it answers the twin's endpoints (``/twin/v1``, the
    violations, the Prometheus API) and forwards every other request to kube-apiserver.
    Its kubeconfig goes to ``options.kubeconfig_out`` (kube-apiserver's own admin kubeconfig
    beside it, with ``.upstream`` added to the name); the URL and an ``export KUBECONFIG=``
    line are printed. Runs until SIGINT or SIGTERM, then stops the agents and every
    component.

    Raises:
        UsageError: bad options (both --nodes and --example, a bad --node-fault).
        InputError: an unreadable inventory, repository or vars file.
        NotBuiltError: the binaries are missing.
        StartError: a component did not come up.
        ExitedError: a component exited while serving.
    """
    from aiohttp import web

    from gpushift import kube, upstream
    from gpushift.common import by_kind
    from gpushift_twin._proxyserve import (
        ProxyOptions,
        _ignoring_signals,
        _interruptible,
        serve_proxy,
    )
    from gpushift_twin._serve import _node_faults
    from gpushift_twin.apiserver import (
        TWIN_MARKER,
        TWIN_MARKER_PATH,
        ApiError,
        ApiStore,
        check_bearer,
        new_token,
        serve_pod_log,
        target_from_kubeconfig,
    )
    from gpushift_twin.cluster import NODE_FAULTS, Cluster, example
    from gpushift_twin.cluster import load as load_inventory
    from gpushift_twin.flux import flux_for

    if options.nodes is not None and options.example is not None:
        raise UsageError("give at most one of --nodes and --example")
    if options.repo is not None and options.nodes is None:
        raise UsageError("--repo needs --nodes")
    if options.nodes is None and options.example is None:
        raise UsageError("--control-plane upstream without --bare needs --nodes or --example")
    if options.nodes is not None:
        inventory = load_inventory(options.nodes)
    else:
        inventory = example(str(options.example))
    faulted = _node_faults(options.node_faults, NODE_FAULTS, {n.name for n in inventory.nodes})

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    plane = upstream.ControlPlane(bin_dir=options.bin_dir, progress=progress)
    store: ApiStore | None = None
    cluster: Cluster | None = None
    flux = None
    try:
        with _interruptible():
            try:
                plane.start()
            except KeyboardInterrupt:
                return
        assert plane.kubeconfig is not None
        admin = options.kubeconfig_out.with_name(options.kubeconfig_out.name + ".upstream")
        client = kube.connect(kubeconfig=plane.kubeconfig, field_manager="gpushift-twin")
        store = ApiStore(client)
        try:
            cluster = Cluster(
                store,
                inventory,
                time_scale=1.0,
                delays=options.delays,
                node_faults=faulted,
                kubernetes_version=upstream.VERSION.lstrip("v"),
            )
        except (ApiError, kube.KubeError) as err:
            # kube-apiserver refused a node of the inventory (its validation is the real one).
            raise upstream.StartError(f"the twin's nodes could not register: {err}") from None
        token = new_token()
        cluster.token = token
        flux = flux_for(store, cluster.clock, options=options)
        cluster.start()
        if flux is not None:
            flux.start()
        plane.write_kubeconfig(admin)
        progress(f"kube-apiserver's own admin kubeconfig: {admin}")
        progress(
            f"the twin's agents for {len(inventory.nodes)} nodes and Flux act through "
            "kube-apiserver; its controllers and scheduler do the rest"
        )

        def ended() -> str | None:
            gone = plane.exited()
            if not gone:
                return None
            return f"{gone[0].name} exited with status {gone[0].exited}: {gone[0].tail()}"

        def routes(app: web.Application) -> None:
            async def marker(request: web.Request) -> web.Response:
                del request
                return web.json_response(TWIN_MARKER)

            async def pod_log(request: web.Request) -> web.StreamResponse:
                # kube-apiserver would ask the node's kubelet, at an address that is not
                # there; the twin's kubelets keep the logs.
                if not check_bearer(request.headers.get("Authorization"), token):
                    return web.json_response({"message": "Unauthorized"}, status=401)
                assert store is not None and cluster is not None
                try:
                    return await serve_pod_log(
                        request,
                        store=store,
                        kind=by_kind("Pod"),
                        namespace=request.match_info["namespace"],
                        name=request.match_info["name"],
                        source=cluster.logs,
                    )
                except ApiError as err:
                    return web.json_response(err.status(), status=err.code)

            app.router.add_get(TWIN_MARKER_PATH, marker)
            app.router.add_get("/api/v1/namespaces/{namespace}/pods/{name}/log", pod_log)
            assert cluster is not None
            cluster.routes(app)

        serve_proxy(
            target_from_kubeconfig(Path(plane.kubeconfig), None),
            ProxyOptions(port=options.port, kubeconfig_out=options.kubeconfig_out),
            # The embedded twin's line, so that what reads it (rehearse) reads this one too.
            banner="gpushift twin serving",
            probe=False,
            watchdog=ended,
            routes=routes,
            token=token,
        )
    finally:
        with _ignoring_signals():
            if flux is not None:
                flux.stop()
            if cluster is not None:
                cluster.stop()
            if store is not None:
                store.close()
            plane.stop()
