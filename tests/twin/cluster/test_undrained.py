"""The invariant monitor in the undrained direction, on the homelab twin with Flux.

The twin converges on the DRA rendering of the homelab repository. A consumer of our own
(outside Flux, so the merges leave it alone) holds a DRA claim on the one card of k8s-1.
Then the device-plugin rendering is merged without draining (an undrained rollback): the
operator's device plugin comes back and a device-plugin consumer lands on the same card.
`gpushift twin check-invariants` and /twin/v1/violations must name that node and card.
The consumers go, the violations resolve, and a second undrained move forward to DRA on the
same twin must record its own violation.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.twin.cluster.conftest import wait_for

from gpushift import kube
from gpushift._kinds import by_kind
from gpushift.render import write_example
from gpushift_twin.apiserver import rfc3339
from gpushift_twin.cluster import example
from gpushift_twin.flux import run_gitops

NODE = "k8s-1"
# The DRA consumer's claim: the same request as the rendered media claim template.
DRA_CONSUMER = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: held, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: dra-consumer, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: k8s-1}
  resourceClaims: [{name: gpu, resourceClaimName: held}]
  containers:
  - name: app
    image: ghcr.io/example/app:1
    resources: {claims: [{name: gpu}]}
"""
DP_CONSUMER = """\
apiVersion: v1
kind: Pod
metadata: {name: dp-consumer, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: k8s-1}
  containers:
  - name: app
    image: ghcr.io/example/app:1
    resources: {limits: {nvidia.com/gpu: 1}}
"""


