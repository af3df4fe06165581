"""The per-card map: which pods hold each physical card, and through which ledger.

Under the device plugin the API does not say which card a container got; dcgm-exporter does
(one series per tenant container, labelled with the card's ``gpu`` minor and the pod), so the
map reads the twin's Prometheus API as an operator reads dashboards. Under DRA the claims say
it too (``status.allocation.devices.results`` pool and device, ``reservedFor`` pods), which
covers an exporter that cannot attribute DRA devices.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from gpushift import kube
from gpushift.common import Obj
from gpushift_twin.rehearse._sampler import DRA_DRIVER, allocatable_gpus
from gpushift_twin.rehearse._twinproc import get_json

_METRIC = "DCGM_FI_DEV_FB_USED"
_NODE = kube.ResourceRef.named("Node")
_SLICE = kube.ResourceRef.named("ResourceSlice")
_CLAIM = kube.ResourceRef.named("ResourceClaim")


@dataclass(frozen=True, slots=True)
class Card:
    """One physical card: its node and minor, the ledger(s) handing it out, its tenants."""

    node: str
    index: int
    ledger: str  # "device plugin", "DRA", "both" or "none"
    tenants: tuple[str, ...]


def ledger_of(*, allocatable: int, slices: int) -> str:
    """Which allocator hands out a node's cards, from its allocatable and its slices."""
    if allocatable > 0 and slices > 0:
        return "both"
    if allocatable > 0:
        return "device plugin"
    return "DRA" if slices > 0 else "none"


def build_map(
    *, series: list[Obj], claims: list[Obj], nodes: list[Obj], slices: list[Obj]
) -> tuple[Card, ...]:
    """The map from the exporter's series, the claims, the nodes and the slices (pure)."""
    tenants: dict[tuple[str, int], set[str]] = {}
    for s in series:
        metric = s.get("metric") or {}
        node, gpu = metric.get("Hostname"), metric.get("gpu")
        if not node or gpu is None or not str(gpu).isdigit():
            continue
        held = tenants.setdefault((str(node), int(gpu)), set())
        if metric.get("pod"):
            held.add(f"{metric.get('namespace')}/{metric['pod']}")
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        ns = (claim.get("metadata") or {}).get("namespace")
        pods = [
            r.get("name") for r in status.get("reservedFor") or [] if r.get("resource") == "pods"
        ]
        for r in results:
            device = str(r.get("device", ""))
            if r.get("driver") != DRA_DRIVER or not device.startswith("gpu-"):
                continue
            index = device.removeprefix("gpu-")
            if not index.isdigit():
                continue
            held = tenants.setdefault((str(r.get("pool")), int(index)), set())
            held.update(f"{ns}/{p}" for p in pods if p)
    per_node_slices: dict[str, int] = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        if spec.get("driver") == DRA_DRIVER and spec.get("nodeName"):
            per_node_slices[spec["nodeName"]] = per_node_slices.get(spec["nodeName"], 0) + 1
    alloc = {str(n["metadata"]["name"]): allocatable_gpus(n) or 0 for n in nodes if "metadata" in n}
    return tuple(
        Card(
            node,
            index,
            ledger_of(allocatable=alloc.get(node, 0), slices=per_node_slices.get(node, 0)),
            tuple(sorted(held)),
        )
        for (node, index), held in sorted(tenants.items())
    )


def read_map(kubeconfig: Path) -> tuple[Card, ...]:
    """The map of a running twin now (empty when nothing can be read)."""
    try:
        answer = get_json(kubeconfig, "/api/v1/query?query=" + urllib.parse.quote(_METRIC))
        series = list(((answer or {}).get("data") or {}).get("result") or [])
    except (OSError, ValueError):
        series = []
    with kube.connect(kubeconfig=kubeconfig) as client:
        return build_map(
            series=series,
            claims=client.list(_CLAIM),
            nodes=client.list(_NODE),
            slices=client.list(_SLICE),
        )
