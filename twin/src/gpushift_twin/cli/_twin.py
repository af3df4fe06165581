"""`gpushift twin serve`, `gpushift twin check-invariants` and `gpushift twin export`."""

from __future__ import annotations

import contextlib
import enum
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpushift import cli as _a
from gpushift.common import FLUX_VERSION, FLUX_VERSIONS, UsageError

if TYPE_CHECKING:
    from gpushift_twin import FaultConfig

_SERVE_HELP = """Serve a cluster twin: a Kubernetes API server kubectl and gpushift can use.

It listens on --host (loopback by default) with TLS (a self-signed certificate) and a random
bearer token; both go into the kubeconfig written to --kubeconfig-out, so
`KUBECONFIG=FILE kubectl get nodes` works. With --state, objects are loaded from FILE at start
and saved back (atomically) on exit. Fault flags make clients' retry paths testable; they are
seeded (--seed) so a run can be repeated; the fault proxy (`gpushift twin proxy`) injects
them in front of the twin, which then listens on loopback only. Stop with Ctrl-C.

With --nodes FILE or --example NAME the twin behaves like a cluster: nodes from the
inventory, and in-process controllers, scheduler, kubelets, device plugins, the DRA driver,
GFD and dcgm-exporter acting on a virtual clock that runs --time-scale times faster than
wall time. It then also serves /twin/v1/violations and a Prometheus API
(/api/v1/query, /api/v1/query_range) with DCGM series.

--example homelab also runs Flux on the embedded homelab repository (gpu-operator
time-slicing, replicas 5); --repo DIR runs Flux on your repository from its --root path,
with --vars as substitution variables. `gpushift twin git-set` switches the repository
(the merge) and `gpushift twin wait-ready` waits for Flux. See docs/twin.md.

--control-plane upstream --bare serves an empty real cluster instead: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler as `make upstream` built them, on 127.0.0.1, with
gpushift's CRDs installed and an admin kubeconfig written to --kubeconfig-out; with fault
flags the fault proxy serves --port in front of it and the kubeconfig is the proxy's.
--control-plane upstream with --example or --nodes (and --repo) runs the twin's node-side
agents (kubelets with node Leases, device plugin, DRA plugin, GFD, DCGM, chart models) and
Flux against that real control plane, whose own controllers and scheduler replace the
twin's; time is wall time there (--time-scale 1 only).

--node-fault NODE=FAULT makes a node's GPU agents behave as in a broken state
(nvml-init-failure, driver-root-missing, dcgm-rbac-missing, plugin-crashloop), logs
included; `gpushift doctor` names each one (docs/verdict.md).
"""

_SERVE_EPILOG = (
    "Exit codes: 0 stopped cleanly (state saved), 2 bad input: an unreadable or invalid "
    "--state or --nodes file (naming file, line and object), a bad option, or an address "
    "already in use; 3 the upstream control plane (--control-plane upstream) is not built "
    "(run `make upstream`) or did not start; 1 one of its components exited while serving."
)

_PROXY_HELP = """Put the twin's faults in front of any API server on this host.

A proxy on a loopback address forwards every request to the cluster of --kubeconfig and
--context (its server must be on loopback too: a kind cluster, minikube's docker driver, a
port-forward, the upstream control plane) and injects API errors with kube-apiserver's
bodies (--error-rate, --error-codes, --retry-after), latency (--latency-ms, --jitter-ms),
dropped watches (--drop-watch-every) and a pause (--pause-after, --pause-for), seeded by
--seed as `twin serve` injects them. It serves TLS with a certificate of its own and writes a
kubeconfig for it to --kubeconfig-out with a token of its own; the cluster's credentials (a
bearer token or a client certificate) stay in the proxy. Health paths (/healthz, /livez,
/readyz) are never faulted; exec, attach and port-forward are relayed over WebSocket (kubectl
1.31 and later), not over SPDY. Stop with Ctrl-C (docs/twin.md, "Faults in front of any API
server").
"""

_PROXY_EPILOG = (
    "Exit codes: 0 stopped (SIGINT or SIGTERM), 2 bad input: an unreadable kubeconfig, a user "
    "that authenticates other than with a token or client certificate, an address off "
    "loopback (to listen on or to forward to), a bad option, or an address in use; 3 the "
    "cluster did not answer."
)

