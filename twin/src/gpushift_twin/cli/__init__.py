"""The twin's commands on the ``gpushift`` command line: ``gpushift rehearse`` and
``gpushift twin``.

gpushift finds :func:`run` through this distribution's ``gpushift.commands`` entry points and
hands it the command line from the command's name on. Errors propagate to gpushift's ``main``,
which maps them to the one exit-code contract (docs/cli.md).
"""

from __future__ import annotations

import typer

from gpushift_twin.cli import _rehearse, _twin

__all__ = ["app", "run"]

app = typer.Typer(
    name="gpushift",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
_twin.register(app)
_rehearse.register(app)


def run(args: list[str], *, prog_name: str) -> object:
    """Run ``PROG ARGS`` where ``args[0]`` is ``twin`` or ``rehearse``; returns what the command
    returns and raises what it raises (``typer.Exit`` for its exit code, ``InputError``, click's
    usage errors), as gpushift's own commands do."""
    return app(args=args, prog_name=prog_name, standalone_mode=False)
