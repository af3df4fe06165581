"""`gpushift check`: static checks of a Flux GitOps repository's GPU setup."""

from __future__ import annotations

import enum
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

_EPILOG = (
    "Exit codes: 0 no error findings (warnings and info may be printed), 1 at least one error "
    "finding, 2 bad usage or input (a path that does not exist, an unknown --base revision). "
    "Rules are documented in docs/rules.md."
)


class OutputFormat(enum.StrEnum):
    """Report formats."""

    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"


def register(app: typer.Typer) -> None:
    """Add the `check` command to the CLI."""
    app.command(name="check", epilog=_EPILOG)(check)


def check(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH",
            help="Repository directories or files, each checked as its own repository; paths "
            "in findings are relative to it (to the first with --merge-paths).",
            show_default=False,
        ),
    ],
    base: Annotated[
        str | None,
        typer.Option(
            "--base",
            metavar="GITREV",
            help="Compare with the tree at this git revision (ResourceClaimTemplate changes).",
        ),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="Report format.")
    ] = OutputFormat.TEXT,
    merge_paths: Annotated[
        bool,
        typer.Option(
            "--merge-paths",
            help="Check all PATHs as one repository (by default each PATH is its own).",
        ),
    ] = False,
    kubernetes_version: Annotated[
        str,
        typer.Option(
            "--kubernetes-version",
            metavar="1.N",
            help="The cluster's Kubernetes release, for rules whose upstream behaviour "
            "changed with it (dra-preemption-lost).",
        ),
    ] = "1.37",
) -> None:
    """Check GPU allocator, sharing and claim settings in a Flux or Argo CD repository."""
    from gpushift._errors import UsageError
    from gpushift.rules import parse_kubernetes_version, run_checks

    try:
        version = parse_kubernetes_version(kubernetes_version)
    except ValueError as err:
        raise UsageError(f"--kubernetes-version: {err}") from None
    report = run_checks(paths, base=base, merge_paths=merge_paths, kubernetes_version=version)
    if output is OutputFormat.JSON:
        text = report.to_json()
    elif output is OutputFormat.SARIF:
        text = report.to_sarif()
    else:
        colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        text = report.to_text(colour=colour)
    sys.stdout.write(text)
    sys.stdout.flush()
    raise typer.Exit(report.exit_code)