_EXPORT_HELP = """Write every object of a twin as one v1 List (JSON; YAML for .yaml/.yml).

Reads a running twin (--twin, through --kubeconfig and --context; the server must be a twin),
or a saved --state file.
"""

_EXPORT_EPILOG = (
    "Exit codes: 0 written, 2 bad input (or the server is not a twin), 3 the twin could not "
    "be reached, 4 the twin refused a request."
)


_INVENTORY_HELP = """Turn a real cluster's Nodes into an inventory file for --nodes.

Names, the labels and taints an operator set, capacity (with other device plugins'
extended resources) and GPUs from GPU feature discovery's labels (product, count, memory)."""
_INVENTORY_EPILOG = """Example:

  kubectl get nodes -o yaml > nodes.k8s.yaml

  gpushift twin inventory --from nodes.k8s.yaml -o nodes.yaml

Exit codes: 0 written; 2 the file is not a list of Nodes."""
_CHECK_HELP = """Report the invariant violations a running cluster twin has recorded.

DualAdvertiser: a node advertised nvidia.com/gpu through the device plugin while the DRA
driver published its GPUs. DoubleAllocation: a card held tenants of both ledgers, or more
than its ledger allows. Each line: reason, node, active or resolved, message.
"""

_CHECK_EPILOG = (
    "Exit codes: 0 none recorded, 1 violations recorded (active or resolved), 2 bad input "
    "(an unreadable kubeconfig, or the server is not a twin), 3 the twin could not be reached."
)


_GIT_SET_HELP = """Switch the twin's GitRepository to another directory or git ref: the "merge".

A directory (it must hold a Flux tree) sets spec.url to file://DIR; a hex commit sets
spec.ref.commit, anything else spec.ref.branch (it must exist in the local git repository at
spec.url). Only a twin (a server answering /twin/v1) is changed. A reconcile is requested, so the
new revision shows in status.artifact.revision and Kustomizations that are not suspended
apply it.
"""
_GIT_SET_EPILOG = (
    "Exit codes: 0 switched, 2 bad input (no such directory, not a Flux tree, a ref that does "
    "not exist, or the server is not a twin), 3 the twin could not be reached, 4 the twin "
    "refused the change."
)
_WAIT_HELP = """Wait until a twin's Flux has settled: every GitRepository, Kustomization and
HelmRelease Ready at its generation with no reconcile request pending, and every Kustomization
at its source's current revision (so it waits for a merge made by git-set).

Suspended ones are skipped. Shows what is not Ready while it waits, and prints it when
--timeout passes. A missing kubeconfig is an error at once, unless --wait-for-kubeconfig.
"""
_WAIT_EPILOG = (
    "Exit codes: 0 all Ready, 2 bad input (a missing or unreadable kubeconfig), 3 the twin "
    "could not be reached, 5 timed out."
)


# The fault options `twin serve` and `twin proxy` share.
Seed = Annotated[int, typer.Option(help="Seed for faults and generated names.")]
ErrorRate = Annotated[
    float, typer.Option(help="Fraction of requests (0-1) answered with an error.")
]
ErrorCodes = Annotated[str, typer.Option(help="Error codes to draw from: 500, 503, 429.")]
RetryAfter = Annotated[int, typer.Option(help="Retry-After seconds on 429 and 503.")]
LatencyMs = Annotated[float, typer.Option(help="Added latency per request.")]
JitterMs = Annotated[float, typer.Option(help="Extra random latency, up to this.")]
DropWatchEvery = Annotated[
    float, typer.Option(help="Close each watch stream after this many seconds.")
]
PauseAfter = Annotated[
    float | None, typer.Option(help="Pause the whole server this many seconds in.")
]
PauseFor = Annotated[float, typer.Option(help="Length of that pause, seconds.")]

#: `twin serve` options that inject faults: with any of them the fault proxy goes in front.
_FAULT_OPTIONS = (
    "seed",
    "error_rate",
    "error_codes",
    "retry_after",
    "latency_ms",
    "jitter_ms",
    "drop_watch_every",
    "pause_after",
    "pause_for",
)


def _fault_config(
    *,
    seed: int,
    error_rate: float,
    error_codes: str,
    retry_after: int,
    latency_ms: float,
    jitter_ms: float,
    drop_watch_every: float,
) -> FaultConfig:
    from gpushift_twin import FaultConfig

    if not 0 <= error_rate <= 1:
        raise UsageError(f"--error-rate must be between 0 and 1, got {error_rate}")
    return FaultConfig(
        error_rate=error_rate,
        error_codes=_codes(error_codes),
        retry_after=retry_after,
        latency=latency_ms / 1000,
        jitter=jitter_ms / 1000,
        drop_watch_every=drop_watch_every,
        seed=seed,
    )


