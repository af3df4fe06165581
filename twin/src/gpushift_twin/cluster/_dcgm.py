"""DCGM metrics as dcgm-exporter publishes them, behind a Prometheus-compatible query API.

Per card of every node with a Running dcgm-exporter pod, one series per tenant container
(and one with empty pod labels for an idle card), as dcgm-exporter does without MIG:
``DCGM_FI_DEV_FB_USED`` is the device total, attributed to every co-tenant. Containers that
reach the card through DRA are attributed only when the exporter runs with
``KUBERNETES_ENABLE_DRA=true`` and its service account may get, list and watch
``resource.k8s.io`` ResourceSlices; otherwise their pod, namespace and container labels are
empty (nvidia.md §6.5).

The load is a fixed model: each tenant container uses 2 GiB of frame buffer (or the memory
its claim consumed) and 35 % of the SMs, capped at the card's size.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import defaultdict
from typing import Any

from gpushift.common import Obj
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._kubelet import DRIVER, Kubelet, _env
from gpushift_twin.cluster._promql import Expr, Sample, evaluate

UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
METRICS = (UTIL, FB_USED, FB_FREE)
_TENANT_MIB = 2048
_TENANT_UTIL = 35
#: Samples kept for range queries (the oldest snapshots go first).
_HISTORY_SAMPLES = 1_000_000

Series = tuple[tuple[str, str], ...]


def _allowed(rules: list[Obj]) -> bool:
    for rule in rules:
        groups = rule.get("apiGroups") or []
        resources = rule.get("resources") or []
        verbs = set(rule.get("verbs") or [])
        if (
            ("resource.k8s.io" in groups or "*" in groups)
            and ("resourceslices" in resources or "*" in resources)
            and ({"get", "list", "watch"} <= verbs or "*" in verbs)
        ):
            return True
    return False


def dra_attribution(ctx: Context, *, pod: Obj, container: Obj) -> bool:
    """Whether this dcgm-exporter can attribute DRA devices: the env switch and RBAC."""
    if _env(container).get("KUBERNETES_ENABLE_DRA", "").lower() != "true":
        return False
    sa = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    ns = pod["metadata"]["namespace"]
    roles = {r["metadata"]["name"]: r for r in ctx.list(ctx.kinds.clusterrole)}
    for b in ctx.list(ctx.kinds.clusterrolebinding):
        if not any(
            s.get("kind") == "ServiceAccount" and s.get("name") == sa and s.get("namespace") == ns
            for s in b.get("subjects") or []
        ):
            continue
        role = roles.get(str((b.get("roleRef") or {}).get("name")))
        if role is not None and _allowed(role.get("rules") or []):
            return True
    return False


def _claim_containers(pod: Obj, *, claim_name: str, request: str) -> list[str]:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    ext = status.get("extendedResourceClaimStatus") or {}
    if ext.get("resourceClaimName") == claim_name:
        return [
            str(m["containerName"])
            for m in ext.get("requestMappings") or []
            if m.get("requestName") == request
        ]
    generated = {
        s.get("resourceClaimName"): s.get("name") for s in status.get("resourceClaimStatuses") or []
    }
    names = {
        pc.get("name")
        for pc in spec.get("resourceClaims") or []
        if pc.get("resourceClaimName") == claim_name
    }
    if claim_name in generated:
        names.add(generated[claim_name])
    return [
        str(c["name"])
        for c in spec.get("containers") or []
        if any(r.get("name") in names for r in (c.get("resources") or {}).get("claims") or [])
    ]


class Metrics:
    """DCGM series over time, and the Prometheus API's instant and range evaluation."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._times: list[float] = []
        self._snapshots: list[list[Sample]] = []
        self._kept = 0

    def sync(self, kubelet: Kubelet, *, nodes: list[Obj], pods: list[Obj]) -> None:
        """Take the current series; kept when they differ from the last ones."""
        ctx = self.ctx
        exporters = {n: a for n, a in kubelet.agents.items() if a.dcgm is not None and a.gpus}
        if not exporters and not self._snapshots:
            return
        by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
        by_uid = {p["metadata"]["uid"]: p for p in pods}
        pools = {}
        for s in ctx.list(ctx.kinds.slice):
            spec = s.get("spec") or {}
            if spec.get("driver") == DRIVER and spec.get("nodeName"):
                pools[str((spec.get("pool") or {}).get("name"))] = str(spec["nodeName"])
        dra: dict[tuple[str, int], list[tuple[Obj, str, Obj, int]]] = defaultdict(list)
        for claim in ctx.list(ctx.kinds.claim):
            results = (
                ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            ).get("results") or []
            for r in results:
                node = pools.get(str(r.get("pool")))
                head, _, minor = str(r.get("device", "")).partition("-")
                if (
                    r.get("driver") != DRIVER
                    or node is None
                    or head != "gpu"
                    or not minor.isdigit()
                ):
                    continue
                mem = str((r.get("consumedCapacity") or {}).get("memory", "0"))
                mib = _mib(mem)
                for ref in (claim.get("status") or {}).get("reservedFor") or []:
                    pod = by_uid.get(ref.get("uid"))
                    if pod is None:
                        continue
                    for c in _claim_containers(
                        pod, claim_name=claim["metadata"]["name"], request=str(r.get("request"))
                    ):
                        dra[(node, int(minor))].append((pod, c, claim, mib))
        samples: list[Sample] = []
        for node_name, agent in sorted(exporters.items()):
            assert agent.dcgm is not None
            attribute = kubelet.dcgm_may_list_slices(node_name, agent.dcgm[0], agent.dcgm[1])
            cards = {c.index: c for c in agent.ledger.cards}
            for gpu in agent.gpus:
                base = {
                    "gpu": str(gpu.minor),
                    "UUID": gpu.uuid,
                    "device": f"nvidia{gpu.minor}",
                    "modelName": gpu.product,
                    "Hostname": node_name,
                    "pci_bus_id": gpu.info().pci_bus_id or "",
                    "DCGM_FI_DRIVER_VERSION": gpu.driver_version,
                }
                tenants: list[tuple[dict[str, str], int]] = []
                card = cards.get(gpu.minor)
                for t in card.tenants if card is not None else []:
                    pod = by_key.get(t.pod)
                    ns, _, name = t.pod.partition("/")
                    if pod is not None:
                        tenants.append(
                            ({"pod": name, "namespace": ns, "container": t.container}, _TENANT_MIB)
                        )
                for pod, container, claim, mib in dra.get((node_name, gpu.minor), []):
                    if attribute:
                        lbl = {
                            "pod": pod["metadata"]["name"],
                            "namespace": pod["metadata"]["namespace"],
                            "container": container,
                            "dra_claim_name": claim["metadata"]["name"],
                            "dra_claim_namespace": claim["metadata"]["namespace"],
                            "dra_device_name": f"gpu-{gpu.minor}",
                            "dra_driver_name": DRIVER,
                            "dra_pool_name": node_name,
                        }
                    else:
                        lbl = {"pod": "", "namespace": "", "container": ""}
                    tenants.append((lbl, mib or _TENANT_MIB))
                total = gpu.memory // 2**20
                used = min(sum(m for _, m in tenants), total)
                util = min(_TENANT_UTIL * len(tenants), 100)
                for lbl, _ in tenants or [({"pod": "", "namespace": "", "container": ""}, 0)]:
                    for metric, value in ((UTIL, util), (FB_USED, used), (FB_FREE, total - used)):
                        samples.append(({"__name__": metric, **base, **lbl}, float(value)))
        at = ctx.clock.now().timestamp()
        with self._lock:
            if self._snapshots and self._snapshots[-1] == samples:
                return
            self._times.append(at)
            self._snapshots.append(samples)
            self._kept += len(samples)
            # Bounded by samples, not snapshots: a large cluster's snapshot is large.
            while len(self._times) > 1 and self._kept > _HISTORY_SAMPLES:
                self._kept -= len(self._snapshots[0])
                del self._times[0], self._snapshots[0]

    def now(self) -> float:
        """The current cluster time as a Unix timestamp."""
        return self.ctx.clock.now().timestamp()

    def at(self, when: float) -> list[Sample]:
        """The series as they were at Unix time ``when`` (empty before the first)."""
        with self._lock:
            i = bisect_right(self._times, when)
            return self._snapshots[i - 1] if i else []

    def instant(self, expr: Expr, when: float) -> list[dict[str, Any]]:
        """An instant query's ``result`` (resultType ``vector``)."""
        return [
            {"metric": lbl, "value": [when, _fmt(v)]} for lbl, v in evaluate(expr, self.at(when))
        ]

    def range(self, expr: Expr, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query's ``result`` (resultType ``matrix``)."""
        series: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
        metrics: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        t = start
        while t <= end + 1e-9:
            for lbl, v in evaluate(expr, self.at(t)):
                key = tuple(sorted(lbl.items()))
                metrics[key] = lbl
                series.setdefault(key, []).append([round(t, 3), _fmt(v)])
            t += step
        return [{"metric": metrics[k], "values": series[k]} for k in sorted(series)]


def _fmt(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(v)


def _mib(text: str) -> int:
    from gpushift import common

    try:
        return int(common.quantity_value(text)) // 2**20
    except Exception:
        return 0
