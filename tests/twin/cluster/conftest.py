"""Helpers for driving a cluster twin from outside: kubectl, the metrics API, polling."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gpushift.twin import Twin
from gpushift.twin.cluster import Cluster, Inventory, from_text, run_cluster

KUBECTL = shutil.which("kubectl")
T = TypeVar("T")

THREE_ONE_CARD_NODES = """\
nodes:
- name: gpu
  count: 3
  gpus: [{product: NVIDIA L4}]
"""


class Driver:
    """kubectl and HTTP against one running cluster twin."""

    def __init__(self, twin: Twin, cluster: Cluster, cache: Path) -> None:
        self.twin = twin
        self.cluster = cluster
        self.cache = cache
        assert twin.ca_pem is not None
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


def start(inventory: Inventory | str, tmp: Path, *, time_scale: float = 100.0) -> Iterator[Driver]:
    inv = from_text(inventory) if isinstance(inventory, str) else inventory
    with run_cluster(inv, time_scale=time_scale, tls=True) as (twin, cluster):
        yield Driver(twin, cluster, tmp / "kubectl-cache")


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[Driver]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    yield from start(THREE_ONE_CARD_NODES, tmp_path)
