"""`gpushift render`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpushift._errors import UsageError
from gpushift._sharing import Allocator, parse_sharing

_HELP = """Render the GPU stack and its consumers as a Flux tree from one gpushift.yaml.

Each component gets an OCIRepository, a HelmRelease, a Flux Kustomization (ks.yaml) and a
kustomization.yaml, under the config's apps path. --allocator and --sharing override the
config. With --diff, nothing is written: the unified diff between the trees for two allocators
(--from, default the config's, and --to; --sharing for both sides, --to-sharing for the second)
is printed, which is the pull request to review.
"""

_EPILOG = (
    "Exit codes: 0 tree written (or --diff found no difference), 1 --diff printed a "
    "difference, 2 bad input: an invalid config or option combination (one line per problem, "
    "naming the field), or a non-empty --out without --force."
)


def register(app: typer.Typer) -> None:
    """Add the `render` command to the CLI."""

    @app.command("render", help=_HELP, epilog=_EPILOG)
    def render(
        config: Annotated[
            Path | None,
            typer.Argument(help="The gpushift.yaml to render.", show_default=False),
        ] = None,
        example: Annotated[
            str | None, typer.Option("--example", help="Render a built-in example: homelab.")
        ] = None,
        out: Annotated[
            Path | None, typer.Option("--out", help="Directory to write the tree to.")
        ] = None,
        force: Annotated[bool, typer.Option("--force", help="Replace a non-empty --out.")] = False,
        allocator: Annotated[
            Allocator | None,
            typer.Option("--allocator", help="Override the config's allocator."),
        ] = None,
        sharing: Annotated[
            str | None,
            typer.Option("--sharing", help="Override sharing: exclusive, N, memory or unlimited."),
        ] = None,
        diff: Annotated[
            bool, typer.Option("--diff", help="Print the diff between two allocators.")
        ] = False,
        from_allocator: Annotated[
            Allocator | None,
            typer.Option("--from", help="--diff: the allocator before (default: the config's)."),
        ] = None,
        to_allocator: Annotated[
            Allocator | None, typer.Option("--to", help="--diff: the allocator after.")
        ] = None,
        to_sharing: Annotated[
            str | None,
            typer.Option("--to-sharing", help="--diff: sharing after (default: as before)."),
        ] = None,
        schema: Annotated[
            bool, typer.Option("--schema", help="Print the config's JSON Schema and exit.")
        ] = False,
    ) -> None:
        from gpushift import render as r

        if schema:
            typer.echo(r.config_schema_text(), nl=False)
            return
        if (config is None) == (example is None):
            raise UsageError("give either a CONFIG file or --example NAME")
        base = r.load_config(config) if config is not None else r.load_example(str(example))
        shares = parse_sharing(sharing) if sharing is not None else None
        if diff:
            if out is not None or allocator is not None:
                raise UsageError("--diff takes --from and --to, not --out or --allocator")
            if to_allocator is None:
                raise UsageError("--diff needs --to ALLOCATOR")
            before = r.with_overrides(
                base,
                allocator=from_allocator or base.allocator,
                sharing=shares,
                display="--from",
            )
            after_shares = (
                parse_sharing(to_sharing, option="--to-sharing")
                if to_sharing is not None
                else shares
            )
            after = r.with_overrides(
                base, allocator=to_allocator, sharing=after_shares, display="--to"
            )
            text = r.diff_trees(r.render_tree(before), r.render_tree(after))
            typer.echo(text, nl=False)
            # As diff(1) and `kubectl diff`: 1 when the trees differ.
            raise typer.Exit(1 if text else 0)
        if from_allocator is not None or to_allocator is not None or to_sharing is not None:
            raise UsageError("--from, --to and --to-sharing only apply with --diff")
        if out is None:
            raise UsageError("--out DIR is required (or --diff to compare allocators)")
        cfg = base
        if allocator is not None or shares is not None:
            cfg = r.with_overrides(
                base,
                allocator=allocator,
                sharing=shares,
                display="--allocator/--sharing",
            )
        files = r.render_tree(cfg)
        r.write_tree(files, out, force=force)
        typer.echo(
            f"wrote {len(files)} files to {out} "
            f"(allocator {cfg.allocator.value}, sharing {cfg.sharing})"
        )
