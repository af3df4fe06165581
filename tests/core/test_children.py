"""Children that end with their parent: the parent-death signal and the group sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpushift._children import die_with_parent, stop

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="prctl(PR_SET_PDEATHSIG)")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def test_a_child_dies_with_its_parent_after_kill_9() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import subprocess, sys, time
                from gpushift._children import die_with_parent
                child = subprocess.Popen(["sleep", "60"], preexec_fn=die_with_parent())
                print(child.pid, flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.kill()
    parent.wait()
    assert _gone_within(child, 5.0)


def test_a_child_whose_parent_is_not_the_one_that_started_it_exits() -> None:
    # As when the parent dies between fork and prctl: the child's parent is then another
    # process (init, a subreaper), and the check after prctl ends the child.
    preexec = die_with_parent()
    assert preexec is not None
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 2
        try:
            grandchild = os.fork()
            if grandchild == 0:
                preexec()  # its parent is this child, not the test's process
                os._exit(0)
            code = os.waitstatus_to_exitcode(os.waitpid(grandchild, 0)[1])
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 1


def test_stop_sweeps_the_process_group_and_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"trap '' TERM; sleep 60 & echo $! > {pids}; wait"
    proc: subprocess.Popen[bytes] = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 10
    while not pids.exists() or not pids.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    grandchild = int(pids.read_text())
    started = time.monotonic()
    assert stop(proc, grace=0.5) is True
    assert time.monotonic() - started < 5
    assert proc.returncode == -signal.SIGKILL
    assert _gone_within(grandchild, 2.0)
    assert stop(proc, grace=0.5) is False  # already stopped: nothing to do


def test_stop_gives_a_child_that_ends_on_sigterm_its_exit() -> None:
    proc: subprocess.Popen[bytes] = subprocess.Popen(["sleep", "60"], start_new_session=True)
    assert stop(proc, grace=5.0) is True
    assert proc.returncode == -signal.SIGTERM
