"""Reading, killing and resuming a cutover process (a stand-in that writes contract streams)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from gpushift._errors import InputError
from gpushift_twin.rehearse import CutoverCommand, KillPoint, run_attempt, run_direction

HERE = Path(__file__).parent
STANDIN = (sys.executable, str(HERE / "standin_cutover.py"), str(HERE / "streams"))


def test_command_line_follows_the_contract(tmp_path: Path) -> None:
    cmd = CutoverCommand(
        gpushift=("gpushift",),
        kubeconfig=tmp_path / "k",
        merge="gpushift twin git-set /x --kubeconfig k",
        journal=tmp_path / "j.json",
    )
    assert cmd.argv("dra", resume=False) == [
        "gpushift",
        "cutover",
        "--to",
        "dra",
        "--kubeconfig",
        str(tmp_path / "k"),
        "--merge",
        "gpushift twin git-set /x --kubeconfig k",
        "--journal",
        str(tmp_path / "j.json"),
        "--step-timeout",
        "10m",
        "--yes",
        "-o",
        "json",
    ]
    back = cmd.argv("device-plugin", resume=True)
    assert back[:2] == ["gpushift", "rollback"] and "--to" not in back
    assert back[-1] == "--resume"


def test_a_whole_stream_is_read_to_its_result(tmp_path: Path) -> None:
    seen: list[str] = []
    attempt = run_attempt(
        STANDIN,
        kill=None,
        timeout=60,
        stderr=tmp_path / "err",
        on_event=lambda e: seen.append(str(e.get("event", e["kind"]))),
    )
    assert attempt.exit_code == 0 and not attempt.killed
    assert len(attempt.events) == 27
    assert seen[0] == "run-start" and seen[-1] == "CutoverResult"
    assert attempt.result is not None and attempt.result["result"] == "done"


def test_kill_at_a_wait_kills_at_once_and_resume_finishes(tmp_path: Path) -> None:
    cmd = CutoverCommand(
        gpushift=(*STANDIN, "--hang-after", "12"),
        kubeconfig=tmp_path / "k",
        merge="true",
        journal=tmp_path / "j.json",
    )
    started = time.monotonic()
    attempts = run_direction(
        cmd, "dra", kill=KillPoint.parse("drained:wait"), timeout=60, stderr=tmp_path / "err"
    )
    # killed at the first wait of drained (line 11), long before the stand-in's 600 s hang
    assert time.monotonic() - started < 30
    first, second = attempts
    assert first.killed and first.exit_code == -9
    assert first.events[-1]["event"] == "wait" and first.events[-1]["step"] == "drained"
    assert len(first.events) == 11
    assert second.resumed and second.exit_code == 0
    assert second.events[0]["resumed"] is True


def test_a_hung_cutover_is_killed_at_the_bound(tmp_path: Path) -> None:
    attempt = run_attempt(
        [*STANDIN, "--hang-after", "3"], kill=None, timeout=1.0, stderr=tmp_path / "err"
    )
    assert attempt.exit_code == -9 and not attempt.killed
    assert len(attempt.events) == 3 and attempt.result is None


def test_a_line_outside_the_contract_stops_the_rehearsal(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "print('starting'); import time; time.sleep(600)"]
    started = time.monotonic()
    with pytest.raises(InputError, match=r"^gpushift rollback -o json:1: not JSON"):
        run_attempt(
            argv,
            kill=None,
            timeout=60,
            stderr=tmp_path / "err",
            source="gpushift rollback -o json",
        )
    assert time.monotonic() - started < 30  # the process was killed, not waited for
