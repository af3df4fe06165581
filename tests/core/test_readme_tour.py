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
import subprocess
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


#: Options whose value is a file or directory the command writes (``-o`` only when the value
#: names a file: ``-o json`` is a format).
_WRITES = ("-o", "--out", "--kubeconfig-out", "--report", "--svg", ">")


def _tour_writes() -> set[str]:
    """Every path the tour's lines write in the working directory, from the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## A short tour", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    out: set[str] = set()
    for line in joined.splitlines():
        words = shlex.split(line.split(" #", 1)[0].strip().rstrip("&"), comments=True)
        for i, word in enumerate(words[:-1]):
            value = words[i + 1]
            if word in _WRITES and (word != "-o" or "." in value) and not value.startswith("~"):
                out.add(value.removeprefix("./").rstrip("/"))
        if words[:2] == ["gpushift", "cutover"] or words[:2] == ["gpushift", "rollback"]:
            out.add(".gpushift/journals/0123456789abcdef/cutover-journal.json")
    return out


def test_gitignore_covers_what_the_tour_writes(tmp_path: Path) -> None:
    git = shutil.which("git")
    assert git is not None, "git is needed to read .gitignore as git does"
    writes = _tour_writes()
    # Hand-read from the README: the files and trees its lines write.
    assert writes >= {
        "rehearsal.html",
        "rehearsal.json",
        "gpushift.sarif",
        "out",
        "homelab",
        "twin.kubeconfig",
        "faulty.kubeconfig",
        "now.json",
        "share-map.svg",
        "sick.kubeconfig",
        "nodes.k8s.yaml",
        "nodes.yaml",
    }, writes
    subprocess.run([git, "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    for rel in writes:
        path = tmp_path / rel
        if "." in Path(rel).name:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
        else:  # a tree: render --out writes files under it
            (path / "kubernetes").mkdir(parents=True)
            (path / "kubernetes" / "kustomization.yaml").write_text("x")
    status = subprocess.run(
        [git, "status", "--porcelain", "--untracked-files=all"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status.splitlines() == ["?? .gitignore"]


def test_gitignore_ignores_nothing_tracked() -> None:
    git = shutil.which("git")
    assert git is not None
    listed = subprocess.run(
        [git, "ls-files", "-i", "-c", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0 and "not a git repository" in listed.stderr:
        pytest.skip("not a git checkout (an unpacked archive): nothing is tracked")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == ""
