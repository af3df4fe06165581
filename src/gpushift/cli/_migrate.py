"""`gpushift migrate`."""

from __future__ import annotations

import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from gpushift._errors import UsageError


class Target(StrEnum):
    """The allocator a migration moves to."""

    DRA = "dra"
    DEVICE_PLUGIN = "device-plugin"
    #: gpu-operator 26.7's GPUCluster (its own DRA stack) in place of its ClusterPolicy.
    GPUCLUSTER = "gpucluster"


class Output(StrEnum):
    """What ``migrate`` prints."""

    DIFF = "diff"
    JSON = "json"


_HELP = """Edit a Flux repository to move its GPUs to another allocator, as a pull request.

Reads the repository with the GitOps model, plans every edit (file, path in the document, old
value, new value, reason) and applies them with ruamel.yaml round trips: comments, quotes, key
order, flow style, anchors and document markers are kept, and only the changed lines differ.
Without --write it prints the unified diff (git apply takes it) and a summary of what changed
and what needs a person. Either way the result is read back first (every file must parse; one
allocator, the same consumers, the promised capacity per card, no new check error); --write then
applies every file or none. See docs/migrate.md.
"""

_EPILOG = (
    "Exit codes: 0 nothing to do, or written; 1 a diff was shown; 2 bad input, or a structure "
    "gpushift will not edit, or a result that breaks the plan's promise (named by file and line; "
    "nothing is written)."
)


def _sharing(text: str, *, to: Target) -> int | str:
    value = text.strip().lower()
    if value in ("keep", "memory", "unlimited"):
        if value != "keep" and to is Target.DEVICE_PLUGIN:
            raise UsageError(
                f"--sharing {value} needs --to dra or gpucluster; the device plugin shares by N"
            )
        return value
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"--sharing must be keep, N, memory or unlimited, got {text!r}") from None
    least = 2 if to is Target.DEVICE_PLUGIN else 1
    if n < least:
        raise UsageError(f"--sharing {n}: --to {to.value} needs {least} or more")
    return n


# metadata.name of a ResourceClaimTemplate: a DNS subdomain (RFC 1123).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def register(app: typer.Typer) -> None:
    """Add the `migrate` command to the CLI."""

    @app.command("migrate", help=_HELP, epilog=_EPILOG)
    def migrate(
        path: Annotated[Path, typer.Argument(help="The repository (its root directory).")],
        to: Annotated[Target, typer.Option("--to", help="The allocator to move to.")],
        sharing: Annotated[
            str,
            typer.Option(
                "--sharing",
                help="keep (the old replica or share count), N, memory or unlimited.",
            ),
        ] = "keep",
        keep_old: Annotated[
            bool,
            typer.Option(
                "--keep-old",
                help="Keep the old allocator's files (no longer deployed) instead of deleting.",
            ),
        ] = False,
        template_name: Annotated[
            str,
            typer.Option("--template-name", help="The ResourceClaimTemplate of each namespace."),
        ] = "any-nvidia-gpu",
        memory_per_claim: Annotated[
            str | None,
            typer.Option(
                "--memory-per-claim",
                help="--sharing memory: the GPU memory each claim template asks for (4Gi).",
            ),
        ] = None,
        write: Annotated[
            bool, typer.Option("--write", help="Apply the edits (all files or none).")
        ] = False,
        output: Annotated[Output, typer.Option("-o", "--output", help="diff or json.")] = (
            Output.DIFF
        ),
    ) -> None:
        if len(template_name) > 253 or not _DNS_SUBDOMAIN.match(template_name):
            raise UsageError(
                f"--template-name {template_name!r} is not a valid object name (a lowercase "
                "RFC 1123 subdomain)"
            )
        from gpushift.migrate import Options
        from gpushift.migrate import migrate as run

        options = Options(
            to=to.value,
            sharing=_sharing(sharing, to=to),  # type: ignore[arg-type]
            keep_old=keep_old,
            template=template_name,
            memory_per_claim=memory_per_claim,
        )
        result = run(path, options, write=write)
        if output is Output.JSON:
            sys.stdout.write(result.to_json())
        else:
            if not write:
                sys.stdout.write(result.diff)
            sys.stderr.write(result.summary())
        raise typer.Exit(result.exit_code)
