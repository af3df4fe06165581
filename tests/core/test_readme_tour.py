"""The README's tour runs as written from a fresh clone: its offline commands, with the
sample inputs under examples/ (the twin's lines have tests of their own under tests/twin)."""

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
        if line.startswith("gpushift ") and not line.startswith("gpushift twin")
    ]


def test_the_tour_has_offline_commands() -> None:
    assert len(_tour()) >= 6


@pytest.mark.parametrize("line", _tour())
def test_tour_command_runs_from_a_fresh_checkout(
    line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
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
