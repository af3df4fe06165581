"""`gpushift check`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the `check` command to the CLI."""
    del app
