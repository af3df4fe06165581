"""The ``gpushift`` command line (also ``kubectl gpushift`` as a kubectl plugin).

The CLI is thin: each command module parses options, calls one capability package and maps
the outcome to an exit code. Exit 2 is reserved for bad input and usage errors.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from gpushift._errors import InputError, UsageError
from gpushift.cli import _check, _cutover, _migrate, _render, _simulate, _verdict
from gpushift.cli._access import (
    BAD_INPUT,
    FINDINGS,
    OK,
    REFUSED,
    TIMED_OUT,
    UNREACHABLE,
    Context,
    Kubeconfig,
    Namespace,
    access,
    cluster_errors,
    cluster_failure,
    fail,
)

__all__ = [
    "BAD_INPUT",
    "FINDINGS",
    "OK",
    "REFUSED",
    "TIMED_OUT",
    "UNREACHABLE",
    "Context",
    "Kubeconfig",
    "Namespace",
    "access",
    "app",
    "cluster_errors",
    "cluster_failure",
    "fail",
    "main",
]

app = typer.Typer(
    name="gpushift",
    help=(
        "Move NVIDIA GPU sharing between the device plugin and DRA without handing out a "
        "card twice."
    ),
    epilog=(
        "Exit codes: 0 ok, 1 findings, unhealthy or a diff, 2 bad input or usage, 3 cluster "
        "unreachable, 4 refused, 5 timed out (docs/cli.md)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from gpushift import __version__

        typer.echo(f"gpushift {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the gpushift version and exit.",
        ),
    ] = False,
) -> None:
    """Move NVIDIA GPU sharing between the device plugin and DRA safely."""


for _module in (_simulate, _check, _render, _migrate, _verdict, _cutover):
    _module.register(app)

# The commands of the twin distribution (`pip install 'gpushift[twin]'`), found through its
# `gpushift.commands` entry points when one is run: the product never imports the twin, and a
# command that does not need it does not pay for the entry-point scan.
_PLUGIN_COMMANDS = {
    "twin": "A stand-in Kubernetes API server for rehearsals and tests (gpushift[twin]).",
    "rehearse": "Rehearse the cutover and the rollback on the twin (gpushift[twin]).",
}


def _run_plugin(name: str, ctx: typer.Context) -> object:
    from importlib.metadata import entry_points

    found = list(entry_points(group="gpushift.commands", name=name))
    if not found:
        raise UsageError(
            f"`gpushift {name}` comes with the twin, which is not installed: "
            "pip install 'gpushift[twin]'"
        )
    run = found[0].load()
    return run([name, *ctx.args], prog_name=ctx.find_root().info_name or "gpushift")


def _plugin_command(name: str, summary: str) -> None:
    @app.command(
        name,
        help=summary,
        add_help_option=False,
        context_settings={
            "allow_extra_args": True,
            "ignore_unknown_options": True,
            "allow_interspersed_args": False,
        },
    )
    def forward(ctx: typer.Context) -> object:
        return _run_plugin(name, ctx)


for _name, _summary in _PLUGIN_COMMANDS.items():
    _plugin_command(_name, _summary)


@app.command()
def version() -> None:
    """Print the gpushift version."""
    from gpushift import __version__

    typer.echo(__version__)


def _printable(text: str) -> str:
    """``text`` with every unprintable character but the newline escaped (``\\x0b``), so a
    file name that holds a line break or a control character cannot split or garble the one
    error line."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c == "\n" else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; bad input gives one line on stderr and 2."""
    prog = "kubectl gpushift" if sys.argv and sys.argv[0].endswith("kubectl-gpushift") else None
    try:
        # Not standalone: usage errors come back here and are printed as one line, like
        # every other bad input (click would print a usage block).
        code = app(args=argv, prog_name=prog or "gpushift", standalone_mode=False)
    except InputError as err:
        print(f"gpushift: error: {_printable(str(err))}", file=sys.stderr)
        return 2
    except typer.Exit as done:
        return int(done.exit_code)
    except typer.Abort:
        return 130
    except typer.TyperException as err:
        # Usage errors (typer's vendored click): exit 2, one line.
        ctx = getattr(err, "ctx", None)
        command = ctx.command_path if ctx is not None else (prog or "gpushift")
        message = err.format_message() if hasattr(err, "format_message") else str(err)
        if type(err).__name__ == "NoArgsIsHelpError":
            print(message, file=sys.stderr)  # a bare group: its help, as click prints it
            return 2
        print(f"gpushift: error: {message} (see {command} -h)", file=sys.stderr)
        return int(getattr(err, "exit_code", 2))
    except SystemExit as done:
        exit_code = done.code
        return exit_code if isinstance(exit_code, int) else (0 if exit_code is None else 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
