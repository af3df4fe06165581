"""A cluster twin running Flux on the embedded homelab repository, and polling helpers."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpushift import kube
from gpushift._kinds import by_kind
from gpushift.render import write_example
from gpushift_twin import Twin
from gpushift_twin.cluster import Cluster, example
from gpushift_twin.flux import Flux, run_gitops

TIME_SCALE = 200.0
needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


@dataclass
class Env:
    twin: Twin
    cluster: Cluster
    flux: Flux
    repo: Path
    tmp: Path

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.twin.store.list(by_kind(kind), namespace=namespace).objects

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        for o in self.objects(kind, namespace):
            if o["metadata"]["name"] == name:
                return o
        return None

    def client(self) -> kube.Kube:
        return kube.connect(kubeconfig=self.twin.kubeconfig)


def ready_condition(obj: dict[str, Any] | None) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return dict(c)
    return {}


def wait_for(check: Callable[[], Any], *, timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what or check}")


@contextlib.contextmanager
def start(tmp: Path, *, operator_delay: float = 10.0) -> Iterator[Env]:
    repo = write_example(tmp / "repo")
    with run_gitops(
        example("homelab"),
        directory=repo,
        time_scale=TIME_SCALE,
        operator_delay=operator_delay,
    ) as (twin, cluster, flux):
        yield Env(twin, cluster, flux, repo, tmp)


@pytest.fixture
def homelab(tmp_path: Path) -> Iterator[Env]:
    with start(tmp_path) as env:
        yield env


def kubectl_json(kc: Path, *args: str) -> Any:
    """``kubectl ARGS -o json`` against the kubeconfig ``kc``, parsed; None when it fails."""
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(kc), *args, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    return json.loads(out.stdout) if out.returncode == 0 else None


@contextlib.contextmanager
def serve_repo(tmp: Path, repo: Path, nodes: str, *extra: str) -> Iterator[tuple[Path, Path]]:
    """``gpushift twin serve --repo REPO --nodes`` (the inventory text ``nodes``) as a process
    at time scale 200; yields its kubeconfig and the file its stderr goes to."""
    inventory = tmp / "nodes.yaml"
    inventory.write_text(nodes)
    kc = tmp / "kc"
    err = tmp / "stderr.txt"
    with err.open("w") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpushift",
                "twin",
                "serve",
                "--nodes",
                str(inventory),
                "--repo",
                str(repo),
                "--time-scale",
                "200",
                "--port",
                "0",
                "--kubeconfig-out",
                str(kc),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith("gpushift twin serving https://127.0.0.1:")
            yield kc, err
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(20)
