"""Homelab twins (Flux on the embedded repository) for the verdict and doctor tests, and the
operator's drain done by hand through the API."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushift import kube
from gpushift.kube import ResourceRef
from gpushift.render import write_example
from gpushift_twin import Twin
from gpushift_twin.cluster import Cluster, example
from gpushift_twin.flux import Flux, git_set, run_gitops, wait_ready

TIME_SCALE = 200.0
MEDIA = ("dispatcharr", "jellyfin", "pinchflat", "plex", "tdarr", "whisper")
SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "gpusnapshot.schema.json"
KS = ResourceRef.named("Kustomization", "kustomize.toolkit.fluxcd.io/v1")
DEPLOY = ResourceRef.named("Deployment", "apps/v1")


@dataclass
class Env:
    twin: Twin
    cluster: Cluster
    flux: Flux
    tmp: Path

    def client(self) -> kube.Kube:
        return kube.connect(kubeconfig=self.twin.kubeconfig)

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.client() as c:
            return c.list(ResourceRef.named("Pod"), namespace=namespace)


def wait_for(check: Callable[[], Any], *, timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what or check}")


def _running(env: Env, namespace: str) -> list[dict[str, Any]]:
    return [
        p
        for p in env.pods(namespace)
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def converged(env: Env) -> bool:
    """Flux Ready, six media pods and the llmkube model pod Running."""
    with env.client() as c:
        if wait_ready(c, timeout=0.5):
            return False
    media = {p["metadata"]["labels"].get("app.kubernetes.io/name") for p in _running(env, "media")}
    llama = [p for p in _running(env, "ai") if p["metadata"]["name"].startswith("llama-nvidia")]
    return media >= set(MEDIA) and len(llama) == 1


@contextlib.contextmanager
def homelab(
    tmp: Path,
    *,
    allocator: str = "gpu-operator",
    node_faults: dict[str, str] | None = None,
    operator_delay: float = 10.0,
    tls: bool = False,
    settle: Callable[[Env], Any] | None = converged,
) -> Iterator[Env]:
    """The homelab twin (time-slicing replicas 5, or ``allocator="dra"`` with 5 shares),
    waited until ``settle`` holds."""
    repo = write_example(tmp / "repo", allocator=allocator, sharing=5)
    with run_gitops(
        example("homelab"),
        directory=repo,
        time_scale=TIME_SCALE,
        operator_delay=operator_delay,
        node_faults=node_faults,
        tls=tls,
    ) as (twin, cluster, flux):
        env = Env(twin, cluster, flux, tmp)
        if settle is not None:
            wait_for(lambda: settle(env), timeout=90, what="the homelab to settle")
        yield env


def merge_dra(env: Env) -> None:
    """The merge: point the GitRepository at the DRA tree and ask the root to reconcile."""
    dra = write_example(env.tmp / "dra", allocator="dra", sharing=5)
    with env.client() as c:
        git_set(c, str(dra))
        c.patch(
            KS,
            name="cluster-apps",
            namespace="flux-system",
            patch={"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "merge"}}},
        )


NODES = ("k8s-1", "k8s-2", "k8s-3")
HOLD = {"key": "gpushift.dev/cutover", "value": "dra", "effect": "NoSchedule"}


def drained_cutover(env: Env) -> None:
    """docs/twin.md's rehearsal: suspend and scale the consumers to 0, taint the nodes, merge,
    wait for no device-plugin units and the plugin gone, lift the taint, wait for one slice
    per node, resume and scale back."""
    consumers = [(n, "media") for n in MEDIA] + [("llmkube-models", "ai")]
    node = ResourceRef.named("Node")
    with env.client() as c:
        for name, ns in consumers:
            c.patch(KS, name=name, namespace=ns, patch={"spec": {"suspend": True}})
        for name in MEDIA:
            c.scale(DEPLOY, name=name, namespace="media", replicas=0)
        c.scale(DEPLOY, name="llama-nvidia", namespace="ai", replicas=0)
        for name in NODES:
            c.patch(node, name=name, patch={"spec": {"taints": [HOLD]}})
    wait_for(lambda: not _running(env, "media"), what="consumers to stop")
    merge_dra(env)

    def plugin_gone() -> bool:
        with env.client() as c:
            nodes = c.list(node)
            plugins = c.list(ResourceRef.named("DaemonSet", "apps/v1"), namespace="gpu-operator")
        alloc = {(n["status"].get("allocatable") or {}).get("nvidia.com/gpu") for n in nodes}
        names = {d["metadata"]["name"] for d in plugins}
        return alloc == {"0"} and "nvidia-device-plugin-daemonset" not in names

    wait_for(plugin_gone, timeout=90, what="allocatable 0 and the device plugin gone")
    with env.client() as c:
        for name in NODES:
            c.patch(node, name=name, patch={"spec": {"taints": None}})
        wait_for(
            lambda: len(c.list(ResourceRef.named("ResourceSlice"))) == 3,
            timeout=90,
            what="one slice per node",
        )
    with env.client() as c:
        for name, ns in consumers:
            c.patch(KS, name=name, namespace=ns, patch={"spec": {"suspend": None}})
        c.scale(DEPLOY, name="llama-nvidia", namespace="ai", replicas=1)
    wait_for(lambda: converged(env), timeout=90, what="the consumers back on DRA")