def _codes(text: str) -> tuple[int, ...]:
    try:
        codes = tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise UsageError(f"--error-codes: not a list of HTTP codes: {text!r}") from None
    bad = [c for c in codes if c not in (429, 500, 503)]
    if bad or not codes:
        raise UsageError(f"--error-codes: choose from 500, 503 and 429, got {text!r}")
    return codes


def _flux_version(text: str | None) -> str | None:
    if text is not None and text not in FLUX_VERSIONS:
        raise UsageError(f"--flux-version: choose from {', '.join(FLUX_VERSIONS)}, got {text!r}")
    return text


class ControlPlaneChoice(enum.StrEnum):
    """Which API server `twin serve` runs."""

    TWIN = "twin"
    UPSTREAM = "upstream"


#: `twin serve` options that mean something only on the twin's own API server.
_TWIN_ONLY = (
    "state",
    "access_log",
    "kubernetes_version",
    "flux_version",
    "nodes",
    "example",
    "repo",
    "root",
    "vars_file",
    "secret",
    "node_fault",
    "strict_health",
)


#: Of those, the ones that need the twin's API server even with agents on a real one. The
#: release is kube-apiserver's there, and its kubelets report it.
_EMBEDDED_ONLY = ("state", "access_log", "kubernetes_version", "flux_version")


def _serve_upstream_cluster(ctx: typer.Context, *, port: int, kubeconfig_out: Path) -> None:
    """`twin serve --control-plane upstream --example/--nodes`: the twin's node-side agents
    and Flux on the real control plane, in real time."""
    import gpushift_twin as t
    from gpushift import upstream
    from gpushift.render import write_example
    from gpushift_twin.cluster import Delays

    given = ctx.params
    if given.get("time_scale") != 1.0:
        raise UsageError(
            "--time-scale: only 1 on --control-plane upstream (real time; the virtual clock "
            "needs the twin's API server)"
        )
    if given.get("host") != "127.0.0.1" or not given.get("tls"):
        raise UsageError("--control-plane upstream listens on 127.0.0.1 with TLS only")
    faults = _fault_config(
        **{k: given[k] for k in _FAULT_OPTIONS if k not in ("pause_after", "pause_for")}
    )
    if t.faults_given(faults, given["pause_after"]):
        raise UsageError(
            "fault flags: not with --example or --nodes on --control-plane upstream (use "
            "`gpushift twin proxy` in front of it)"
        )
    delays = Delays(
        pod_start=given["pod_start_delay"],
        plugin_register=given["plugin_register_delay"],
        slice_publish=given["slice_publish_delay"],
        device_plugin_grace=given["device_plugin_grace"],
    )
    try:
        t.serve_upstream_cluster(
            t.UpstreamOptions(
                port=port,
                kubeconfig_out=kubeconfig_out,
                nodes=given.get("nodes"),
                example=given.get("example"),
                delays=delays,
                repo=given.get("repo"),
                root=given.get("root"),
                vars_file=given.get("vars_file"),
                secrets=tuple(given.get("secret") or ()),
                write_example=write_example,
                node_faults=tuple(given.get("node_fault") or ()),
                strict_health=bool(given.get("strict_health")),
                operator_delay=given["operator_delay"],
            )
        )
    except (upstream.NotBuiltError, upstream.StartError) as err:
        _a.fail(_a.UNREACHABLE, str(err))
    except t.ExitedError as err:
        _a.fail(_a.FINDINGS, str(err))


