"""A cutover that stops midway, driven as a user drives it (the CLI in a subprocess, against a
homelab twin over HTTP): a merge command that fails shows and journals its own last lines of
output; every stop (the failed merge, a timeout, the cluster refusing a request midway, a
second Ctrl-C, a run refused by the journal it left) prints what is left suspended, at 0 and
tainted, and the exact commands to go on or back, and those commands, run as printed, do."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.runbook.conftest import MEDIA, Env, homelab, wait_for

from gpushift import kube
from gpushift.runbook import JOURNAL_NAME
from gpushift_twin import FaultConfig

GATE = "merge-allowed"


def _run(
    env: Env, args: list[str], *, shell: bool = False, timeout: float = 240
) -> tuple[int, str, str]:
    """The CLI (or a command line as printed, through bash) in the test's directory."""
    cmd: Any = ["bash", "-c", args[0]] if shell else [sys.executable, "-m", "gpushift", *args]
    proc = subprocess.run(
        cmd,
        cwd=env.tmp,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return proc.returncode, proc.stdout, proc.stderr


def _result(stdout: str) -> dict[str, Any]:
    objects = [json.loads(x) for x in stdout.splitlines() if x.strip()]
    assert objects and objects[-1]["kind"] == "CutoverResult", stdout[-2000:]
    result: dict[str, Any] = objects[-1]
    return result


def _merge(env: Env, tree: Path) -> str:
    """A merge command that fails, after 30 lines of output on stdout and stderr, until the
    gate file exists; then it merges ``tree``."""
    fail = (
        'for i in $(seq 1 25); do echo "pushing object $i"; done; '
        "echo 'remote: Permission to home-ops denied' >&2; "
        "echo 'fatal: unable to access the repository' >&2; exit 3"
    )
    return f"if [ -e {GATE} ]; then {env.merge(tree)}; else {fail}; fi"


def _token(env: Env) -> str:
    doc = yaml.safe_load(env.twin.kubeconfig.read_text())
    token: str = doc["users"][0]["user"]["token"]
    return token


@pytest.mark.slow(seconds=60)
def test_a_failed_merge_then_its_commands_as_printed(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        kc, journal = str(env.twin.kubeconfig), str(tmp_path / "journal.json")
        merge = _merge(env, env.dra)
        access = ["--kubeconfig", kc, "--context", "gpushift-twin"]
        given = [*access, "--merge", merge, "--yes", "--step-timeout", "60s"]
        given += ["--journal", journal, "-o", "json"]
        code, out, err = _run(env, ["cutover", "--to", "dra", *given])
        result = _result(out)
        assert code == 1 and result["result"] == "failed", err[-3000:]
        assert result["reasons"] == ["merge: the merge command exited 3"]
        assert result["steps"][-1] == {**result["steps"][-1], "name": "merge", "result": "failed"}

        # The merge command's own output: its last 20 lines, in the order written, stdout and
        # stderr together; shown on stderr and in the result, and journaled.
        shown = result["mergeOutput"]
        assert shown["command"] == merge and shown["exitCode"] == 3
        assert shown["linesDropped"] == 7
        assert shown["lines"][0] == "pushing object 8"
        assert shown["lines"][-2:] == [
            "remote: Permission to home-ops denied",
            "fatal: unable to access the repository",
        ]
        assert "the merge command exited 3; its last 20 lines of output (of 27):" in err
        assert "  | fatal: unable to access the repository" in err
        assert env.journal()["data"]["mergeOutput"] == shown
        local = [json.loads(x) for x in Path(journal).read_text().splitlines()]
        assert any(r.get("key") == "mergeOutput" and r["value"] == shown for r in local)

        # What is left: every consumer's Flux owner suspended and workload at 0, every GPU
        # node tainted; as the journal recorded it, and as the cluster holds it.
        left = result["leftState"]
        assert left["run"] == result["run"] and left["step"] == "merge"
        assert left["merge"] == "failed" and left["unconfirmed"] == []
        suspended = {i["object"] for i in left["suspended"]}
        assert {f"Kustomization/media/{app}" for app in MEDIA} <= suspended
        for key in suspended:
            kind, ns, name = key.split("/")
            assert env.get(kind, ns, name, _api(kind))["spec"]["suspend"] is True
        stopped = {i["object"]: i["before"] for i in left["scaledToZero"]}
        assert {f"Deployment/media/{app}" for app in MEDIA} <= set(stopped)
        assert all(before == 1 for before in stopped.values()), stopped
        assert env.get("Deployment", "media", "plex")["spec"]["replicas"] == 0
        assert left["tainted"] == [
            {"object": f"Node/{n}", "taint": "gpushift.dev/cutover=dra:NoSchedule"}
            for n in ("k8s-1", "k8s-2", "k8s-3")
        ]
        assert "  tainted gpushift.dev/cutover=dra:NoSchedule: Node/k8s-1, Node/k8s-2, " in err
        assert "  at 0: InferenceService/ai/llama-nvidia (was 1), Deployment/media/" in err
        assert "  suspended: Kustomization/ai/llmkube-models, " in err

        # The exact commands: this invocation again, with --resume or --abort, shell-quoted;
        # never the kubeconfig's token.
        program = [sys.executable, "-m", "gpushift", "cutover"]
        resume = shlex.join([*program, "--resume", *given])
        tail = ["--yes", "--journal", journal, "-o", "json"]
        abort = shlex.join([*program, "--abort", *access, *tail])
        assert result["next"] == {"resume": resume, "abort": abort}
        assert f"to go on:   {resume}\n" in err and f"to go back: {abort}\n" in err
        assert _token(env) not in out + err

        # The README's rollback, run now, is refused by the unfinished journal: it names what
        # that journal left and the commands, without this invocation's merge.
        back = ["rollback", *access, "--merge", env.merge(env.plugin), "--yes", "--journal"]
        code, out, err = _run(env, [*back, journal, "-o", "json"])
        refused = _result(out)
        assert code == 4 and refused["result"] == "refused", err
        assert refused["leftState"]["tainted"] == left["tainted"]
        assert refused["next"]["resume"] == shlex.join(
            [sys.executable, "-m", "gpushift", "rollback", "--resume", *access, *tail]
        )
        assert "to go on:   " in err

        # The command to go on, as printed, once the merge can be made: the move finishes.
        (tmp_path / GATE).touch()
        code, out, err = _run(env, [resume], shell=True)
        done = _result(out)
        assert code == 0 and done["result"] == "done", (err[-3000:], done)
        assert "leftState" not in done and "next" not in done
        assert done["mergeOutput"]["exitCode"] == 0
        assert env.allocatable() == {"k8s-1": "0", "k8s-2": "0", "k8s-3": "0"}
        assert env.violations() == []


def _api(kind: str) -> str | None:
    return {
        "Kustomization": "kustomize.toolkit.fluxcd.io/v1",
        "HelmRelease": "helm.toolkit.fluxcd.io/v2",
    }.get(kind)


@pytest.mark.slow(seconds=40)
def test_a_timeout_in_text_then_abort_as_printed(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        kc = str(env.twin.kubeconfig)
        # The drain cannot finish: plex's pod holds a finalizer, so it stays Terminating, and
        # the drained step times out after the suspend step changed everything and before any
        # node was tainted (at time-scale 200 the other pods are gone in well under a second).
        plex = next(
            p["metadata"]["name"]
            for p in env.running("media")
            if p["metadata"]["labels"].get("app.kubernetes.io/name") == "plex"
        )
        with env.client() as c:
            c.patch(
                kube.ResourceRef.named("Pod"),
                name=plex,
                namespace="media",
                patch={"metadata": {"finalizers": ["example.com/hold"]}},
            )
        given = ["--kubeconfig", kc, "--merge", env.merge(env.dra), "--yes"]
        given += ["--step-timeout", "1ms"]
        code, out, err = _run(env, ["cutover", "--to", "dra", *given])
        assert code == 5, (out[-2000:], err[-3000:])
        assert "cutover to dra: timeout (exit 5)" in err
        assert "stopped at drained" in err
        assert "  suspended: Kustomization/ai/llmkube-models, " in err
        assert "  at 0: InferenceService/ai/llama-nvidia (was 1), Deployment/media/" in err
        assert "tainted" not in err and "the merge: not made" in err
        program = [sys.executable, "-m", "gpushift", "cutover"]
        abort = shlex.join([*program, "--abort", "--kubeconfig", kc, "--yes"])
        assert f"to go on:   {shlex.join([*program, '--resume', *given])}\n" in err
        assert f"to go back: {abort}\n" in err
        assert env.get("Deployment", "media", "plex")["spec"]["replicas"] == 0

        code, out, err = _run(env, [abort], shell=True)
        assert code == 0 and "cutover to dra: aborted (exit 0)" in out, (out, err)
        assert "to go on" not in out + err
        assert env.get("Deployment", "media", "plex")["spec"]["replicas"] == 1
        head = env.get("ConfigMap", "flux-system", JOURNAL_NAME)
        assert json.loads(head["data"]["state.json"])["state"] == "aborted"


@pytest.mark.slow(seconds=30)
def test_the_cluster_refusing_midway_then_abort_as_printed(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        kc = str(env.twin.kubeconfig)
        # The merge command turns the twin into one that refuses every request (403), then
        # exits 0: the journal's next write, that the merge is done, is refused.
        now = tmp_path / "refuse-now"
        merge = f"touch {now} && sleep 2"
        given = ["--kubeconfig", kc, "--merge", merge, "--yes", "--step-timeout", "60s"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpushift", "cutover", "--to", "dra", *given],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        wait_for(now.exists, timeout=120, what="the merge command")
        env.twin.faults.config = FaultConfig(error_rate=1.0, error_codes=(403,))
        out, err = proc.communicate(timeout=120)
        env.twin.faults.config = FaultConfig()
        assert proc.returncode == 4, (out[-2000:], err[-3000:])
        assert "gpushift: error: the cluster refused: " in err
        assert "stopped at merge" in err and "the merge: made (--abort does not undo it)" in err
        assert "  tainted gpushift.dev/cutover=dra:NoSchedule: Node/k8s-1, " in err
        program = [sys.executable, "-m", "gpushift", "cutover"]
        abort = shlex.join([*program, "--abort", "--kubeconfig", kc, "--yes"])
        assert f"to go on:   {shlex.join([*program, '--resume', *given])}\n" in err
        assert f"to go back: {abort}\n" in err

        code, out, err = _run(env, [abort], shell=True)
        assert code == 0 and "cutover to dra: aborted (exit 0)" in out, (out, err)
        assert env.get("Deployment", "media", "plex")["spec"]["replicas"] == 1
        assert not any(
            t.get("key") == "gpushift.dev/cutover"
            for n in env.objects("Node")
            for t in (n.get("spec") or {}).get("taints") or []
        )


@pytest.mark.slow(seconds=20)
def test_a_second_ctrl_c_still_says_what_is_left(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        kc = str(env.twin.kubeconfig)
        given = ["--kubeconfig", kc, "--merge", "echo merging; sleep 5", "--yes"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpushift", "cutover", "--to", "dra", *given],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if "merge: waiting for the merge" in line:
                break
        # The first Ctrl-C waits for the merge command; the second quits at once.
        proc.send_signal(signal.SIGINT)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err[-3000:]
        assert "stopped at merge" in err and "the merge: started, not known to have" in err
        assert "  tainted gpushift.dev/cutover=dra:NoSchedule: Node/k8s-1, " in err
        program = [sys.executable, "-m", "gpushift", "cutover"]
        assert f"to go on:   {shlex.join([*program, '--resume', *given])}\n" in err
        abort = shlex.join([*program, "--abort", "--kubeconfig", kc, "--yes"])
        assert f"to go back: {abort}\n" in err
