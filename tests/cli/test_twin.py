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


def _status(kubeconfig: Path, path: str) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` with the kubeconfig's token: the status, headers and body, errors too."""
    import base64
    import urllib.error

    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    context = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    req = urllib.request.Request(
        cluster["server"] + path,
        headers={"Authorization": f"Bearer {config['users'][0]['user']['token']}"},
    )
    try:
        with urllib.request.urlopen(req, context=context) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


def test_serve_with_faults_serves_the_fault_proxy_in_front(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path, "--error-rate", "1", "--error-codes", "503", "--seed", "5")
    try:
        status, headers, body = _status(tmp_path / "kc", "/api/v1/namespaces")
        assert status == 503 and headers["retry-after"] == "1"
        assert json.loads(body)["message"] == (
            "the server is currently unable to handle the request"
        )
        assert _status(tmp_path / "kc", "/livez")[::2] == (200, b"ok")
        config = yaml.safe_load((tmp_path / "kc").read_text())
        assert config["clusters"][0]["cluster"]["server"] == url
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_with_faults_listens_on_loopback_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "kc"
    code = main(
        [
            "twin",
            "serve",
            "--host",
            "0.0.0.0",
            "--drop-watch-every",
            "5",
            "--kubeconfig-out",
            str(out),
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "gpushift: error: the fault proxy listens on loopback only (127.0.0.1, ::1, "
        "localhost), not 0.0.0.0"
    ]
    assert not out.exists()


def test_proxy_fronts_a_cluster_and_stops_on_sigint(tmp_path: Path) -> None:
    from gpushift_twin import run_twin

    out = tmp_path / "proxy.kubeconfig"
    with run_twin(tls=True, kubeconfig=tmp_path / "twin.kubeconfig") as twin:
        # --kubeconfig defaults to $KUBECONFIG, as for every cluster-facing command.
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpushift",
                "twin",
                "proxy",
                "--context",
                "gpushift-twin",
                "--kubeconfig-out",
                str(out),
                "--error-rate",
                "1",
                "--error-codes",
                "500",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "KUBECONFIG": str(twin.kubeconfig)},
        )
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first.startswith("gpushift fault proxy serving https://127.0.0.1:"), first
            assert proc.stdout.readline().strip() == f"export KUBECONFIG={out.resolve()}"
            assert oct(out.stat().st_mode & 0o777) == "0o600"
            assert twin.token not in out.read_text()
            status, _, body = _status(out, "/api/v1/namespaces")
            assert status == 500
            assert json.loads(body)["message"] == "Internal error occurred: injected fault"
            assert _status(out, "/healthz")[::2] == (200, b"ok")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_proxy_refuses_what_it_cannot_do_safely(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def kubeconfig(server: str, user: dict[str, object]) -> Path:
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.kubeconfig"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": server}}],
                    "users": [{"name": "u", "user": user}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        return path

    out = tmp_path / "never.kubeconfig"
    cases = [
        (
            [
                "--kubeconfig",
                str(kubeconfig("https://127.0.0.1:6443", {"token": "t"})),
                "--host",
                "0.0.0.0",
            ],
            "the fault proxy listens on loopback only (127.0.0.1, ::1, localhost), not 0.0.0.0",
        ),
        (
            ["--kubeconfig", str(kubeconfig("https://192.168.1.10:6443", {"token": "t"}))],
            "the fault proxy forwards to a loopback API server only, not https://192.168.1.10:6443",
        ),
        (
            [
                "--kubeconfig",
                str(kubeconfig("https://127.0.0.1:6443", {"exec": {"command": "aws"}})),
            ],
            "the fault proxy reaches the cluster with a bearer token or a client certificate; "
            "user 'u' uses exec",
        ),
    ]
    for args, message in cases:
        code = main(["twin", "proxy", *args, "--kubeconfig-out", str(out)])
        assert code == 2, args
        assert capsys.readouterr().err.strip().splitlines() == [f"gpushift: error: {message}"]
    assert not out.exists()


def test_proxy_in_front_of_nothing_is_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = tmp_path / "gone.kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "secret-token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    out = tmp_path / "never.kubeconfig"
    assert main(["twin", "proxy", "--kubeconfig", str(config), "--kubeconfig-out", str(out)]) == 3
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"gpushift: error: cannot reach the cluster: https://127.0.0.1:{port}: "
        f"Connect call failed ('127.0.0.1', {port})"
    ]
    assert "secret-token" not in captured.err + captured.out
    assert not out.exists()
