"""The ``gpushift`` command line (also ``kubectl gpushift`` as a kubectl plugin).

The CLI is thin: each command module parses options, calls one capability package and maps
the outcome to an exit code. Exit 2 is reserved for bad input and usage errors.
"""

from __future__ import annotations

import sys

import typer

from gpushift._errors import InputError
from gpushift.cli import _check, _cutover, _migrate, _rehearse, _render, _simulate, _twin, _verdict

app = typer.Typer(
    name="gpushift",
    help=(
        "Move NVIDIA GPU sharing between the device plugin and DRA without handing out a "
        "card twice."
    ),
    epilog=(
        "Exit codes: 0 clean, 1 findings (Pending pods, hazards, errors, an unhealthy "
        "verdict), 2 bad input, 3 cluster unreachable, 4 refused."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root() -> None:
    """Move NVIDIA GPU sharing between the device plugin and DRA safely."""


for _module in (_simulate, _check, _render, _migrate, _twin, _verdict, _cutover, _rehearse):
    _module.register(app)


@app.command()
def version() -> None:
    """Print the gpushift version."""
    from gpushift import __version__

    typer.echo(__version__)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; bad input gives one line on stderr and 2."""
    prog = "kubectl gpushift" if sys.argv and sys.argv[0].endswith("kubectl-gpushift") else None
    try:
        app(args=argv, prog_name=prog or "gpushift")
    except InputError as err:
        print(f"gpushift: error: {err}", file=sys.stderr)
        return 2
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
