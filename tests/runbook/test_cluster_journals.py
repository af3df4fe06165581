"""The local journal belongs to its cluster: `gpushift cutover` run from one directory against
two homelab twins, as an operator with a staging and a production cluster runs it. A journal
the previous version left at ``./.gpushift/cutover-journal.json`` is moved under the key of the
cluster whose ConfigMap holds its run, and resumed there; an unfinished journal of one cluster
neither blocks the other's cutover nor is resumed by it, and is named in a note."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.runbook.conftest import Env, homelab, kill9

from gpushift import kube
from gpushift.runbook import cluster_journal, normalise_server, read_local

NS = kube.ResourceRef.named("Namespace", "v1")
ROOT = Path(__file__).resolve().parents[2]


def _gpushift(env: Env, cwd: Path, *args: str) -> subprocess.Popen[str]:
    """`gpushift ARGS --kubeconfig (the twin's) -o json --yes` in ``cwd``, no --journal."""
    cmd = [sys.executable, "-m", "gpushift", *args]
    cmd += ["--kubeconfig", str(env.twin.kubeconfig), "-o", "json", "--yes"]
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _run(env: Env, cwd: Path, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    proc = _gpushift(env, cwd, *args)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, [json.loads(x) for x in out.splitlines() if x.strip()], err


def _identity(env: Env) -> tuple[str, str]:
    """The twin's API server URL (from its kubeconfig, normalised) and kube-system's uid."""
    with env.client() as c:
        uid = str(c.get(NS, name="kube-system")["metadata"]["uid"])
        return normalise_server(c.server), uid


def _key(server: str, uid: str) -> str:
    return hashlib.sha256(f"{server}|{uid}".encode()).hexdigest()[:16]


def _killed_at_suspend(env: Env, cwd: Path, journal: Path) -> str:
    """A cutover to DRA killed -9 as its suspend step starts (preflight and snapshot done,
    nothing changed yet): an unfinished journal in the cluster and in ``journal``. Its run."""
    proc = _gpushift(env, cwd, "cutover", "--to", "dra", "--journal", str(journal))
    assert proc.stdout is not None
    run = ""
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("event") == "run-start":
            run = event["run"]
        if event.get("event") == "step-start" and event.get("step") == "suspend":
            kill9(proc)
            return run
    proc.communicate(timeout=30)
    raise AssertionError(f"the run ended before its suspend step: {proc.returncode}")


@pytest.mark.slow(seconds=120)
def test_journals_are_kept_per_cluster_and_the_old_place_is_migrated(tmp_path: Path) -> None:
    op = tmp_path / "op"
    op.mkdir()
    with homelab(tmp_path / "a") as a, homelab(tmp_path / "b") as b:
        a_server, a_uid = _identity(a)
        b_server, b_uid = _identity(b)
        assert (a_server, a_uid) != (b_server, b_uid)
        a_dir = op / ".gpushift" / "journals" / _key(a_server, a_uid)
        legacy = op / ".gpushift" / "cutover-journal.json"

        # The previous version's run against A left its journal at the old default place.
        run = _killed_at_suspend(a, op, legacy)
        assert run
        assert read_local(legacy.read_text()) is not None

        # Against B that journal does not block: the plan is clean, a note says why.
        code, out, err = _run(b, op, "cutover", "--to", "dra", "--plan")
        assert code == 0, (out[-1], err)
        assert out[-1]["result"] == "planned" and out[-1]["reasons"] == []
        assert f".gpushift/cutover-journal.json holds an unfinished journal (run {run})" in err
        assert legacy.exists()  # B's ConfigMap does not hold the run: not B's to move

        # Against A it is A's (A's ConfigMap holds the run): moved under A's key, and it
        # refuses a new run there as an unfinished journal does.
        code, out, err = _run(a, op, "cutover", "--to", "dra", "--plan")
        assert code == 4
        assert any(f"an unfinished cutover journal: run {run}" in r for r in out[-1]["reasons"])
        assert f"moved the journal of run {run} from .gpushift/cutover-journal.json" in err
        assert not legacy.exists()
        moved = read_local((a_dir / "cutover-journal.json").read_text())
        assert moved is not None and moved.run == run and moved.state == "running"
        assert json.loads((a_dir / "cluster.json").read_text()) == {
            "server": a_server,
            "kubeSystemUid": a_uid,
        }

        # A's journal, now in A's directory, neither blocks B nor is resumed by it.
        code, out, err = _run(b, op, "cutover", "--to", "dra", "--plan")
        assert code == 0, (out[-1], err)
        assert f"an unfinished journal of another cluster ({a_server}, run {run})" in err
        code, out, err = _run(b, op, "cutover", "--resume")
        assert code == 4
        assert out[-1]["reasons"] == ["no unfinished cutover journal to resume"]

        # --resume against A finds A's journal and finishes the move.
        code, out, err = _run(a, op, "cutover", "--resume", "--merge", a.merge(a.dra))
        assert code == 0, (out[-1], err)
        start = next(e for e in out if e.get("event") == "run-start")
        assert start["run"] == run and start["resumed"] is True
        assert out[-1]["result"] == "done" and out[-1]["run"] == run
        assert a.allocatable() == {"k8s-1": "0", "k8s-2": "0", "k8s-3": "0"}
        local = read_local((a_dir / "cutover-journal.json").read_text())
        stored = cluster_journal(
            a.get("ConfigMap", "flux-system", "gpushift-cutover-journal")["data"], []
        )
        assert local is not None and local.run == run and local.state == "done"
        assert stored is not None and stored.run == run and stored.state == "done"
        # B was never touched: no journal in its cluster, none in its directory.
        assert b.get("ConfigMap", "flux-system", "gpushift-cutover-journal") is None
        assert not (op / ".gpushift" / "journals" / _key(b_server, b_uid)).exists()
        assert b.allocatable() == {"k8s-1": "5", "k8s-2": "5", "k8s-3": "5"}

    # What the runs left in the working directory, the project's .gitignore covers.
    assert sorted(p.name for p in (op / ".gpushift" / "journals").iterdir()) == [a_dir.name]
    git = shutil.which("git")
    assert git is not None
    subprocess.run([git, "init", "-q", str(op)], check=True)
    shutil.copy(ROOT / ".gitignore", op / ".gitignore")
    status = subprocess.run(
        [git, "status", "--porcelain", "--untracked-files=all"],
        cwd=op,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status.splitlines() == ["?? .gitignore"]
