"""The merge command ends with the cutover that runs it, kill -9 of the cutover included."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.runbook.conftest import Env, homelab

pytestmark = [
    pytest.mark.slow(seconds=20),
    pytest.mark.skipif(sys.platform != "linux", reason="prctl(PR_SET_PDEATHSIG)"),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(tmp_path_factory.mktemp("homelab")) as e:
        yield e


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_kill_9_of_the_cutover_ends_its_merge(env: Env) -> None:
    # `exec`: the shell becomes the merge, which gets the parent-death signal. (A shell that
    # forks its commands instead passes the signal to none of them.)
    journal = env.tmp / "killed.json"
    proc = env.start(
        "cutover",
        "--to",
        "dra",
        "--merge",
        "exec sleep 300",
        "--step-timeout",
        "5m",
        journal=journal,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("event") == "wait" and event.get("step") == "merge":
            break
    deadline = time.monotonic() + 30
    while not (merge := [c for c in _children(proc.pid) if "sleep" in _cmdline(c)]):
        assert time.monotonic() < deadline, "the merge did not start"
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while _alive(merge[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(merge[0])
    # The journal it left is resumable: --abort undoes what the run changed.
    code, events, err = env.cutover("cutover", "--abort", journal=journal)
    assert code == 0, err
    assert events[-1]["result"] == "aborted"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