def _serve_upstream(ctx: typer.Context, *, port: int, kubeconfig_out: Path) -> None:
    """`twin serve --control-plane upstream`: --bare, or the agents (--example/--nodes);
    options that need the twin's own API server are refused rather than ignored. With --bare,
    fault options put the fault proxy in front of the control plane."""
    from gpushift import upstream

    given = ctx.params
    agents = not given.get("bare") and (
        given.get("example") or given.get("nodes") or given.get("repo")
    )
    set_by_user = [
        name
        for name in _TWIN_ONLY
        if (source := ctx.get_parameter_source(name)) is not None
        and source.name in ("COMMANDLINE", "ENVIRONMENT")
        and not (agents and name not in _EMBEDDED_ONLY)
    ]
    if set_by_user:
        flags = ", ".join(
            "--" + n.replace("_", "-").replace("vars-file", "vars") for n in set_by_user
        )
        raise UsageError(f"{flags}: not with --control-plane upstream (the twin's API server only)")
    if agents:
        _serve_upstream_cluster(ctx, port=port, kubeconfig_out=kubeconfig_out)
        return
    if not given.get("bare"):
        raise UsageError(
            "--control-plane upstream needs --example or --nodes (the twin's agents on the "
            "real control plane), or --bare (an empty cluster)"
        )
    if given.get("host") != "127.0.0.1" or not given.get("tls"):
        raise UsageError("--control-plane upstream listens on 127.0.0.1 with TLS only")
    import gpushift_twin as t

    faults = _fault_config(
        **{k: given[k] for k in _FAULT_OPTIONS if k not in ("pause_after", "pause_for")}
    )
    faulted = t.faults_given(faults, given["pause_after"])
    idle = [
        "--" + name.replace("_", "-")
        for name in ("seed", "error_codes", "retry_after", "pause_for")
        if (source := ctx.get_parameter_source(name)) is not None
        and source.name in ("COMMANDLINE", "ENVIRONMENT")
    ]
    if idle and not faulted:
        # The twin seeds generated names too; kube-apiserver has nothing to seed.
        raise UsageError(
            f"{', '.join(idle)}: only with a fault flag (--error-rate, --latency-ms, "
            "--jitter-ms, --drop-watch-every, --pause-after) on --control-plane upstream"
        )
    try:
        if faulted:
            t.serve_upstream(
                t.ProxyOptions(
                    port=port,
                    kubeconfig_out=kubeconfig_out,
                    faults=faults,
                    pause_after=given["pause_after"],
                    pause_for=given["pause_for"],
                )
            )
        else:
            upstream.serve_bare(port=port, kubeconfig_out=kubeconfig_out)
    except (upstream.NotBuiltError, upstream.StartError) as err:
        _a.fail(_a.UNREACHABLE, str(err))
    except t.ExitedError as err:
        _a.fail(_a.FINDINGS, str(err))


