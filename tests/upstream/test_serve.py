"""`gpushift twin serve --control-plane upstream --bare`: an empty real cluster that stops
with everything it started on SIGTERM or SIGINT, and its refusals."""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from gpushift import upstream

ROOT = Path(__file__).resolve().parents[2]
GPUSHIFT = [sys.executable, "-m", "gpushift"]


def _gpushift(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GPUSHIFT, *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--control-plane", "upstream"],
            "--control-plane upstream needs --example or --nodes (the twin's agents on the "
            "real control plane), or --bare (an empty cluster)",
        ),
        (["--bare"], "--bare needs --control-plane upstream"),
        (
            ["--control-plane", "upstream", "--example", "homelab", "--time-scale", "10"],
            "--time-scale: only 1 on --control-plane upstream (real time; the virtual clock "
            "needs the twin's API server)",
        ),
        (
            ["--control-plane", "upstream", "--example", "homelab", "--state", "s.yaml"],
            "--state: not with --control-plane upstream (the twin's API server only)",
        ),
        (
            ["--control-plane", "upstream", "--example", "homelab", "--kubernetes-version", "1.35"],
            "--kubernetes-version: not with --control-plane upstream (the twin's API server only)",
        ),
        (
            ["--control-plane", "upstream", "--bare", "--kubernetes-version", "1.35"],
            "--kubernetes-version: not with --control-plane upstream (the twin's API server only)",
        ),
        (
            ["--control-plane", "upstream", "--example", "homelab", "--flux-version", "2.6"],
            "--flux-version: not with --control-plane upstream (the twin's API server only)",
        ),
        (
            ["--example", "homelab", "--flux-version", "2.5"],
            "--flux-version: choose from 2.6, 2.7, 2.8, 2.9, got '2.5'",
        ),
        (
            ["--control-plane", "upstream", "--repo", "."],
            "--repo needs --nodes",
        ),
        (
            ["--control-plane", "upstream", "--example", "homelab", "--error-rate", "0.1"],
            "fault flags: not with --example or --nodes on --control-plane upstream (use "
            "`gpushift twin proxy` in front of it)",
        ),
        (
            ["--control-plane", "upstream", "--bare", "--example", "homelab"],
            "--example: not with --control-plane upstream (the twin's API server only)",
        ),
        (
            ["--control-plane", "upstream", "--bare", "--state", "state.yaml"],
            "--state: not with --control-plane upstream (the twin's API server only)",
        ),
        (
            ["--control-plane", "upstream", "--bare", "--error-rate", "1.5"],
            "--error-rate must be between 0 and 1, got 1.5",
        ),
        (
            ["--control-plane", "upstream", "--bare", "--seed", "3"],
            "--seed: only with a fault flag (--error-rate, --latency-ms, --jitter-ms, "
            "--drop-watch-every, --pause-after) on --control-plane upstream",
        ),
        (
            ["--control-plane", "upstream", "--bare", "--host", "0.0.0.0"],
            "--control-plane upstream listens on 127.0.0.1 with TLS only",
        ),
    ],
)
def test_options_it_cannot_honour_are_refused(
    args: list[str], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "kubeconfig"
    proc = _gpushift("twin", "serve", *args, "--kubeconfig-out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"gpushift: error: {message}"]
    assert not out.exists()


def test_without_the_binaries_it_names_make_upstream(tmp_path: Path) -> None:
    env = {**os.environ, upstream.CACHE_ENV: str(tmp_path / "empty")}
    out = tmp_path / "kubeconfig"
    proc = _gpushift(
        "twin",
        "serve",
        "--control-plane",
        "upstream",
        "--bare",
        "--kubeconfig-out",
        str(out),
        env=env,
    )
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpushift: error: the upstream control plane")
    assert lines[0].endswith("run `make upstream`")
    assert not out.exists()


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid``, from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _assert_ended(pids: set[int]) -> None:
    """Every one of ``pids`` ends within 10 s."""
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)]


def _data_dirs(owner: int) -> list[Path]:
    out = []
    for root in (Path("/dev/shm"), Path("/tmp")):
        for path in root.glob("gpushift-upstream-*"):
            try:
                if int((path / "owner.pid").read_text()) == owner:
                    out.append(path)
            except (OSError, ValueError):
                continue
    return out


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / "kubeconfig"
    proc = subprocess.Popen(
        [
            *GPUSHIFT,
            "twin",
            "serve",
            "--control-plane",
            "upstream",
            "--bare",
            "--port",
            "0",
            "--kubeconfig-out",
            str(out),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("gpushift upstream control plane serving https://127.0.0.1:"), first
    assert proc.stdout.readline().strip() == f"export KUBECONFIG={out.resolve()}"
    return proc, out


@pytest.mark.upstream
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_every_process_and_leaves_no_data(sig: int, tmp_path: Path) -> None:
    proc, kubeconfig = _start(tmp_path)
    try:
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        got = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "ns", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert got.returncode == 0, got.stderr
        names = {i["metadata"]["name"] for i in json.loads(got.stdout)["items"]}
        assert {"default", "kube-system"} <= names
        # --bare: no nodes.
        nodes = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert nodes.returncode == 0 and nodes.stdout == ""
        children = _children(proc.pid)
        assert len(children) >= 4  # etcd, apiserver, controller manager, scheduler
        assert _data_dirs(proc.pid)
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _assert_ended(children)
    assert not _data_dirs(proc.pid)


@pytest.mark.upstream
def test_kill_9_takes_the_control_plane_with_it(tmp_path: Path) -> None:
    proc, _ = _start(tmp_path)
    children = _children(proc.pid)
    left = _data_dirs(proc.pid)
    assert children and left
    proc.kill()
    proc.wait()
    _assert_ended(children)
    # What a kill -9 leaves behind, the next start removes.
    plane = upstream.ControlPlane(controller_manager=False, scheduler=False, crds=False)
    with plane:
        assert not any(path.exists() for path in left)


@pytest.mark.upstream
def test_fault_flags_put_the_fault_proxy_in_front(tmp_path: Path) -> None:
    proc, kubeconfig = _start(
        tmp_path, "--error-rate", "1", "--error-codes", "429", "--retry-after", "7"
    )
    try:
        config = yaml.safe_load(kubeconfig.read_text())
        # The proxy's kubeconfig: a token of its own, no client certificate of the admin.
        (user,) = config["users"]
        assert set(user["user"]) == {"token"}
        server = config["clusters"][0]["cluster"]["server"]
        context = ssl.create_default_context(
            cadata=base64.b64decode(
                config["clusters"][0]["cluster"]["certificate-authority-data"]
            ).decode()
        )
        url = urlsplit(server)

        def get(path: str) -> tuple[int, dict[str, str], bytes]:
            conn = http.client.HTTPSConnection(
                url.hostname or "", url.port, context=context, timeout=30
            )
            conn.request("GET", path, headers={"Authorization": f"Bearer {user['user']['token']}"})
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body

        status, headers, body = get("/api/v1/namespaces")
        assert status == 429 and headers["retry-after"] == "7"
        assert json.loads(body) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the server has received too many requests and has asked us to try "
            "again later",
            "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": 7},
            "code": 429,
        }
        # kube-apiserver's own /readyz, through the proxy and never faulted.
        assert get("/readyz")[::2] == (200, b"ok")
        children = _children(proc.pid)
        assert len(children) >= 4
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _assert_ended(children)
    assert not _data_dirs(proc.pid)
