"""The option names of `gpushift cutover` and `gpushift rollback`, against the issue's list.

Both commands are built from one shared option set; this pins the CLI surface so sharing it
cannot drop or rename an option of either.
"""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from gpushift.cli import app

#: `gpushift cutover` as the issue writes it.
ISSUE = {
    "--to",
    "--kubeconfig",
    "--context",
    "--merge",
    "--revision",
    "--source",
    "--apps",
    "--expect-shares",
    "--plan",
    "--yes",
    "--resume",
    "--abort",
    "--step-timeout",
    "-o",
}
#: What docs/runbook.md adds: the verdict's Prometheus, the local journal, the long form of
#: -o, and the merge target the preflight checks.
DOCUMENTED = {"--prometheus-url", "--journal", "--output", "--repo", "--root", "--target"}


def _options(name: str) -> set[str]:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    command = group.commands[name]
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


def test_cutover_takes_the_issues_options_and_the_documented_ones() -> None:
    assert _options("cutover") == ISSUE | DOCUMENTED


def test_rollback_takes_the_same_options_but_the_direction() -> None:
    # "gpushift rollback [same options]": it goes back where the last journal came from.
    assert _options("rollback") == (ISSUE | DOCUMENTED) - {"--to"}