#: ``--secret NS/NAME=FILE`` of `twin serve` and `rehearse` (repeatable).
Secrets = Annotated[
    list[str] | None,
    typer.Option(
        "--secret",
        metavar="NS/NAME=FILE",
        help="Supply a Secret --repo reads but does not produce (repeatable); FILE is "
        "KEY=VALUE lines or a YAML Secret.",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the `twin` command group to the CLI."""
    twin = typer.Typer(
        name="twin",
        help="A stand-in Kubernetes API server for rehearsals and tests.",
        no_args_is_help=True,
    )
    app.add_typer(twin)

    @twin.command("serve", help=_SERVE_HELP, epilog=_SERVE_EPILOG)
    def serve(
        ctx: typer.Context,
        host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port; 0 picks a free one.")] = 6443,
        kubeconfig_out: Annotated[
            Path, typer.Option("--kubeconfig-out", help="Where to write the kubeconfig (0600).")
        ] = Path("gpushift-twin.kubeconfig"),
        state: Annotated[
            Path | None, typer.Option(help="Load objects from FILE; save them back on exit.")
        ] = None,
        tls: Annotated[
            bool,
            typer.Option(
                help="Serve HTTPS. kubectl only sends a bearer token over TLS, so plain HTTP "
                "suits other clients only."
            ),
        ] = True,
        seed: Seed = 0,
        error_rate: ErrorRate = 0.0,
        error_codes: ErrorCodes = "500,503,429",
        retry_after: RetryAfter = 1,
        latency_ms: LatencyMs = 0.0,
        jitter_ms: JitterMs = 0.0,
        drop_watch_every: DropWatchEvery = 0.0,
        pause_after: PauseAfter = None,
        pause_for: PauseFor = 10.0,
        access_log: Annotated[
            bool, typer.Option(help="Log method, path and status of every request.")
        ] = False,
        nodes: Annotated[
            Path | None,
            typer.Option(
                "--nodes",
                help="Run the cluster's agents on the nodes of this inventory file "
                "(docs/inventory.md).",
            ),
        ] = None,
        example: Annotated[
            str | None, typer.Option(help="Run the agents on an embedded inventory: homelab.")
        ] = None,
        time_scale: Annotated[
            float, typer.Option(help="Cluster seconds per wall second for the agents.")
        ] = 1.0,
        pod_start_delay: Annotated[
            float, typer.Option(help="Cluster seconds from binding to Running.")
        ] = 2.0,
        plugin_register_delay: Annotated[
            float, typer.Option(help="Cluster seconds from device-plugin Running to registered.")
        ] = 1.0,
        slice_publish_delay: Annotated[
            float, typer.Option(help="Cluster seconds from DRA plugin Running to its slice.")
        ] = 1.0,
        device_plugin_grace: Annotated[
            float, typer.Option(help="Kubelet endpointStopGracePeriod, cluster seconds.")
        ] = 300.0,
        repo: Annotated[
            Path | None,
            typer.Option(
                help="Run Flux on this GitOps repository (needs --nodes); see docs/twin.md."
            ),
        ] = None,
        root: Annotated[
            str | None,
            typer.Option(
                help="Path for a root Kustomization the twin makes in --repo (default: the "
                "repository's own roots, else ./kubernetes/apps)."
            ),
        ] = None,
        vars_file: Annotated[
            Path | None,
            typer.Option("--vars", help="YAML map of Flux substitution variables for --repo."),
        ] = None,
        secret: Secrets = None,
        operator_delay: Annotated[
            float,
            typer.Option(
                help="Cluster seconds from a ClusterPolicy change to the operator acting."
            ),
        ] = 10.0,
        node_fault: Annotated[
            list[str] | None,
            typer.Option(
                "--node-fault",
                metavar="NODE=FAULT",
                help="A scenario fault on a node (repeatable): nvml-init-failure, "
                "driver-root-missing, dcgm-rbac-missing or plugin-crashloop.",
            ),
        ] = None,
        strict_health: Annotated[
            bool,
            typer.Option(
                help="Fail health checks on what the twin does not model instead of assuming "
                "them healthy."
            ),
        ] = False,
        kubernetes_version: Annotated[
            str,
            typer.Option(
                "--kubernetes-version",
                metavar="1.N[.P]",
                help="The release the API server and the kubelets report (the twin's API "
                "server only: on --control-plane upstream it is kube-apiserver's).",
            ),
        ] = "1.37",
        flux_version: Annotated[
            str | None,
            typer.Option(
                "--flux-version",
                metavar="2.N",
                help="The Flux release the twin models: its CRDs serve the older Flux API "
                "versions that release still serves (v2beta1/v1beta1 up to 2.6, "
                "v2beta2/v1beta2 up to 2.7). From 2.6 (the twin's API server only). "
                f"Default: the release --repo installs, else {FLUX_VERSION}.",
            ),
        ] = None,
        control_plane: Annotated[
            ControlPlaneChoice,
            typer.Option(
                "--control-plane",
                help="twin: the twin's own API server; upstream: etcd, kube-apiserver, "
                "kube-controller-manager and kube-scheduler built by `make upstream`.",
            ),
        ] = ControlPlaneChoice.TWIN,
        bare: Annotated[
            bool,
            typer.Option(
                "--bare",
                help="With --control-plane upstream: an empty real cluster, no nodes, agents "
                "or Flux.",
            ),
        ] = False,
    ) -> None:
        if control_plane is ControlPlaneChoice.UPSTREAM:
            _serve_upstream(ctx, port=port, kubeconfig_out=kubeconfig_out)
            return
        if bare:
            raise UsageError("--bare needs --control-plane upstream")
        import gpushift_twin as t
        from gpushift.render import write_example
        from gpushift_twin.cluster import Delays

        faults = _fault_config(
            seed=seed,
            error_rate=error_rate,
            error_codes=error_codes,
            retry_after=retry_after,
            latency_ms=latency_ms,
            jitter_ms=jitter_ms,
            drop_watch_every=drop_watch_every,
        )
        delays = Delays(
            pod_start=pod_start_delay,
            plugin_register=plugin_register_delay,
            slice_publish=slice_publish_delay,
            device_plugin_grace=device_plugin_grace,
        )
        t.serve(
            t.ServeOptions(
                host=host,
                port=port,
                kubeconfig_out=kubeconfig_out,
                state=state,
                tls=tls,
                seed=seed,
                faults=faults,
                pause_after=pause_after,
                pause_for=pause_for,
                access_log=access_log,
                nodes=nodes,
                example=example,
                time_scale=time_scale,
                delays=delays,
                repo=repo,
                root=root,
                vars_file=vars_file,
                secrets=tuple(secret or ()),
                write_example=write_example,
                node_faults=tuple(node_fault or ()),
                operator_delay=operator_delay,
                strict_health=strict_health,
                kubernetes_version=t.parse_kubernetes_version(kubernetes_version),
                flux_version=_flux_version(flux_version),
            )
        )

    @twin.command("proxy", help=_PROXY_HELP, epilog=_PROXY_EPILOG)
    def proxy(
        kubeconfig_out: Annotated[
            Path,
            typer.Option("--kubeconfig-out", help="Where to write the proxy's kubeconfig (0600)."),
        ],
        kubeconfig: _a.Kubeconfig = None,
        context: _a.Context = None,
        host: Annotated[str, typer.Option(help="Loopback address to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port; 0 picks a free one.")] = 0,
        seed: Annotated[int, typer.Option(help="Seed for faults.")] = 0,
        error_rate: ErrorRate = 0.0,
        error_codes: ErrorCodes = "500,503,429",
        retry_after: RetryAfter = 1,
        latency_ms: LatencyMs = 0.0,
        jitter_ms: JitterMs = 0.0,
        drop_watch_every: DropWatchEvery = 0.0,
        pause_after: PauseAfter = None,
        pause_for: PauseFor = 10.0,
        access_log: Annotated[
            bool,
            typer.Option(help="Log method, path and status of every request, on stderr."),
        ] = False,
    ) -> None:
        import gpushift_twin as t

        faults = _fault_config(
            seed=seed,
            error_rate=error_rate,
            error_codes=error_codes,
            retry_after=retry_after,
            latency_ms=latency_ms,
            jitter_ms=jitter_ms,
            drop_watch_every=drop_watch_every,
        )
        if not 0 <= port <= 65535:
            raise UsageError(f"--port must be between 0 and 65535, got {port}")
        t.check_loopback(listen=host)
        target = t.target_from_kubeconfig(kubeconfig, context)
        try:
            t.serve_proxy(
                target,
                t.ProxyOptions(
                    host=host,
                    port=port,
                    kubeconfig_out=kubeconfig_out,
                    faults=faults,
                    pause_after=pause_after,
                    pause_for=pause_for,
                    access_log=access_log,
                ),
            )
        except t.UnreachableError as err:
            _a.fail(_a.UNREACHABLE, str(err))

    @twin.command("inventory", help=_INVENTORY_HELP, epilog=_INVENTORY_EPILOG)
    def inventory(
        source: Annotated[
            Path, typer.Option("--from", help="`kubectl get nodes -o yaml` (or -o json) output.")
        ],
        out: Annotated[
            Path | None, typer.Option("--out", "-o", help="File to write (default: stdout).")
        ] = None,
    ) -> None:
        from gpushift_twin.cluster import inventory_from_nodes

        text = inventory_from_nodes(source, out=out)
        if out is None:
            sys.stdout.write(text)

    @twin.command("check-invariants", help=_CHECK_HELP, epilog=_CHECK_EPILOG)
    def check_invariants(kubeconfig: _a.Kubeconfig = None, context: _a.Context = None) -> None:
        from gpushift import kube
        from gpushift_twin import require_twin
        from gpushift_twin.cluster import fetch_violations

        with (
            _a.cluster_errors(),
            kube.connect(kubeconfig=kubeconfig, context=context, check_server=True) as client,
        ):
            require_twin(client)
            try:
                record = fetch_violations(client)
            except kube.KubeError as err:
                if err.code != 404:
                    raise
                _a.fail(_a.BAD_INPUT, "this twin runs no cluster (serve it with --nodes)")
        items = record.get("items") or []
        for v in items:
            state = "active" if v.get("active") else f"resolved {v.get('resolved')}"
            print(f"{v.get('reason')}\t{v.get('node')}\t{state}\t{v.get('message')}")
        if not items:
            print("no invariant violations recorded")
        raise typer.Exit(_a.FINDINGS if items else _a.OK)

    @twin.command("git-set", help=_GIT_SET_HELP, epilog=_GIT_SET_EPILOG)
    def git_set(
        target: Annotated[str, typer.Argument(help="A directory, or a git commit or branch.")],
        kubeconfig: _a.Kubeconfig = None,
        context: _a.Context = None,
        name: Annotated[str, typer.Option(help="GitRepository name.")] = "flux-system",
        namespace: Annotated[
            str, typer.Option("--namespace", "-n", help="GitRepository namespace.")
        ] = "flux-system",
    ) -> None:
        from gpushift import kube
        from gpushift_twin import require_twin
        from gpushift_twin.flux import git_set as switch

        with (
            _a.cluster_errors(),
            kube.connect(kubeconfig=kubeconfig, context=context, check_server=True) as client,
        ):
            require_twin(client)
            print(switch(client, target, name=name, namespace=namespace))

    @twin.command("wait-ready", help=_WAIT_HELP, epilog=_WAIT_EPILOG)
    def wait_ready(
        kubeconfig: _a.Kubeconfig = None,
        context: _a.Context = None,
        timeout: Annotated[float, typer.Option(help="Wall seconds to wait.")] = 300.0,
        wait_for_kubeconfig: Annotated[
            bool,
            typer.Option(
                "--wait-for-kubeconfig",
                help="Wait (within --timeout) for the kubeconfig to appear, as it does once a "
                "`twin serve` started in the background listens.",
            ),
        ] = False,
    ) -> None:
        import time

        # The deadline counts from the start: importing the twin's Flux room is not free.
        deadline = time.monotonic() + timeout

        from gpushift import kube
        from gpushift_twin.flux import wait_for_kubeconfig as appear
        from gpushift_twin.flux import wait_ready as wait

        paths = kube.kubeconfig_paths(kubeconfig)
        if wait_for_kubeconfig:
            with _progress("waiting for the kubeconfig") as show:
                if not appear(paths, deadline=deadline, on_pending=show):
                    _a.fail(
                        _a.TIMED_OUT,
                        f"no kubeconfig at {', '.join(map(str, paths))} after {timeout:g}s",
                    )
        with (
            _a.cluster_errors(),
            kube.connect(
                kubeconfig=kubeconfig, context=context, deadline=deadline, check_server=True
            ) as client,
            _progress("waiting for Flux") as show,
        ):
            pending = wait(client, timeout=max(deadline - time.monotonic(), 0.0), on_pending=show)
        for line in pending:
            print(line)
        if pending:
            _a.fail(_a.TIMED_OUT, f"not Ready after {timeout:g}s ({len(pending)} pending)")
        print("all Kustomizations and HelmReleases are Ready")

    @twin.command("export", help=_EXPORT_HELP, epilog=_EXPORT_EPILOG)
    def export(
        running: Annotated[
            bool, typer.Option("--twin", help="Read the running twin of the kubeconfig.")
        ] = False,
        kubeconfig: _a.Kubeconfig = None,
        context: _a.Context = None,
        state: Annotated[Path | None, typer.Option(help="A saved state file instead.")] = None,
        out: Annotated[
            Path | None, typer.Option("--out", "-o", help="File to write (default: stdout).")
        ] = None,
    ) -> None:
        import json

        import gpushift_twin as t

        if state is not None and (running or kubeconfig is not None or context is not None):
            raise UsageError("give --twin (a running twin) or --state FILE, not both")
        if state is None and not running and kubeconfig is None:
            raise UsageError("give --twin (a running twin) or --state FILE")
        with _a.cluster_errors():
            doc = t.export(
                state=state,
                access=None if state is not None else _a.access(kubeconfig, context),
            )
        if out is None:
            sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        else:
            t.write_list(out, doc)


@contextlib.contextmanager
def _progress(title: str) -> Iterator[Callable[[list[str]], None]]:
    """A ``show(pending)`` for a wait: a live rich panel on a terminal, else one stderr line
    each time what is pending changes."""
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        with Live(
            Text(title), console=Console(stderr=True), transient=True, refresh_per_second=4
        ) as live:

            def show_live(pending: list[str]) -> None:
                shown = pending[:15] + (
                    [f"… and {len(pending) - 15} more"] if len(pending) > 15 else []
                )
                live.update(Text("\n".join([f"{title}: {len(pending)} not Ready", *shown])))

            yield show_live
        return
    last: list[list[str]] = [[]]

    def show_plain(pending: list[str]) -> None:
        if pending != last[0]:
            last[0] = list(pending)
            print(
                f"{title}: {len(pending)} not Ready: {'; '.join(pending[:3])}"
                + (" …" if len(pending) > 3 else ""),
                file=sys.stderr,
            )

    yield show_plain
