"""The twin's node-side agents and Flux on a real control plane: ``gpushift twin serve
--control-plane upstream`` with ``--example`` or ``--nodes`` (and ``--repo``).

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as ``make upstream``
built them; their workload, garbage-collection, resourceclaim and node lifecycle controllers
and their scheduler (with DRA) do what the twin's own do on its API server. The twin adds
what a cluster's nodes do: kubelets (with node Leases), the NVIDIA device plugin, the DRA
kubelet plugin, GFD, DCGM, the chart models, and Flux, all acting through the API
(:class:`~gpushift.twin.apiserver.ApiStore`). Time is wall time: there is no virtual clock.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from gpushift._errors import UsageError

if TYPE_CHECKING:
    from gpushift.twin.cluster import Delays


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
    write_example: Callable[[Path], Path] | None = None
    node_faults: tuple[str, ...] = ()
    strict_health: bool = False
    operator_delay: float = 10.0
    bin_dir: Path | None = None


def serve_upstream_cluster(options: UpstreamOptions) -> None:
    """Start the control plane, then the agents and Flux through its API; write the admin
    kubeconfig and print the URL and an ``export KUBECONFIG=`` line; run until SIGINT or
    SIGTERM, then stop the agents and every component.

    Raises:
        UsageError: bad options (both --nodes and --example, a bad --node-fault).
        InputError: an unreadable inventory, repository or vars file.
        NotBuiltError: the binaries are missing.
        StartError: a component did not come up.
        SystemExit: 1 when a component exits while serving.
    """
    from gpushift import kube, upstream
    from gpushift.twin._serve import _node_faults
    from gpushift.twin.apiserver import ApiStore
    from gpushift.twin.cluster import NODE_FAULTS, Cluster, example
    from gpushift.twin.cluster import load as load_inventory
    from gpushift.twin.flux import start_flux

    if options.nodes is not None and options.example is not None:
        raise UsageError("give at most one of --nodes and --example")
    if options.nodes is None and options.example is None:
        raise UsageError("--control-plane upstream without --bare needs --nodes or --example")
    if options.nodes is not None:
        inventory = load_inventory(options.nodes)
    else:
        inventory = example(str(options.example))
    faulted = _node_faults(options.node_faults, NODE_FAULTS, {n.name for n in inventory.nodes})

    stop = threading.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        raise KeyboardInterrupt

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    for sig in signals:
        signal.signal(sig, on_signal)
    plane = upstream.ControlPlane(bin_dir=options.bin_dir, port=options.port, progress=progress)
    store: ApiStore | None = None
    cluster: Cluster | None = None
    flux = None
    try:
        try:
            plane.start()
            assert plane.kubeconfig is not None
            client = kube.connect(kubeconfig=plane.kubeconfig, field_manager="gpushift-twin")
            store = ApiStore(client)
            cluster = Cluster(
                store,
                inventory,
                time_scale=1.0,
                delays=options.delays,
                node_faults=faulted,
                kubernetes_version=upstream.VERSION.lstrip("v"),
            )
            if options.repo is not None or options.example is not None:
                flux = start_flux(
                    store,
                    cluster.clock,
                    repo=options.repo,
                    example=options.example,
                    root=options.root,
                    vars_file=options.vars_file,
                    write_example=options.write_example,
                    operator_delay=options.operator_delay,
                    strict_health=options.strict_health,
                )
            cluster.start()
            if flux is not None:
                flux.start()
            plane.write_kubeconfig(options.kubeconfig_out)
            took = plane.timings.get("total", 0.0)
            print(
                f"gpushift twin serving {plane.server} on the upstream control plane "
                f"({took:.1f} s, {len(inventory.nodes)} nodes)",
                flush=True,
            )
            print(f"export KUBECONFIG={options.kubeconfig_out.resolve()}", flush=True)
            while not stop.is_set():
                ended = plane.exited()
                if ended:
                    comp = ended[0]
                    print(
                        f"gpushift: error: {comp.name} exited with status {comp.exited}: "
                        f"{comp.tail()}",
                        file=sys.stderr,
                    )
                    raise SystemExit(1)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    finally:
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        if flux is not None:
            flux.stop()
        if cluster is not None:
            cluster.stop()
        if store is not None:
            store.close()
        plane.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
