"""Scenario fixtures: `gpushift twin serve --nodes FILE` in a subprocess, driven by kubectl.

The scenario tests run against the twin as users run it, and drive it only from outside:
kubectl, the metrics and violations endpoints, and the `gpushift` CLI.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

KUBECTL = shutil.which("kubectl")
T = TypeVar("T")

THREE_ONE_CARD_NODES = """\
nodes:
- name: gpu
  count: 3
  gpus: [{product: NVIDIA L4}]
"""


@dataclass(frozen=True)
class Served:
    """Where a `gpushift twin serve` listens, from the kubeconfig it wrote."""

    url: str
    token: str
    kubeconfig: Path
    ca_pem: bytes


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 20.0) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Driver:
    """kubectl and HTTP against one running cluster twin."""

    def __init__(self, twin: Served, cache: Path) -> None:
        self.twin = twin
        self.cache = cache
        self._ssl = ssl.create_default_context(cadata=twin.ca_pem.decode())

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        assert KUBECTL is not None
        env = {**os.environ, "KUBECONFIG": str(self.twin.kubeconfig)}
        done = subprocess.run(
            [KUBECTL, "--cache-dir", str(self.cache), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", stdin=manifest)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def http(self, path: str, params: dict[str, str] | None = None, *, post: bool = False) -> Any:
        url = self.twin.url + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        req = urllib.request.Request(
            url,
            headers={"Authorization": f"Bearer {self.twin.token}"},
            method="POST" if post else "GET",
        )
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return json.loads(err.read())

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 20.0) -> T:
        """Poll ``probe`` until it returns something truthy; fail naming ``what``."""
        return wait_for(what, probe, timeout)


def serve(inventory: str, tmp: Path, *args: str) -> Iterator[Driver]:
    """Run `gpushift twin serve --nodes` on ``inventory`` (time scale 100) for a test."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    nodes = tmp / "nodes.yaml"
    nodes.write_text(inventory)
    kubeconfig = tmp / "kubeconfig"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpushift",
            "twin",
            "serve",
            "--nodes",
            str(nodes),
            "--time-scale",
            "100",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if not first.startswith("gpushift twin serving "):
            raise AssertionError(f"twin serve did not start: {first}{proc.stderr.read()}")
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        twin = Served(
            url=first.split()[-1],
            token=config["users"][0]["user"]["token"],
            kubeconfig=kubeconfig,
            ca_pem=base64.b64decode(cluster["certificate-authority-data"]),
        )
        yield Driver(twin, tmp / "kubectl-cache")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            # An open watch can hold the server's shutdown; the test is over either way.
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[Driver]:
    """Three nodes with one NVIDIA L4 each."""
    yield from serve(THREE_ONE_CARD_NODES, tmp_path)


@pytest.fixture
def one_cpu_bound_node(tmp_path: Path) -> Iterator[Driver]:
    """One node with 2 CPUs and no GPU: room for one 1.5-CPU pod."""
    yield from serve('nodes:\n- name: n1\n  cpu: "2"\n  gpus: []\n', tmp_path)


@pytest.fixture
def slow_plugin(tmp_path: Path) -> Iterator[Driver]:
    """Three one-card nodes whose device plugins take 200 s (2 s here) to register."""
    yield from serve(THREE_ONE_CARD_NODES, tmp_path, "--plugin-register-delay", "200")
