"""A whole twin in the foreground (``gpushift twin serve``): the API server, and on request the
cluster's agents and Flux, until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpushift.common import InputError, UsageError
from gpushift_twin.apiserver import (
    DEFAULT_KUBERNETES_VERSION,
    Certificate,
    FaultConfig,
    FaultProxy,
    Faults,
    ProxyTarget,
    Store,
    TwinServer,
    check_loopback,
    load,
    new_store,
    new_token,
    save,
    self_signed,
    serve_forever,
    start,
    url_for,
    write_kubeconfig,
)

if TYPE_CHECKING:
    # Imported when a twin is built, so that importing gpushift_twin stays the API server's
    # cost (the cluster and Flux bring in the engine, the GitOps model and the client).
    from gpushift_twin.cluster import Cluster, Delays
    from gpushift_twin.flux import Flux


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeOptions:
    """What :func:`serve` runs; the defaults are ``gpushift twin serve``'s.

    ``nodes`` (an inventory file) or ``example`` (an embedded inventory) add the cluster's
    agents on a virtual clock ``time_scale`` times wall time, with ``delays`` (the cluster's
    defaults when None). ``example``
    also runs Flux on the embedded repository; ``repo`` runs it on an operator's repository
    from its ``root`` path with ``vars_file`` as substitution variables. ``pause_after``
    seconds in, the server pauses for ``pause_for`` seconds.

    With any fault (``faults`` or ``pause_after``, see :meth:`faulted`) the twin's server
    listens on a free loopback port without faults and the fault proxy serves ``host:port``
    in front of it, with a token of its own; ``host`` must then be a loopback address.
    """

    host: str = "127.0.0.1"
    port: int = 6443
    kubeconfig_out: Path = Path("gpushift-twin.kubeconfig")
    state: Path | None = None
    tls: bool = True
    seed: int = 0
    faults: FaultConfig = field(default_factory=FaultConfig)
    pause_after: float | None = None
    pause_for: float = 10.0
    access_log: bool = False
    nodes: Path | None = None
    example: str | None = None
    time_scale: float = 1.0
    delays: Delays | None = None
    repo: Path | None = None
    root: str | None = None
    vars_file: Path | None = None
    #: ``--secret NS/NAME=FILE``: Secrets the repository reads but does not produce.
    secrets: tuple[str, ...] = ()
    # Writes the embedded example's repository (render.write_example); rendering is a layer
    # above the twin, so the caller passes it in.
    write_example: Callable[[Path], Path] | None = None
    # NODE=FAULT scenario faults (twin.cluster.NODE_FAULTS), checked against the inventory.
    node_faults: tuple[str, ...] = ()
    # Fail health checks on what the twin does not model instead of assuming them healthy.
    strict_health: bool = False
    operator_delay: float = 10.0
    #: The release the API server and the kubelets report (``1.N.P``).
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    #: The Flux release modelled (``gpushift.common.FLUX_VERSIONS``): which older Flux API
    #: versions its CRDs serve. None: the one ``repo`` installs, else the default.
    flux_version: str | None = None

    @property
    def faulted(self) -> bool:
        """Whether a fault is asked for, so that the fault proxy goes in front."""
        return faults_given(self.faults, self.pause_after)


def faults_given(faults: FaultConfig, pause_after: float | None) -> bool:
    """Whether ``faults`` or a pause inject anything: an error rate, latency, jitter, dropped
    watches or a pause."""
    return faults.active or faults.drop_watch_every > 0 or pause_after is not None


def check(options: ServeOptions) -> None:
    """Refuse option values and combinations :func:`serve` cannot run.

    Raises ``UsageError`` naming the option.
    """
    rate = options.faults.error_rate
    if not 0 <= rate <= 1:
        raise UsageError(f"--error-rate must be between 0 and 1, got {rate}")
    if not 0 <= options.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535, got {options.port}")
    if options.nodes is not None and options.example is not None:
        raise UsageError("give at most one of --nodes and --example")
    runs_cluster = options.nodes is not None or options.example is not None
    if runs_cluster and options.time_scale <= 0:
        raise UsageError(f"--time-scale must be positive, got {options.time_scale}")
    if options.repo is not None and not runs_cluster:
        raise UsageError("--repo needs --nodes")
    if options.node_faults and not runs_cluster:
        raise UsageError("--node-fault needs --nodes or --example")
    if options.faulted:
        check_loopback(listen=options.host)


def serve(options: ServeOptions) -> None:
    """Build the twin ``options`` describe and serve it until SIGINT or SIGTERM.

    Objects load from ``options.state`` (when it exists) before serving and are saved back
    (atomically) after. Once listening, the kubeconfig is written to
    ``options.kubeconfig_out`` and the URL and an ``export KUBECONFIG=`` line are printed.

    Raises ``UsageError`` for bad options (see :func:`check`) and ``InputError`` for an
    unreadable or invalid state, inventory or vars file, or an address that is in use.
    """
    check(options)
    store = new_store(seed=options.seed)
    if options.state is not None and options.state.exists():
        load(store, options.state)
    token = new_token()
    certificate = self_signed([options.host]) if options.tls else None
    server = TwinServer(
        store,
        token=token,
        # With faults, the proxy in front injects them (_main).
        faults=Faults(None if options.faulted else options.faults),
        access_log=options.access_log,
        kubernetes_version=options.kubernetes_version,
    )
    cluster = _cluster(store, options, token)
    if cluster is not None:
        server.logs = cluster.logs
    flux = _flux(store, cluster, options)
    if options.access_log:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if not _loopback(options.host):
        print(
            f"gpushift: warning: listening on {options.host}, reachable from other hosts",
            file=sys.stderr,
        )
    if cluster is not None:
        cluster.start()
    if flux is not None:
        flux.start()
    try:
        asyncio.run(_main(server, options, token, certificate, cluster))
    finally:
        if flux is not None:
            flux.stop()
        if cluster is not None:
            cluster.stop()
        if options.state is not None:
            save(store, options.state)


def _cluster(store: Store, options: ServeOptions, token: str) -> Cluster | None:
    if options.nodes is None and options.example is None:
        return None
    from gpushift_twin.cluster import Cluster, example
    from gpushift_twin.cluster import load as load_inventory

    if options.nodes is not None:
        inventory = load_inventory(options.nodes)
    else:
        inventory = example(str(options.example))
    from gpushift_twin.cluster import NODE_FAULTS

    faulted = _node_faults(options.node_faults, NODE_FAULTS, {n.name for n in inventory.nodes})
    cluster = Cluster(
        store,
        inventory,
        time_scale=options.time_scale,
        delays=options.delays,
        node_faults=faulted,
        kubernetes_version=options.kubernetes_version,
    )
    cluster.token = token
    return cluster


def _node_faults(items: tuple[str, ...], known: tuple[str, ...], names: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        node, sep, fault = item.partition("=")
        if not sep or not node or fault not in known:
            raise UsageError(
                f"--node-fault: expected NODE=FAULT with FAULT one of {', '.join(known)}, "
                f"got {item!r}"
            )
        if node not in names:
            raise UsageError(f"--node-fault: no node {node!r} in the inventory")
        out[node] = fault
    return out


def _flux(store: Store, cluster: Cluster | None, options: ServeOptions) -> Flux | None:
    if cluster is None:
        return None  # check(): --repo needs --nodes, and --example runs the cluster
    from gpushift_twin.flux import flux_for

    return flux_for(store, cluster.clock, options=options)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


async def _main(
    server: TwinServer,
    options: ServeOptions,
    token: str,
    certificate: Certificate | None,
    cluster: Cluster | None,
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    front: TwinServer | FaultProxy = server
    routes = cluster.routes if cluster is not None else None
    inner = None
    client_token = token
    if options.faulted:
        # The twin on a loopback port of its own, without faults; the proxy serves the
        # address asked for, and its clients present a token of its own.
        inner, inner_port = await start(
            server, host="127.0.0.1", port=0, certificate=None, routes=routes
        )
        routes = None
        client_token = new_token()
        front = FaultProxy(
            ProxyTarget(url_for("127.0.0.1", inner_port, tls=False), token=token),
            token=client_token,
            faults=Faults(options.faults),
        )

    def ready(bound: int) -> None:
        url = url_for(options.host, bound, tls=options.tls)
        write_kubeconfig(
            options.kubeconfig_out,
            server=url,
            token=client_token,
            ca_pem=certificate.cert_pem if certificate else None,
        )
        print(f"gpushift twin serving {url}", flush=True)
        print(f"export KUBECONFIG={options.kubeconfig_out.resolve()}", flush=True)
        if options.pause_after is not None:
            loop.call_later(options.pause_after, front.faults.pause)
            loop.call_later(options.pause_after + options.pause_for, front.faults.resume)

    try:
        await serve_forever(
            front,
            host=options.host,
            port=options.port,
            certificate=certificate,
            on_ready=ready,
            stop=stop,
            routes=routes,
            handler_cancellation=inner is not None,
        )
    except OSError as err:
        raise InputError(
            f"cannot listen on {options.host}:{options.port}: {err.strerror or err}"
        ) from None
    finally:
        if inner is not None:
            await inner.cleanup()
