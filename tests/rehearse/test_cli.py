"""`gpushift rehearse` on the command line: bad input is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift.cli import main
from gpushift_twin.rehearse import RehearseOptions, TwinOptions


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kill-at", "drain"], "--kill-at 'drain': expected STEP or STEP:wait"),
        (["--example", "homelab", "--repo", "."], "give exactly one of --example and --repo"),
        (["--example", "office"], "--example: choose homelab, got 'office'"),
        (["--repo", ".", "--target", ""], "--target: give a directory or a git revision"),
        (
            ["--example", "homelab", "--target", "."],
            "--target, --root, --nodes and --secret go with --repo",
        ),
        (["--time-scale", "0"], "--time-scale must be positive, got 0"),
        (["--error-rate", "1.5"], "--error-rate must be between 0 and 1, got 1.5"),
        (
            ["--control-plane", "upstream", "--time-scale", "100"],
            "--time-scale 100: only 1 on --control-plane upstream (real time",
        ),
        (["--flux-version", "2.3"], "--flux-version: choose from 2.6, 2.7, 2.8, 2.9, got '2.3'"),
        (
            ["--control-plane", "upstream", "--flux-version", "2.6"],
            "--flux-version: not with --control-plane upstream",
        ),
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


def test_upstream_without_the_binaries_exits_3_naming_make_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUSHIFT_UPSTREAM", str(tmp_path))
    assert main(["rehearse", "--control-plane", "upstream"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is not built" in err and "run `make upstream`" in err


def test_the_twin_and_proxy_command_lines_per_control_plane(tmp_path: Path) -> None:
    faults = {"error_rate": 0.1, "drop_watch_every": 5.0, "seed": 3}
    embedded = TwinOptions(time_scale=100, **faults)
    argv = embedded.argv(tmp_path / "k")
    assert argv[argv.index("--time-scale") + 1] == "100"
    assert argv[argv.index("--error-rate") + 1] == "0.1"
    assert "--control-plane" not in argv
    real = TwinOptions(time_scale=1, control_plane="upstream", **faults)
    argv = real.argv(tmp_path / "k")
    assert argv[argv.index("--control-plane") + 1] == "upstream"
    # twin serve refuses these with agents on upstream: the proxy takes the faults.
    assert not {"--time-scale", "--seed", "--error-rate", "--drop-watch-every"} & set(argv)
    proxy = real.proxy_argv(tmp_path / "k", tmp_path / "p")
    assert proxy[proxy.index("proxy") - 1] == "twin"
    assert proxy[proxy.index("--kubeconfig") + 1] == str(tmp_path / "k")
    assert proxy[proxy.index("--kubeconfig-out") + 1] == str(tmp_path / "p")
    assert proxy[proxy.index("--error-rate") + 1] == "0.1"
    assert proxy[proxy.index("--drop-watch-every") + 1] == "5"
    assert proxy[proxy.index("--seed") + 1] == "3"
    # The modelled Flux release goes to twin serve only when asked for.
    assert "--flux-version" not in argv
    older = TwinOptions(flux_version="2.6").argv(tmp_path / "k")
    assert older[older.index("--flux-version") + 1] == "2.6"


def test_defaults_per_control_plane() -> None:
    embedded, real = RehearseOptions(), RehearseOptions(control_plane="upstream")
    assert (embedded.scale, real.scale) == (100, 1)
    assert real.attempt_seconds > embedded.attempt_seconds
    assert real.settle_seconds > embedded.settle_seconds
