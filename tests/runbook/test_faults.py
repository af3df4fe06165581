"""A wait that times out (exit 5, journal kept) and a --resume that completes; then both
directions with 10% of requests failing (500, 503, 429 with Retry-After) and every watch
stream cut after a second."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.runbook.conftest import homelab

from gpushift_twin import FaultConfig


@pytest.mark.slow(seconds=45)
def test_timeout_then_resume_then_faults_both_ways(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        journal = tmp_path / "journal.json"
        # No --merge and no merge made: the merge step waits for the source and times out.
        code, events, err = env.cutover(
            "cutover", "--to", "dra", "--step-timeout", "2s", journal=journal
        )
        result = events[-1]
        assert code == 5, err
        assert result["result"] == "timeout" and result["exitCode"] == 5
        assert [s["result"] for s in result["steps"]][-1] == "timeout"
        assert result["steps"][-1]["name"] == "merge"
        (reason,) = result["reasons"]
        assert reason.startswith("merge: timed out after 2s waiting for the merge: ")
        assert "GitRepository/flux-system/flux-system at main@sha1:" in reason
        waits = [e for e in events if e.get("event") == "wait" and e["step"] == "merge"]
        assert waits and waits[0]["for"].startswith("the merge: GitRepository")

        # The journal blocks a new run until it is resumed or aborted.
        code, events, _ = env.cutover("cutover", "--to", "dra", journal=journal)
        assert code == 4
        assert any(
            r.startswith("an unfinished cutover journal: run ") for r in events[-1]["reasons"]
        )

        # --resume with the merge now given continues where the journal stopped.
        code, events, err = env.cutover(
            "cutover",
            "--resume",
            "--merge",
            env.merge(env.dra),
            "--step-timeout",
            "90s",
            journal=journal,
        )
        result = events[-1]
        assert code == 0, (err, result)
        done = {s["name"]: s["result"] for s in result["steps"]}
        assert done["suspend"] == "skipped" and done["merge"] == "done"
        assert env.allocatable() == {"k8s-1": "0", "k8s-2": "0", "k8s-3": "0"}
        assert env.violations() == []

        env.twin.faults.config = FaultConfig(error_rate=0.1, drop_watch_every=1.0, seed=7)
        before = env.twin.faults.injected
        code, events, err = env.cutover(
            "rollback",
            "--merge",
            env.merge(env.plugin),
            "--step-timeout",
            "120s",
            journal=journal,
            timeout=400,
        )
        assert code == 0, (err[-2000:], events[-1])
        assert env.allocatable() == {"k8s-1": "5", "k8s-2": "5", "k8s-3": "5"}
        code, events, err = env.cutover(
            "cutover",
            "--to",
            "dra",
            "--merge",
            env.merge(env.dra),
            "--step-timeout",
            "120s",
            journal=journal,
            timeout=400,
        )
        assert code == 0, (err[-2000:], events[-1])
        assert env.twin.faults.injected - before > 20
        env.twin.faults.config = FaultConfig()
        assert env.allocatable() == {"k8s-1": "0", "k8s-2": "0", "k8s-3": "0"}
        assert len(env.running("media")) == 6
        assert env.violations() == []
