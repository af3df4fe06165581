"""`--kill-at` under the twin's faults, through the real CLI against a twin over HTTP: the kill
is made at the moment the cutover's own events show, or the run says why it was not and
exits 1. It is never skipped silently."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpushift_twin.rehearse import gpushift_argv

pytestmark = [pytest.mark.slow(seconds=130)]

FAULTS = ("--error-rate", "0.1", "--drop-watch-every", "5")


def _rehearse(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [*gpushift_argv(), "rehearse", "--example", "homelab", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=tmp_path,
    )
    assert done.stdout, done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_kill_in_the_drain_under_faults_is_made_or_said_not_to_be(tmp_path: Path) -> None:
    # Whether `drained` has anything left to wait for depends on how long the faults kept
    # `suspend` busy, so either outcome is allowed; a silent one is not.
    code, doc, err = _rehearse(tmp_path, "--kill-at", "drained:wait", *FAULTS, "--seed", "1")
    to_dra = doc["runs"][0]
    if to_dra["killedAt"] == "drained:wait":
        assert code == 0, err[-3000:]
        assert to_dra["attempts"] == 2
        killed = [s for s in to_dra["timeline"] if s["result"] == "killed"]
        assert [(s["name"], s["attempt"]) for s in killed] == [("drained", 1)]
        assert killed[0]["waits"]  # struck at the drain's wait, not before it
    else:
        assert code == 1
        assert doc["ok"] is False
        assert any(n.startswith("--kill-at drained:wait: no kill: ") for n in doc["notes"])
    assert [(r["to"], r["result"]) for r in doc["runs"]] == [
        ("dra", "done"),
        ("device-plugin", "done"),
    ]
    assert doc["violations"] == []


def test_a_moment_that_never_comes_fails_the_rehearsal_and_says_why(tmp_path: Path) -> None:
    # preflight never waits: the moment cannot come, faults or not.
    code, doc, _ = _rehearse(tmp_path, "--kill-at", "preflight:wait", *FAULTS, "--seed", "2")
    assert code == 1
    assert doc["ok"] is False
    to_dra = doc["runs"][0]
    assert to_dra["killedAt"] is None
    assert to_dra["attempts"] == 1
    missed = [n for n in doc["notes"] if n.startswith("--kill-at preflight:wait: no kill: ")]
    assert len(missed) == 1
    assert "preflight ended done in " in missed[0]
    assert missed[0].endswith("without waiting: what it waits for already held when it started")
    # Everything else went as a rehearsal does: both moves done, nothing violated.
    assert [(r["to"], r["result"]) for r in doc["runs"]] == [
        ("dra", "done"),
        ("device-plugin", "done"),
    ]
    assert doc["violations"] == []
