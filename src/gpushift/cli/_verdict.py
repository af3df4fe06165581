"""`gpushift snapshot`, `gpushift verdict` and `gpushift doctor`: the GPU health of a live
cluster, and why it is sick."""

from __future__ import annotations

import contextlib
import enum
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpushift._errors import UsageError
from gpushift.cli._access import cluster_failure

if TYPE_CHECKING:
    from gpushift.kube import Kube


class Output(enum.StrEnum):
    """Report formats."""

    TEXT = "text"
    JSON = "json"


_SNAPSHOT_HELP = """Write the GPU state of a cluster as one GpuSnapshot JSON document.

Nodes (nvidia.com/* capacity, allocatable, GFD labels), the GPU agents with their DaemonSets
and pods, ResourceSlices, DeviceClasses, ResourceClaims, GPU pods and the Flux objects on the
GPU path; with --prometheus-url also the label sets of the dcgm-exporter series. One
paginated list per kind, whatever the cluster's size. The schema is
docs/gpusnapshot.schema.json.

--map prints the per-card share map of both ledgers instead of the JSON (write the JSON
with -o); --svg FILE draws the same map. --from FILE reads a saved snapshot instead of a
cluster.
"""
_SNAPSHOT_EPILOG = (
    "Exit codes: 0 written, 2 bad input (unreadable kubeconfig or --from file), "
    "3 the cluster could not be reached, 4 the cluster refused a list."
)
_VERDICT_HELP = """Judge the GPU health of a snapshot (or of the live cluster): healthy, degraded
or broken, with reasons that each point at an object (docs/verdict.md lists every check).

--against PREVIOUS also judges what changed since an earlier snapshot, and whether it is the
expected allocator transition: flipped on every GPU node, the same slots per card, the same
consumers running, the same nodes carrying GPUs.
"""
_VERDICT_EPILOG = (
    "Exit codes: 0 healthy (and, with --against, the expected transition), 1 degraded, broken "
    "or an unexpected transition, 2 bad input, 3 the cluster could not be reached, 4 refused."
)
_DOCTOR_HELP = """Find out why GPUs are unhealthy: probes that reproduce an operator's
troubleshooting (plugin pod, allocatable, GFD labels and plugin logs of a node that does not
advertise; the DRA plugin waiting for its driver; conflicting claim configs; Pending bridged
requests; dcgm-exporter attribution), each with its evidence and the fix.
"""
_DOCTOR_EPILOG = (
    "Exit codes: 0 nothing wrong found, 1 problems found, 2 bad input, 3 the cluster could not "
    "be reached, 4 refused."
)

_Kubeconfig = Annotated[
    Path | None,
    typer.Option(help="Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)."),
]
_Context = Annotated[str | None, typer.Option(help="Kubeconfig context (default: current).")]
_Prometheus = Annotated[
    str | None,
    typer.Option(
        "--prometheus-url",
        help="A Prometheus-compatible URL to read the dcgm-exporter series from.",
    ),
]


@contextlib.contextmanager
def _cluster(kubeconfig: Path | None, context: str | None, what: str) -> Iterator[Kube]:
    """A client, a progress line on a terminal, and exit 3/4 for unreachable/refused."""
    from rich.console import Console

    from gpushift import kube

    console = Console(stderr=True)
    try:
        with (
            kube.connect(
                kubeconfig=kubeconfig, context=context, retries=3, check_server=True
            ) as client,
            console.status(what) if console.is_terminal else contextlib.nullcontext(),
        ):
            yield client
    except kube.KubeError as err:
        code, message = cluster_failure(err)
        print(f"gpushift: error: {message}", file=sys.stderr)
        raise typer.Exit(code) from None


def register(app: typer.Typer) -> None:
    """Add `snapshot`, `verdict` and `doctor` to the CLI."""
    app.command("snapshot", help=_SNAPSHOT_HELP, epilog=_SNAPSHOT_EPILOG)(snapshot)
    app.command("verdict", help=_VERDICT_HELP, epilog=_VERDICT_EPILOG)(verdict)
    app.command("doctor", help=_DOCTOR_HELP, epilog=_DOCTOR_EPILOG)(doctor)


def snapshot(
    kubeconfig: _Kubeconfig = None,
    context: _Context = None,
    prometheus_url: _Prometheus = None,
    out: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the JSON here (default: stdout).")
    ] = None,
    share_map: Annotated[
        bool, typer.Option("--map", help="Print the per-card share map of both ledgers.")
    ] = False,
    svg: Annotated[Path | None, typer.Option("--svg", help="Draw the share map as SVG.")] = None,
    source: Annotated[
        Path | None, typer.Option("--from", help="Read a saved snapshot instead of a cluster.")
    ] = None,
) -> None:
    """Write the GPU state of a cluster as a GpuSnapshot."""
    from gpushift import verdict as v

    if source is not None:
        if prometheus_url:
            raise UsageError("--prometheus-url reads a cluster; it does not go with --from")
        doc = v.load_snapshot(source)
    else:
        with _cluster(kubeconfig, context, "reading the cluster's GPU state…") as client:
            doc = v.take_snapshot(client, prometheus_url=prometheus_url)
    if out is not None:
        v.write_file(out, v.dump_snapshot(doc))
    if svg is not None:
        v.write_file(svg, v.svg_map(v.share_map(doc)))
    if share_map:
        sys.stdout.write(v.format_map(v.share_map(doc)))
    elif out is None:
        sys.stdout.buffer.write(v.dump_snapshot(doc))
    sys.stdout.flush()


def verdict(
    target: Annotated[
        str, typer.Argument(metavar="SNAPSHOT|live", help="A snapshot file, or live.")
    ] = "live",
    against: Annotated[
        Path | None, typer.Option(help="The snapshot taken before the transition.")
    ] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="Report format.")] = Output.TEXT,
    kubeconfig: _Kubeconfig = None,
    context: _Context = None,
    prometheus_url: _Prometheus = None,
) -> None:
    """Judge the GPU health of a snapshot or the live cluster."""
    from gpushift import verdict as v

    before = v.load_snapshot(against) if against is not None else None
    if target == "live":
        with _cluster(kubeconfig, context, "reading the cluster's GPU state…") as client:
            doc = v.take_snapshot(client, prometheus_url=prometheus_url)
    else:
        if prometheus_url:
            raise UsageError("--prometheus-url goes with live")
        doc = v.load_snapshot(Path(target))
    result = v.judge(doc, against=before)
    sys.stdout.write(v.format_verdict(result, output=output.value))
    sys.stdout.flush()
    raise typer.Exit(v.exit_code(result))


def doctor(
    node: Annotated[str | None, typer.Option(help="Only probe this node.")] = None,
    output: Annotated[Output, typer.Option("--output", "-o", help="Report format.")] = Output.TEXT,
    kubeconfig: _Kubeconfig = None,
    context: _Context = None,
    prometheus_url: _Prometheus = None,
) -> None:
    """Find out why a cluster's GPUs are unhealthy, with evidence and fixes."""
    from gpushift.doctor import format_report, run_doctor

    with _cluster(kubeconfig, context, "probing the cluster…") as client:
        report = run_doctor(client, node=node, prometheus_url=prometheus_url)
    sys.stdout.write(format_report(report, output=output.value))
    sys.stdout.flush()
    raise typer.Exit(report.exit_code)
