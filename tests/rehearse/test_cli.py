"""`gpushift rehearse` on the command line: bad input is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kill-at", "drain"], "--kill-at 'drain': expected STEP or STEP:wait"),
        (["--example", "homelab", "--repo", "."], "give exactly one of --example and --repo"),
        (["--example", "office"], "--example: choose homelab, got 'office'"),
        (["--repo", "."], "--repo needs --target DIR|REV"),
        (["--example", "homelab", "--target", "."], "--target, --root and --nodes go with --repo"),
        (["--time-scale", "0"], "--time-scale must be positive, got 0"),
        (["--error-rate", "1.5"], "--error-rate must be between 0 and 1, got 1.5"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rehearse", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_a_target_that_is_neither_directory_nor_revision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rehearse", "--repo", str(tmp_path), "--target", "no-such-branch"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: --target 'no-such-branch': neither a directory nor a git revision" in err
