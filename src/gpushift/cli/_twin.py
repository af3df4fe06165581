"""`gpushift twin`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the `twin` command to the CLI."""
    del app
