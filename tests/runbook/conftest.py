"""The homelab twin (Flux on the embedded repository) and `gpushift cutover` run against it as
a user runs it: a separate process, over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushift import kube
from gpushift._kinds import by_kind, lookup
from gpushift.render import write_example
from gpushift.runbook import JOURNAL_NAME, chunk_name, cluster_journal
from gpushift_twin import Twin
from gpushift_twin.cluster import Cluster, example
from gpushift_twin.flux import Flux, run_gitops, wait_ready

TIME_SCALE = 200.0
MEDIA = ("dispatcharr", "jellyfin", "pinchflat", "plex", "tdarr", "whisper")


@dataclass
class Env:
    """A converged homelab twin, with the two trees to merge between."""

    twin: Twin
    cluster: Cluster
    flux: Flux
    tmp: Path
    dra: Path
    plugin: Path

    def objects(self, kind: str, api_version: str | None = None) -> list[dict[str, Any]]:
        k = lookup(api_version, kind) if api_version else by_kind(kind)
        assert k is not None
        return self.twin.store.list(k).objects

    def get(self, kind: str, namespace: str, name: str, api: str | None = None) -> Any:
        for o in self.objects(kind, api):
            if o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace:
                return o
        return None

    def merge(self, tree: Path) -> str:
        return (
            f"{sys.executable} -m gpushift twin git-set {tree} --kubeconfig {self.twin.kubeconfig}"
        )

    def cutover(
        self, *args: str, journal: Path | None = None, timeout: float = 240
    ) -> tuple[int, list[dict[str, Any]], str]:
        """Run `gpushift cutover ARGS -o json --yes` to the end: (exit, events, stderr)."""
        proc = self.start(*args, journal=journal)
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, [json.loads(x) for x in out.splitlines() if x.strip()], err

    def start(self, *args: str, journal: Path | None = None) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "gpushift", *args]
        cmd += ["--kubeconfig", str(self.twin.kubeconfig), "-o", "json", "--yes"]
        cmd += ["--journal", str(journal or self.tmp / "journal.json")]
        return subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def client(self) -> kube.Kube:
        return kube.connect(kubeconfig=self.twin.kubeconfig)

    def allocatable(self) -> dict[str, str | None]:
        return {
            n["metadata"]["name"]: (n.get("status") or {})
            .get("allocatable", {})
            .get("nvidia.com/gpu")
            for n in self.objects("Node")
        }

    def running(self, namespace: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.objects("Pod")
            if p["metadata"].get("namespace") == namespace
            and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]

    def journal(self, namespace: str = "flux-system") -> dict[str, Any]:
        """The cutover journal as the cluster holds it (head and chunks), as one document."""
        head = self.get("ConfigMap", namespace, JOURNAL_NAME)
        assert head is not None, "no journal ConfigMap"
        chunks = []
        for i in range(1, 10_000):
            cm = self.get("ConfigMap", namespace, chunk_name(i))
            if cm is None:
                break
            chunks.append(cm.get("data") or {})
        found = cluster_journal(head.get("data") or {}, chunks)
        assert found is not None, "the journal ConfigMap holds no journal"
        return found.to_json()

    def violations(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.cluster.violations()["items"]
        return items


def wait_for(check: Callable[[], Any], *, timeout: float = 60.0, what: str = "") -> Any:
    """Poll a check of the in-process twin's store (no API traffic) until it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or check}")


def converged(env: Env) -> bool:
    apps = {p["metadata"]["labels"].get("app.kubernetes.io/name") for p in env.running("media")}
    return apps >= set(MEDIA) and any(
        p["metadata"]["name"].startswith("llama-nvidia") for p in env.running("ai")
    )


@contextlib.contextmanager
def homelab(tmp: Path, **kw: Any) -> Iterator[Env]:
    """A homelab twin converged on time-slicing (replicas 5)."""
    repo = write_example(tmp / "repo")
    dra = write_example(tmp / "dra", allocator="dra", sharing=5)
    with run_gitops(example("homelab"), directory=repo, time_scale=TIME_SCALE, **kw) as (
        twin,
        cluster,
        flux,
    ):
        env = Env(twin, cluster, flux, tmp, dra, repo)
        with env.client() as c:
            assert wait_ready(c, timeout=90) == []
        wait_for(lambda: converged(env), timeout=60, what="the homelab to converge")
        yield env


def kill9(proc: subprocess.Popen[str]) -> None:
    """kill -9, as a crash."""
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
