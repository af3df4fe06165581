"""`gpushift rehearse`: the whole move on a twin, with a timeline and the monitor's result."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from gpushift_twin.cli._twin import Secrets

_HELP = """Rehearse the cutover on a twin: the move to DRA, a verdict, the rollback, a verdict.

Starts `gpushift twin serve` on 127.0.0.1 (--example homelab, or --repo PATH with --nodes,
default three nodes with one L4 each), waits for Flux to settle, then runs `gpushift cutover
--to dra --yes -o json` with the twin's merge (`gpushift twin git-set TARGET`) and
`gpushift rollback` the same way. Watches record GPU pods Running, nvidia.com/gpu
allocatable and ResourceSlices per node, and the invariant monitor's violations, for the
whole run.

--repo PATH alone is enough. Without --target, the target is the repository as `gpushift
migrate --to dra --write` writes it, on a copy (a refusal exits 2 with migrate's line).
Without --nodes, a label a GPU consumer's pod requires of its node (nodeSelector, required
node affinity In or Exists) that no node agent sets goes on one of the three nodes (on
each, for a DaemonSet), and the output says so, one line per label.

--kill-at STEP (or STEP:wait) SIGKILLs the cutover when that step starts (or first waits)
and runs it again with --resume; a run where that moment never comes (a step with nothing to
wait for) says why and exits 1. The fault flags pass through to the twin. --report writes
one self-contained HTML page: the timeline chart and a per-card map before and after.

It waits for what the move depends on: the GPU stack (device plugin, DRA driver,
gpu-operator), the GPU consumers, and their dependsOn, health-check and parent Kustomization
chains. The rest of the repository does not block; what of it never settles is reported with
what it waits for, and every Pending GPU pod with kube-scheduler's reason, its cause and the
fix. --strict-settle waits for every Flux object instead.

--control-plane upstream runs the twin's agents and Flux on kube-apiserver,
kube-controller-manager and kube-scheduler as `make upstream` built them (docs/twin.md, "A
real control plane"): real time (--time-scale 1 only), longer timeouts, and the faults served
by `gpushift twin proxy` in front of the twin.

Ctrl-C or SIGTERM stops every process the rehearsal started (the cutover first, so it
journals) within 10 s, removes its temporary directory and exits 130; the cutover's journal
is kept under .gpushift/rehearsals/.
"""

_EPILOG = (
    "Exit codes: 0 both moves done and no invariant violation; 1 a violation, a move not "
    "done, or a --kill-at moment that never came; 2 bad input; 3 the twin did not start or "
    "settle (on upstream: it is not built, run `make upstream`); 130 interrupted."
)


class _Output(StrEnum):
    text = "text"
    json = "json"


class _ControlPlane(StrEnum):
    embedded = "embedded"
    upstream = "upstream"


def register(app: typer.Typer) -> None:
    """Add `rehearse` to the CLI."""

    @app.command("rehearse", help=_HELP, epilog=_EPILOG)
    def rehearse_cmd(
        example: Annotated[
            str | None, typer.Option(help="Rehearse on an embedded cluster: homelab.")
        ] = None,
        repo: Annotated[
            Path | None, typer.Option(help="Rehearse on this GitOps repository.")
        ] = None,
        root: Annotated[
            str | None, typer.Option(help="Path of the root Kustomization in --repo.")
        ] = None,
        nodes: Annotated[
            Path | None, typer.Option(help="Hardware inventory for --repo (docs/inventory.md).")
        ] = None,
        target: Annotated[
            str | None,
            typer.Option(
                help="What the merge switches to: a directory or a git revision [default with "
                "--repo: the repository as `gpushift migrate --to dra --write` writes it]."
            ),
        ] = None,
        secret: Secrets = None,
        time_scale: Annotated[
            float | None,
            typer.Option(
                help="Cluster seconds per wall second on the twin [default: 100; 1, the only "
                "one, on upstream]."
            ),
        ] = None,
        error_rate: Annotated[
            float, typer.Option(help="Fraction of API requests the twin answers with an error.")
        ] = 0.0,
        drop_watch_every: Annotated[
            float, typer.Option(help="The twin closes each watch stream after this many seconds.")
        ] = 0.0,
        kill_at: Annotated[
            str | None,
            typer.Option(help="SIGKILL the cutover at STEP (or STEP:wait), then --resume it."),
        ] = None,
        report: Annotated[
            Path | None, typer.Option(help="Write a self-contained HTML report here.")
        ] = None,
        seed: Annotated[int, typer.Option(help="Seed for the twin's faults and names.")] = 0,
        output: Annotated[_Output, typer.Option("--output", "-o", help="text or json.")] = (
            _Output.text
        ),
        control_plane: Annotated[
            _ControlPlane,
            typer.Option(
                help="The twin's own API server (embedded), or the upstream control plane "
                "`make upstream` builds with the twin's agents on it (upstream)."
            ),
        ] = _ControlPlane.embedded,
        strict_settle: Annotated[
            bool,
            typer.Option(
                "--strict-settle",
                help="Wait for every Flux object to be Ready before the move, not only for "
                "what the move depends on.",
            ),
        ] = False,
        flux_version: Annotated[
            str | None,
            typer.Option(
                "--flux-version",
                metavar="2.N",
                help="The Flux release the twin models (2.6 to 2.9; default: the one --repo "
                "installs, else 2.9): its CRDs serve the older Flux API versions that release "
                "still serves (embedded only).",
            ),
        ] = None,
    ) -> None:
        from gpushift_twin import rehearse as r

        options = r.RehearseOptions(
            example=example if example is not None or repo is not None else "homelab",
            repo=repo,
            root=root,
            nodes=nodes,
            target=target,
            secrets=tuple(secret or ()),
            time_scale=time_scale,
            error_rate=error_rate,
            drop_watch_every=drop_watch_every,
            kill_at=r.KillPoint.parse(kill_at) if kill_at is not None else None,
            seed=seed,
            control_plane=control_plane.value,
            strict_settle=strict_settle,
            flux_version=flux_version,
        )
        try:
            result = r.rehearse(options, progress=r.Progress(enabled=True))
        except r.TwinStartError as err:
            print(f"gpushift: error: {err}", file=sys.stderr)
            raise typer.Exit(3) from None
        except r.RehearsalInterruptedError as err:
            print(f"gpushift rehearse: {err}", file=sys.stderr)
            raise typer.Exit(130) from None
        if report is not None:
            r.write_report(result, report)
            print(f"report: {report}", file=sys.stderr)
        if output is _Output.json:
            sys.stdout.write(json.dumps(r.as_json(result), indent=2) + "\n")
        else:
            sys.stdout.write(r.as_text(result))
        raise typer.Exit(result.exit_code)
