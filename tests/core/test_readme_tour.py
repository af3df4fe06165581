"""The README's tour runs as written from a fresh clone: its offline commands, in order in one
directory (migrate edits what render wrote), with the sample inputs under examples/.

Lines that need a running cluster (``--kubeconfig``), the user's own repository (``~/``) or a
whole twin (``twin``, ``rehearse``) have tests of their own under tests/twin, tests/runbook,
tests/verdict, tests/doctor and tests/rehearse."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from pathlib import Path

import pytest

from gpushift.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _tour() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## A short tour", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [
        line.split("#", 1)[0].strip()
        for line in block.splitlines()
        if line.startswith("gpushift ")
        and not line.startswith(("gpushift twin", "gpushift rehearse"))
        and "--kubeconfig" not in line
        and "~/" not in line
    ]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the whole tour, with the samples a fresh clone has."""
    root = tmp_path_factory.mktemp("tour")
    shutil.copytree(ROOT / "examples", root / "examples")
    return root


def test_the_tour_has_offline_commands() -> None:
    assert len(_tour()) >= 6


@pytest.mark.parametrize("line", _tour())
def test_tour_command_runs_from_a_fresh_checkout(
    line: str, checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = checkout
    words = shlex.split(line)
    out_file = None
    if ">" in words:
        out_file = tmp_path / words[words.index(">") + 1]
        words = words[: words.index(">")]
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        code = main(words[1:])
    finally:
        os.chdir(cwd)
    captured = capsys.readouterr()
    # 0 clean, 1 findings or a diff (the simulate sample leaves a pod Pending on purpose).
    assert code in (0, 1), captured.err
    assert "error" not in captured.err
    if out_file is not None:
        with contextlib.suppress(FileNotFoundError):
            out_file.write_text(captured.out)
        assert captured.out
