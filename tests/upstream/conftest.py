"""What the upstream tier's scenario modules share: a `gpushift twin serve` process on either
control plane, the official client on its kubeconfig, and polling.

:func:`served` starts the process the way an operator does and reads its banner; the tests
drive it from outside only (the official Kubernetes client, kubectl, the CLI)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]
GPUSHIFT = [sys.executable, "-m", "gpushift"]


@contextmanager
def served(
    kubeconfig: Path, *args: str, control_plane: str = "upstream"
) -> Iterator[subprocess.Popen[str]]:
    """`gpushift twin serve --control-plane CONTROL_PLANE ARGS --port 0` writing its
    kubeconfig to ``kubeconfig``; yields the process once its banner is printed. Leaving
    stops it with SIGTERM, which must exit 0 (unless the body failed: then it is killed)."""
    proc = subprocess.Popen(
        [
            *GPUSHIFT,
            "twin",
            "serve",
            "--control-plane",
            control_plane,
            *args,
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("gpushift twin serving https://127.0.0.1:"), first
        assert proc.stdout.readline().strip() == f"export KUBECONFIG={kubeconfig.resolve()}"
        yield proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def api_client(kubeconfig: Path) -> client.ApiClient:
    """The official client on ``kubeconfig``."""
    return config.new_client_from_config(config_file=str(kubeconfig))


def core(kubeconfig: Path) -> client.CoreV1Api:
    """The official client's core/v1 on ``kubeconfig``."""
    return client.CoreV1Api(api_client(kubeconfig))


def until(check: Callable[[], object], timeout: float, what: str = "") -> None:
    """Poll ``check`` every half second until it is truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.5)