def _gpushift(*args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "gpushift", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr


class _Twin:
    def __init__(self, twin: Any, tmp: Path) -> None:
        self.store = twin.store
        self.kubeconfig = Path(twin.kubeconfig)
        self.tmp = tmp

    def objects(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.store.list(by_kind(kind), namespace=namespace).objects

    def kubectl(self, *args: str, stdin: str | None = None) -> None:
        subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )

    def violations(self) -> dict[str, Any]:
        with kube.connect(kubeconfig=self.kubeconfig) as k:
            return dict(k.get_path("/twin/v1/violations"))

    def alloc(self) -> dict[str, str | None]:
        return {
            n["metadata"]["name"]: ((n.get("status") or {}).get("allocatable") or {}).get(
                "nvidia.com/gpu"
            )
            for n in self.objects("Node")
        }

    def slices(self) -> set[str]:
        return {s["spec"].get("nodeName") for s in self.objects("ResourceSlice")}

    def phase(self, name: str) -> str | None:
        for p in self.objects("Pod", "default"):
            if p["metadata"]["name"] == name and not p["metadata"].get("deletionTimestamp"):
                return str((p.get("status") or {}).get("phase"))
        return None

    def merge(self, directory: Path) -> None:
        code, out = _gpushift(
            "twin", "git-set", str(directory), "--kubeconfig", str(self.kubeconfig)
        )
        assert code == 0, out


def _found(record: dict[str, Any], reason: str, *, since: str = "") -> list[dict[str, Any]]:
    return [
        v
        for v in record["items"]
        if v["reason"] == reason and v["node"] == NODE and v["firstSeen"] >= since
    ]


def _until(what: str, probe: Callable[[], Any], timeout: float = 120) -> Any:
    return wait_for(what, probe, timeout=timeout)


def _dp_holders(t: _Twin) -> set[str]:
    """Pods bound to k8s-1 whose containers ask for device-plugin units, as ns/name (the
    kubelet hands out the units when it admits a pod, before the pod reports Running)."""
    out = set()
    for ns in ("default", "media", "ai"):
        for p in t.objects("Pod", ns):
            if p["spec"].get("nodeName") == NODE and any(
                "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {})
                for c in p["spec"]["containers"]
            ):
                out.add(f"{ns}/{p['metadata']['name']}")
    return out


def _dra_holders(t: _Twin) -> set[str]:
    """Pods on k8s-1 holding a claim (their own, or the extended-resource one), as ns/name."""
    out = set()
    for ns in ("default", "media", "ai"):
        for p in t.objects("Pod", ns):
            status = p.get("status") or {}
            if p["spec"].get("nodeName") == NODE and (
                p["spec"].get("resourceClaims") or status.get("extendedResourceClaimStatus")
            ):
                out.add(f"{ns}/{p['metadata']['name']}")
    return out


def test_undrained_rollback_then_undrained_forward_move_are_both_recorded(
    tmp_path: Path,
) -> None:
    if subprocess.run(["which", "kubectl"], capture_output=True).returncode != 0:
        pytest.skip("kubectl is not installed")
    dra = write_example(tmp_path / "dra", allocator="dra", sharing=5)
    device_plugin = write_example(tmp_path / "device-plugin")
    # The operator deletes its device plugin 600 cluster seconds (6 wall seconds) after the
    # ClusterPolicy changes: the forward move's window of two advertisers.
    with run_gitops(
        example("homelab"), directory=dra, time_scale=100, operator_delay=600, tls=True
    ) as (twin, cluster, _):
        t = _Twin(twin, tmp_path)
        _until("DRA: one slice per node", lambda: t.slices() == {"k8s-1", "k8s-2", "k8s-3"})
        _until("no device plugin units", lambda: set(t.alloc().values()) <= {None, "0"})
        t.kubectl("apply", "-f", "-", stdin=DRA_CONSUMER)
        _until("the DRA consumer Running", lambda: t.phase("dra-consumer") == "Running")
        (claim,) = [
            c for c in t.objects("ResourceClaim", "default") if c["metadata"]["name"] == "held"
        ]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        # k8s-1 has one L4: the claim's device is its card 0.
        assert (result["driver"], result["device"]) == ("gpu.nvidia.com", "gpu-0")
        assert t.violations()["items"] == []

        # The undrained rollback: the device plugin comes back while the claim holds gpu-0;
        # a device-plugin consumer is pinned to k8s-1 (unless the media pods fill its card
        # first, which holds the card through the device plugin just the same).
        t.merge(device_plugin)
        _until("k8s-1 advertises 5 units again", lambda: t.alloc().get(NODE) == "5")
        t.kubectl("apply", "-f", "-", stdin=DP_CONSUMER)
        _until("a device-plugin pod on k8s-1", lambda: _dp_holders(t))
        assert t.phase("dra-consumer") == "Running"
        record = _until(
            "a DoubleAllocation on k8s-1's card",
            lambda: r if _found(r := t.violations(), "DoubleAllocation") else None,
        )
        (double,) = _found(record, "DoubleAllocation")
        assert double["card"] == 0 and double["active"] is True
        head = "card gpu-0 of node k8s-1: held by the device plugin for "
        assert double["message"].startswith(head)
        device_plugin_part, _, dra_part = double["message"][len(head) :].partition(
            " and by DRA for "
        )
        holders = {h.removesuffix(" (app)") for h in device_plugin_part.split(", ")}
        assert holders and holders <= _dp_holders(t)
        # The DRA holders, in name order: ours, and any other claim holder on k8s-1 (the
        # llmkube pod keeps its extended-resource claim through the rollback).
        assert dra_part.split(", ") == sorted(_dra_holders(t))
        assert "default/dra-consumer" in dra_part.split(", ")
        code, out = _gpushift("twin", "check-invariants", "--kubeconfig", str(t.kubeconfig))
        assert code == 1, out
        assert any(
            line.startswith("DoubleAllocation\t") and "k8s-1" in line and "gpu-0" in line
            for line in out.splitlines()
        ), out

        # The DRA holders go: nothing holds k8s-1's card through DRA any more.
        t.kubectl("delete", "pod", "-n", "default", "dp-consumer", "dra-consumer", "--wait=false")
        t.kubectl("delete", "resourceclaim", "-n", "default", "held", "--wait=false")
        # The llmkube pod's extended-resource claim goes with a restart onto the device plugin.
        t.kubectl("rollout", "restart", "deployment", "-n", "ai", "llama-nvidia")
        _until(
            "k8s-1's DoubleAllocation resolved",
            lambda: all(v["resolved"] for v in _found(t.violations(), "DoubleAllocation")),
        )

        # The second undrained move, forward to DRA: the driver publishes every node's card
        # while the device plugin still advertises it.
        merged_at = rfc3339(cluster.clock.now())
        t.merge(dra)

        def every_node_dual() -> dict[str, Any] | None:
            r = t.violations()
            nodes = {
                v["node"]
                for v in r["items"]
                if v["reason"] == "DualAdvertiser" and v["firstSeen"] >= merged_at
            }
            return r if nodes == {"k8s-1", "k8s-2", "k8s-3"} else None

        later = _until(
            "a DualAdvertiser on every node after the second move", every_node_dual, timeout=180
        )
        (dual,) = _found(later, "DualAdvertiser", since=merged_at)
        assert dual["card"] is None
        assert dual["message"] == (
            "node k8s-1 advertises nvidia.com/gpu: 5 through the device plugin and publishes "
            "its GPUs through the DRA driver gpu.nvidia.com; both ledgers can hand out the same "
            "card"
        )
        code, out = _gpushift("twin", "check-invariants", "--kubeconfig", str(t.kubeconfig))
        assert code == 1, out
        assert sum(line.startswith("DualAdvertiser\t") for line in out.splitlines()) >= 3, out
