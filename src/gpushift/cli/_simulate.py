"""`gpushift simulate`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the `simulate` command to the CLI."""
    del app
