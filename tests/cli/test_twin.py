"""`gpushift twin serve` and `gpushift twin export` as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from gpushift.cli import main

STATE = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: kept, namespace: default}
  data: {a: b}
"""


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpushift",
            "twin",
            "serve",
            "--port",
            "0",
            "--kubeconfig-out",
            str(tmp_path / "kc"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("gpushift twin serving https://127.0.0.1:"), first
    return proc, first.split()[-1]


def _request(kubeconfig: Path, method: str, path: str, body: object = None) -> object:
    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    import base64

    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    req = urllib.request.Request(
        cluster["server"] + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {config['users'][0]['user']['token']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(req, context=context) as resp:
        return json.loads(resp.read())


def test_serve_loads_state_and_saves_it_on_exit(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(STATE)
    proc, _url = _serve(tmp_path, "--state", str(state))
    try:
        kc = tmp_path / "kc"
        assert oct(kc.stat().st_mode & 0o777) == "0o600"
        got = _request(kc, "GET", "/api/v1/namespaces/default/configmaps/kept")
        assert got["data"] == {"a": "b"}  # type: ignore[index]
        _request(
            kc, "POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "added"}}
        )
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    token = yaml.safe_load((tmp_path / "kc").read_text())["users"][0]["user"]["token"]
    assert token not in _out and token not in err
    saved = yaml.safe_load(state.read_text())
    names = {(o["kind"], o["metadata"]["name"]) for o in saved["items"]}
    assert {("ConfigMap", "kept"), ("ConfigMap", "added")} <= names


def test_bad_state_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text("apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushift",
            "twin",
            "serve",
            "--port",
            "0",
            "--state",
            str(state),
            "--kubeconfig-out",
            str(tmp_path / "kc"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f'gpushift: error: {state}:1: Gizmo/g: no matches for kind "Gizmo" in version "v1"\n'
    )
    assert not (tmp_path / "kc").exists()


def test_export_of_a_state_file_writes_a_list(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(STATE)
    out = tmp_path / "export.json"
    assert main(["twin", "export", "--state", str(state), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "List"
    assert ("ConfigMap", "kept") in {(o["kind"], o["metadata"]["name"]) for o in doc["items"]}


def test_export_needs_exactly_one_source() -> None:
    assert main(["twin", "export"]) == 2


def test_help_documents_exit_codes() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "gpushift", "twin", "serve", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert "Exit codes: 0 stopped cleanly" in done.stdout


def test_sigterm_ends_open_watches_and_saves_state_promptly(tmp_path: Path) -> None:
    # aiohttp waits up to 60 s for open handlers; an open watch must not hold the exit.
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    state = tmp_path / "state.yaml"
    state.write_text(STATE)
    proc, _ = _serve(tmp_path, "--state", str(state))
    watch = subprocess.Popen(
        [kubectl, "--kubeconfig", str(tmp_path / "kc"), "get", "configmaps", "-A", "-w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert watch.stdout is not None
        watch.stdout.readline()  # the header: the watch is open
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        assert time.monotonic() - started < 10
        assert proc.returncode == 0
        assert "kept" in state.read_text()
    finally:
        watch.kill()
        watch.wait()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_wait_ready_without_a_kubeconfig_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "never-written.kubeconfig"
    code = main(["twin", "wait-ready", "--kubeconfig", str(missing), "--timeout", "0.3"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"gpushift: error: {missing}: kubeconfig not found")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
