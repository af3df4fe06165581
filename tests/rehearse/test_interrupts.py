"""Ctrl-C, SIGTERM and kill -9 of `gpushift rehearse`: nothing it started outlives it.

Each test runs the real CLI in a subprocess against its homelab twin over HTTP, with a
``TMPDIR`` and a marker variable of its own. Every process the rehearsal starts, and every
process those start, inherits both, so the check reads ``/proc/*/environ`` for the marker
(not the tool's own report), and the filesystem for what is left in ``TMPDIR``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushift_twin.rehearse import gpushift_argv

pytestmark = [
    pytest.mark.slow(seconds=60),
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc"),
]

#: The issue's bound: one Ctrl-C stops everything within 10 s.
BOUND = 10.0


class Run:
    """``gpushift rehearse --example homelab -o json`` in a subprocess of its own."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.mark = uuid.uuid4().hex
        self.tmp = tmp_path / "tmp"
        self.cwd = tmp_path / "cwd"
        self.tmp.mkdir()
        self.cwd.mkdir()
        self.err = tmp_path / "rehearse.stderr"
        env = {**os.environ, "TMPDIR": str(self.tmp), "GPUSHIFT_TEST_MARK": self.mark}
        with self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                [*gpushift_argv(), "rehearse", "--example", "homelab", "-o", "json", *args],
                stdout=subprocess.DEVNULL,
                stderr=err,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=env,
            )

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, text: str, *, timeout: float = 300.0) -> None:
        """Until the rehearsal's progress on stderr shows ``text``."""
        deadline = time.monotonic() + timeout
        while text not in self.stderr():
            assert self.proc.poll() is None, f"ended {self.proc.returncode}: {self.stderr()}"
            assert time.monotonic() < deadline, f"no {text!r} in {timeout:g}s: {self.stderr()}"
            time.sleep(0.1)

    def wait_for_process(self, word: str, *, timeout: float = 60.0) -> None:
        """Until a process of this run has ``word`` in its command line."""
        deadline = time.monotonic() + timeout
        while not any(word in cmd for _, cmd in self.processes()):
            assert time.monotonic() < deadline, f"no process with {word!r}: {self.stderr()}"
            time.sleep(0.05)

    def processes(self) -> list[tuple[int, str]]:
        """Every live process that carries this run's marker (the test's own pid aside)."""
        found = []
        needle = f"GPUSHIFT_TEST_MARK={self.mark}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue  # gone meanwhile, or another user's
            if needle in environ.split(b"\0"):
                found.append(
                    (int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace"))
                )
        return found

    def survivors(self, *, within: float) -> list[tuple[int, str]]:
        """The marked processes still alive ``within`` seconds from now (polled)."""
        deadline = time.monotonic() + within
        while (left := self.processes()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return left

    def left_in_tmp(self) -> list[str]:
        return sorted(str(p.relative_to(self.tmp)) for p in self.tmp.rglob("*"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid, _ in self.processes():  # only this run's, should a test fail midway
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[type[Run]]:
    started: list[Run] = []

    class Tracked(Run):
        def __init__(self, path: Path, *args: str) -> None:
            super().__init__(path, *args)
            started.append(self)

    yield Tracked
    for r in started:
        r.stop()


def _interrupt(r: Run, sig: signal.Signals) -> tuple[int, float, str]:
    """Send ``sig``; return the exit code, the seconds it took, and the last stderr line."""
    sent = time.monotonic()
    r.proc.send_signal(sig)
    code = r.proc.wait(BOUND + 20)
    took = time.monotonic() - sent
    return code, took, r.stderr().strip().splitlines()[-1]


def _nothing_left(r: Run) -> None:
    assert r.survivors(within=1.0) == []
    assert r.left_in_tmp() == []  # the work directory, kubeconfigs, the twin's checkouts
    assert not list(r.cwd.rglob("*.kubeconfig"))


def test_ctrl_c_while_the_twin_settles(run: type[Run], tmp_path: Path) -> None:
    r = run(tmp_path)
    r.wait_for_process("twin serve")
    time.sleep(0.3)
    assert "cutover to dra" not in r.stderr()
    code, took, line = _interrupt(r, signal.SIGINT)
    assert code == 130
    assert took < BOUND
    assert line.startswith("gpushift rehearse: interrupted by Ctrl-C during starting the twin")
    assert "stopped 1 process" in line
    assert "journal" not in line  # no cutover ran
    _nothing_left(r)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_interrupt_during_the_cutover_keeps_its_journal(
    run: type[Run], tmp_path: Path, sig: signal.Signals
) -> None:
    r = run(tmp_path)
    r.wait_for("cutover to dra: suspend")
    code, took, line = _interrupt(r, sig)
    assert code == 130
    assert took < BOUND
    by = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    assert line.startswith(f"gpushift rehearse: interrupted by {by} during cutover to dra")
    assert "stopped 2 processes" in line  # the cutover and the twin
    _nothing_left(r)
    # The cutover got SIGTERM and stopped between two changes: its journal is kept, with the
    # run unfinished (what --resume continues).
    kept = line.rpartition("the cutover journal is kept at ")[2]
    journal = [json.loads(x) for x in (r.cwd / kept).read_text(encoding="utf-8").splitlines()]
    assert journal[0]["kind"] == "CutoverJournal"
    assert Path(kept).parent.name == journal[0]["run"]
    steps = [o["step"] for o in journal if o.get("op") == "step"]
    assert "verdict" not in [s["name"] for s in steps if "result" in s]
    # It stopped itself (a SIGKILL would leave the step open): the step ends failed.
    assert steps[-1]["result"] == "failed"


def test_ctrl_c_during_the_rollback(run: type[Run], tmp_path: Path) -> None:
    r = run(tmp_path)
    r.wait_for("cutover to device-plugin: suspend")
    code, took, line = _interrupt(r, signal.SIGINT)
    assert code == 130
    assert took < BOUND
    assert line.startswith(
        "gpushift rehearse: interrupted by Ctrl-C during cutover to device-plugin"
    )
    assert "the cutover journal is kept at .gpushift/rehearsals/" in line
    _nothing_left(r)


def test_kill_9_of_the_rehearsal_takes_its_children(run: type[Run], tmp_path: Path) -> None:
    r = run(tmp_path)
    r.wait_for("cutover to dra: suspend")
    assert any("twin serve" in cmd for _, cmd in r.processes())
    assert any(" cutover " in cmd for _, cmd in r.processes())
    r.proc.kill()
    r.proc.wait()
    # The kernel's parent-death signal: no cleanup runs, yet no child survives.
    assert r.survivors(within=5.0) == []


def test_kill_9_during_the_merge_takes_the_merge_too(run: type[Run], tmp_path: Path) -> None:
    # Also while the cutover runs its merge command, `twin git-set`: a grandchild the
    # rehearsal did not start itself.
    r = run(tmp_path)
    r.wait_for_process("git-set", timeout=120)
    r.proc.kill()
    r.proc.wait()
    assert r.survivors(within=5.0) == []
