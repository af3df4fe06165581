"""`gpushift cutover` and `rollback` option parsing: usage errors exit 2 before any request."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift.cli import main
from gpushift.cli._cutover import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("1.5s", 1.5), ("250ms", 0.25)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cutover"], "--to: choose dra or device-plugin"),
        (["cutover", "--to", "gpu"], "--to: choose dra or device-plugin"),
        (
            ["cutover", "--to", "dra", "--merge", "x", "--revision", "y"],
            "give at most one of --merge and --revision",
        ),
        (
            ["cutover", "--to", "dra", "--resume", "--abort"],
            "give at most one of --resume and --abort",
        ),
        (
            ["cutover", "--to", "dra", "--source", "flux-system"],
            "--source: expected NAMESPACE/NAME, got 'flux-system'",
        ),
        (
            ["cutover", "--to", "dra", "--step-timeout", "10 minutes"],
            '--step-timeout: time: invalid duration "10 minutes"',
        ),
        (
            ["cutover", "--to", "dra", "--expect-shares", "0"],
            "--expect-shares must be at least 1, got 0",
        ),
        (
            ["rollback", "--plan", "--resume"],
            "--plan shows a new run; it does not go with --resume or --abort",
        ),
        (["cutover", "--to", "dra", "-o", "yaml"], "-o: choose text or json, got 'yaml'"),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*args, "--kubeconfig", str(tmp_path / "missing")])
    assert code == 2
    err = capsys.readouterr().err
    assert err == f"gpushift: error: {message}\n"


def test_unreadable_kubeconfig_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["cutover", "--to", "dra", "--plan", "--kubeconfig", str(tmp_path / "none")])
    assert code == 2
    assert f"{tmp_path / 'none'}: kubeconfig not found" in capsys.readouterr().err


def test_unreachable_cluster_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], instant_retries: list[float]
) -> None:
    kc = tmp_path / "kc"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: x, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
        "users: [{name: x, user: {token: t}}]\n"
    )
    code = main(["cutover", "--to", "dra", "--plan", "--kubeconfig", str(kc), "-o", "json"])
    assert code == 3
    assert '"exitCode": 3' in capsys.readouterr().out
    assert instant_retries[:3] == [0.2, 0.4, 0.8]


def test_live_step_list_shows_elapsed_and_what_it_waits_for() -> None:
    import io

    from rich.console import Console

    from gpushift.cli._cutover import _Live

    live = _Live()
    for event in (
        {"event": "run-start", "to": "dra", "run": "0123456789", "resumed": False},
        {"event": "step-start", "step": "suspend"},
        {
            "event": "change",
            "step": "suspend",
            "object": "Deployment/media/plex",
            "field": "spec.replicas",
            "before": 1,
            "after": 0,
        },
        {"event": "step-finish", "step": "suspend", "seconds": 1.5, "result": "done"},
        {"event": "step-start", "step": "old-allocator-gone"},
        {
            "event": "wait",
            "step": "old-allocator-gone",
            "for": "allocatable nvidia.com/gpu: k8s-1 5, k8s-2 0",
        },
    ):
        live({"kind": "CutoverEvent", "time": "2026-12-01T00:00:00.000Z", **event})
    out = io.StringIO()
    Console(file=out, width=120, color_system=None).print(live)
    text = out.getvalue()
    assert "cutover to dra (run 01234567)" in text
    assert "suspend" in text and "1.5s" in text
    assert "allocatable nvidia.com/gpu: k8s-1 5, k8s-2 0" in text
    assert "Deployment/media/plex spec.replicas: 1 → 0" in text
