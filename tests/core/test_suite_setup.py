"""What the suite needs from outside the checkout, and what it does without it: pytest run as
`make unit` runs it (a subprocess, xdist workers) on a copy of the checkout with no ``shared``
directory beside it. The tests that need the fixtures fail, naming the directory, unless the
run opts out, which leaves their modules out and says so (docs/decisions.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from hypothesis import settings

ROOT = Path(__file__).resolve().parents[2]
#: One module that skips its fixture test itself (the skip becomes a failure), one that reads
#: the fixtures unguarded (left out when opted out).
MODULES = ("tests/conftest.py", "tests/core/test_yaml.py", "tests/rules/test_full_cluster.py")


def _clone(tmp: Path) -> Path:
    clone = tmp / "clone"
    for rel in ("pyproject.toml", *MODULES):
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, clone / rel)
    assert not (tmp / "shared").exists()
    return clone


def _pytest(clone: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "GPUSHIFT_NO_SHARED_FIXTURES"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "tests"],
        cwd=clone,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_the_shared_fixtures_their_tests_fail_naming_the_directory(
    tmp_path: Path,
) -> None:
    run = _pytest(_clone(tmp_path))
    missing = tmp_path / Path("shared", "fixtures")
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"the shared fixtures are missing: {missing} does not exist" in run.stdout
    assert "ERROR tests/core/test_yaml.py::test_every_fixture_file_parses" in run.stdout
    assert "FAILED tests/rules/test_full_cluster.py::" in run.stdout
    assert f"{missing}/full/" in run.stdout  # the unguarded module's own error names it
    assert " skipped" not in run.stdout.splitlines()[-1]


def test_opting_out_leaves_them_out_and_says_so(tmp_path: Path) -> None:
    run = _pytest(_clone(tmp_path), GPUSHIFT_NO_SHARED_FIXTURES="1")
    missing = tmp_path / Path("shared", "fixtures")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        f"GPUSHIFT_NO_SHARED_FIXTURES is set and {missing} does not exist: 1 test modules that "
        "need the shared fixtures were left out: tests/rules/test_full_cluster.py"
    ) in run.stdout
    assert ", 1 skipped in " in run.stdout.splitlines()[-1]


def test_hypothesis_sets_no_deadline() -> None:
    # tests/conftest.py: no property of this suite is about time.
    assert settings().deadline is None
