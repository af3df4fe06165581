"""Scenario fixtures: the cluster twin of an inventory file, driven by kubectl.

The twin is what `gpushift twin serve --nodes FILE --time-scale 100` runs (the API server over
TLS and the cluster's agents, `run_cluster`), on threads of the test's own process: a
`twin serve` process per test spent most of its CPU importing. The tests still drive it only
from outside: kubectl, the metrics and violations endpoints, and the `gpushift` CLI.
`twin serve` itself is run as a process in `test_cli.py` and `test_inventory.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gpushift_twin import Twin, new_store
from gpushift_twin.cluster import Delays, load, run_cluster

KUBECTL = shutil.which("kubectl")
T = TypeVar("T")

THREE_ONE_CARD_NODES = """\
nodes:
- name: gpu
  count: 3
  gpus: [{product: NVIDIA L4}]
"""


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 20.0) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    pause = 0.05
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        # Probes run kubectl, a process each: poll quickly at first, then back off.
        time.sleep(pause)
        pause = min(pause * 1.5, 0.4)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Driver:
    """kubectl and HTTP against one running cluster twin."""

    def __init__(self, twin: Twin, cache: Path) -> None:
        assert twin.ca_pem is not None
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


def serve(inventory: str, tmp: Path, *, delays: Delays | None = None) -> Iterator[Driver]:
    """The twin of ``inventory`` at time scale 100, as `twin serve` runs it, for a test."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    nodes = tmp / "nodes.yaml"
    nodes.write_text(inventory)
    with run_cluster(
        load(nodes),
        time_scale=100,
        delays=delays,
        store=new_store(seed=0),
        tls=True,
        kubeconfig=tmp / "kubeconfig",
    ) as (twin, _):
        yield Driver(twin, tmp / "kubectl-cache")


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
    yield from serve(THREE_ONE_CARD_NODES, tmp_path, delays=Delays(plugin_register=200))
