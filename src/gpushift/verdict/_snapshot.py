"""The GpuSnapshot: the GPU state of a live cluster, both ledgers, in one JSON document.

:func:`take_snapshot` reads a cluster with one paginated list per kind (nodes, pods,
DaemonSets, ResourceSlices, DeviceClasses, ResourceClaims and the Flux kinds), whatever its
size, and optionally one Prometheus query for the dcgm-exporter series. :func:`build_snapshot`
turns those lists into the document, with no I/O, so it can be tested on plain objects. The
shape is described by ``docs/gpusnapshot.schema.json``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpushift import _quantity
from gpushift._errors import InputError
from gpushift._obj import Obj
from gpushift.kube import Kube, KubeError, ResourceRef
from gpushift.verdict._ledgers import ledgers

API_VERSION = "gpushift.dev/v1alpha1"
KIND = "GpuSnapshot"
NVIDIA = "nvidia.com/"
GPU = "nvidia.com/gpu"
DRIVER = "gpu.nvidia.com"
#: Objects per page: a page is one request, so the count of requests stays one per kind
#: until a kind outgrows a page.
PAGE = 5000
#: The DCGM series whose label sets the snapshot keeps (one per card and tenant).
DCGM_METRIC = "DCGM_FI_DEV_FB_USED"
#: Container env the agents are configured by, kept for the verdict and doctor.
_AGENT_ENV = (
    "NVIDIA_DRIVER_ROOT",
    "KUBERNETES_ENABLE_DRA",
    "CONSUMABLE_SHARES",
    "FEATURE_GATES",
    "FAIL_ON_INIT_ERROR",
)
_FLUX_KINDS = (
    ("Kustomization", "kustomize.toolkit.fluxcd.io/v1"),
    ("HelmRelease", "helm.toolkit.fluxcd.io/v2"),
    ("GitRepository", "source.toolkit.fluxcd.io/v1"),
)
#: Charts whose releases are on the GPU path.
_GPU_CHARTS = ("gpu-operator", "dra-driver", "device-plugin", "dcgm-exporter", "gpu-feature")
_HASH = re.compile(r"^(?P<base>.+)-[a-z0-9]{5,10}$")


@dataclass(frozen=True, slots=True)
class Lists:
    """What the cluster answered, one list per kind (``None``: the kind is not served)."""

    nodes: list[Obj]
    pods: list[Obj]
    daemonsets: list[Obj]
    slices: list[Obj]
    device_classes: list[Obj]
    claims: list[Obj]
    flux: dict[str, list[Obj] | None]
    series: list[dict[str, str]] | None = None


def _list_all(kube: Kube, kind: str, api_version: str | None = None) -> list[Obj] | None:
    try:
        ref = ResourceRef.named(kind, api_version)
    except KeyError:
        return None
    try:
        return kube.list(ref, chunk_size=PAGE)
    except KubeError as err:
        if err.code == 404:  # the kind is not served (Flux or DRA not installed)
            return None
        raise


def read_lists(kube: Kube, *, prometheus_url: str | None = None) -> Lists:
    """List every kind the snapshot needs (and query Prometheus when a URL is given).

    Raises:
        KubeError: the cluster refused a list or could not be reached (code 0).
    """
    flux = {kind: _list_all(kube, kind, version) for kind, version in _FLUX_KINDS}
    series = None
    if prometheus_url:
        series = query_series(kube, prometheus_url)
    return Lists(
        nodes=_list_all(kube, "Node") or [],
        pods=_list_all(kube, "Pod") or [],
        daemonsets=_list_all(kube, "DaemonSet") or [],
        slices=_list_all(kube, "ResourceSlice") or [],
        device_classes=_list_all(kube, "DeviceClass") or [],
        claims=_list_all(kube, "ResourceClaim") or [],
        flux=flux,
        series=series,
    )


def query_series(kube: Kube, url: str) -> list[dict[str, str]]:
    """The label sets of the dcgm-exporter series, from a Prometheus-compatible instant query.

    Raises:
        KubeError: the server answered an error or could not be reached.
    """
    target = url.rstrip("/") + "/api/v1/query"
    body = json.loads(kube.http_get(target, params={"query": DCGM_METRIC}))
    if body.get("status") != "success":
        raise KubeError(f"Prometheus query failed: {body.get('error', body)}")
    out = []
    for item in (body.get("data") or {}).get("result") or []:
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        labels.pop("__name__", None)
        out.append(labels)
    return sorted(out, key=lambda lbl: sorted(lbl.items()))


def take_snapshot(
    kube: Kube,
    *,
    prometheus_url: str | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Obj:
    """The GpuSnapshot of the cluster ``kube`` talks to.

    Raises:
        KubeError: the cluster refused a list or could not be reached (code 0).
    """
    lists = read_lists(kube, prometheus_url=prometheus_url)
    config: Any = getattr(kube.client, "config", None)
    server = str(config.cluster.server) if config is not None else None
    return build_snapshot(lists, taken_at=now(), server=server)


# --- the document ----------------------------------------------------------------------------


def _nvidia(resources: Mapping[str, Any] | None) -> dict[str, str]:
    return {k: str(v) for k, v in sorted((resources or {}).items()) if k.startswith(NVIDIA)}


def _int(text: Any) -> int:
    if isinstance(text, int):
        return text
    if isinstance(text, str) and text.isdigit():
        return int(text)  # the common case, without parsing a quantity
    try:
        return int(_quantity.value(str(text)))
    except (InputError, ValueError, TypeError):
        return 0


def _repo(image: str) -> str:
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def component(spec: Obj) -> tuple[str, str] | None:
    """Which NVIDIA agent a pod spec runs, and its main container, from what the charts
    deploy: ``device-plugin``, ``dra-kubelet-plugin``, ``dra-controller``, ``gfd``,
    ``dcgm-exporter`` or ``validator``; None for anything else."""
    containers = spec.get("containers") or []
    for c in containers:
        repo = _repo(str(c.get("image", "")))
        cmd = " ".join(str(x) for x in [*(c.get("command") or []), *(c.get("args") or [])])
        name = str(c.get("name", ""))
        dra_image = repo.endswith(("dra-driver-nvidia-gpu", "k8s-dra-driver-gpu"))
        if "gpu-kubelet-plugin" in cmd or (dra_image and name in ("gpus", "compute-domains")):
            return "dra-kubelet-plugin", name
        if dra_image and ("controller" in cmd or "controller" in name):
            return "dra-controller", name
        if repo.endswith("dcgm-exporter"):
            return "dcgm-exporter", name
        if "gpu-feature-discovery" in cmd or "gpu-feature-discovery" in name:
            return "gfd", name
        if repo.endswith("gpu-operator-validator") or "nvidia-validator" in cmd:
            return "validator", name
    for c in containers:
        repo = _repo(str(c.get("image", "")))
        cmd = " ".join(str(x) for x in [*(c.get("command") or []), *(c.get("args") or [])])
        name = str(c.get("name", ""))
        if "config-manager" in cmd or "config-manager" in name or "mps-control" in cmd:
            continue
        if repo.endswith("k8s-device-plugin") or "nvidia-device-plugin" in cmd:
            return "device-plugin", name
    return None


def _env(spec: Obj) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for e in c.get("env") or []:
            if e.get("name") in _AGENT_ENV and "value" in e:
                out[str(e["name"])] = str(e["value"])
    return dict(sorted(out.items()))


def _container_body(status: Obj) -> Obj:
    state = status.get("state") or {}
    which = next(iter(state), "waiting")
    body: Obj = {
        "name": status.get("name"),
        "ready": bool(status.get("ready")),
        "restarts": int(status.get("restartCount") or 0),
        "state": which,
        "reason": (state.get(which) or {}).get("reason"),
    }
    last = (status.get("lastState") or {}).get("terminated")
    if last:
        body["lastTermination"] = {
            "reason": last.get("reason"),
            "exitCode": last.get("exitCode"),
            "message": last.get("message") or "",
        }
    return body


def _pod_reason(pod: Obj) -> str | None:
    """What ``kubectl get pods`` shows in STATUS when it is not just the phase."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    inits = status.get("initContainerStatuses") or []
    for i, s in enumerate(inits):
        state = s.get("state") or {}
        if "terminated" in state and (state["terminated"].get("exitCode") or 0) == 0:
            continue
        if (state.get("waiting") or {}).get("reason") not in (None, "PodInitializing"):
            return f"Init:{state['waiting']['reason']}"
        return f"Init:{i}/{len(inits)}"
    for s in status.get("containerStatuses") or []:
        waiting = (s.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"])
    return status.get("reason")


def _agent_pod(pod: Obj, main: str) -> Obj:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    containers = [_container_body(s) for s in status.get("containerStatuses") or []]
    inits = [_container_body(s) for s in status.get("initContainerStatuses") or []]
    return {
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "node": spec.get("nodeName"),
        "phase": status.get("phase", "Pending"),
        "ready": bool(containers) and all(c["ready"] for c in containers),
        "restarts": sum(c["restarts"] for c in containers),
        "reason": _pod_reason(pod),
        "mainContainer": main,
        "serviceAccount": spec.get("serviceAccountName") or "default",
        "env": _env(spec),
        "containers": containers,
        "initContainers": inits,
    }


def _requests(pod: Obj) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for k, v in merged.items():
            if k.startswith(NVIDIA) and (amount := _int(v)) > 0:
                out[k] = out.get(k, 0) + amount
    return dict(sorted(out.items()))


def owner(pod: Obj) -> str:
    """The workload a pod belongs to, ``Kind/namespace/name`` (a ReplicaSet's pods belong to
    its Deployment), or the pod itself."""
    meta = pod["metadata"]
    ns = meta.get("namespace")
    for ref in meta.get("ownerReferences") or []:
        if not ref.get("controller", True):
            continue
        kind, name = str(ref.get("kind")), str(ref.get("name"))
        if kind == "ReplicaSet":
            hashed = (meta.get("labels") or {}).get("pod-template-hash")
            if hashed and name.endswith("-" + hashed):
                return f"Deployment/{ns}/{name[: -len(hashed) - 1]}"
            m = _HASH.match(name)
            return f"Deployment/{ns}/{m.group('base') if m else name}"
        return f"{kind}/{ns}/{name}"
    return f"Pod/{ns}/{meta['name']}"


def _unschedulable(pod: Obj) -> tuple[str | None, str | None]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return c.get("reason"), c.get("message")
    return None, None


def _claim_names(pod: Obj) -> list[str]:
    status = pod.get("status") or {}
    names = [
        s.get("resourceClaimName")
        for s in status.get("resourceClaimStatuses") or []
        if s.get("resourceClaimName")
    ]
    names += [
        pc.get("resourceClaimName")
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []
        if pc.get("resourceClaimName")
    ]
    ext = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if ext:
        names.append(ext)
    return sorted({str(n) for n in names})


def _claim_body(claim: Obj) -> Obj:
    meta = claim["metadata"]
    spec = (claim.get("spec") or {}).get("devices") or {}
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    classes = set()
    for req in spec.get("requests") or []:
        exactly = req.get("exactly") or req
        if exactly.get("deviceClassName"):
            classes.add(str(exactly["deviceClassName"]))
        for sub in req.get("firstAvailable") or []:
            if sub.get("deviceClassName"):
                classes.add(str(sub["deviceClassName"]))
    configs = [
        {
            "requests": list(c.get("requests") or []),
            "driver": (c.get("opaque") or {}).get("driver"),
            "parameters": (c.get("opaque") or {}).get("parameters"),
        }
        for c in spec.get("config") or []
        if c.get("opaque")
    ]
    return {
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "deviceClasses": sorted(classes),
        "allocated": bool(results),
        "devices": [
            {
                "request": r.get("request"),
                "driver": r.get("driver"),
                "pool": r.get("pool"),
                "device": r.get("device"),
                "shareID": r.get("shareID"),
                "consumedCapacity": {
                    str(k): str(v) for k, v in (r.get("consumedCapacity") or {}).items()
                },
            }
            for r in results
        ],
        "reservedFor": [
            {"resource": r.get("resource"), "name": r.get("name"), "uid": r.get("uid")}
            for r in (claim.get("status") or {}).get("reservedFor") or []
        ],
        "config": configs,
        "extendedResource": (meta.get("annotations") or {}).get(
            "resource.kubernetes.io/extended-resource-claim"
        )
        == "true",
    }


def _ready(obj: Obj) -> tuple[str, str | None, str | None]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status", "Unknown")), c.get("reason"), c.get("message")
    return "Unknown", None, None


def _inventory(ks: Obj) -> set[tuple[str, str, str]]:
    out = set()
    for entry in ((ks.get("status") or {}).get("inventory") or {}).get("entries") or []:
        parts = str(entry.get("id", "")).split("_")
        if len(parts) >= 4:
            ns, name, kind = parts[0], "_".join(parts[1:-2]), parts[-1]
            out.add((kind, ns, name))
    return out


def _flux(lists: Lists, *, gpu_namespaces: set[str], gpu_owners: set[str]) -> list[Obj]:
    releases = lists.flux.get("HelmRelease") or []
    path: set[tuple[str, str, str]] = set()
    for hr in releases:
        meta, spec = hr["metadata"], hr.get("spec") or {}
        chart = str(
            ((spec.get("chart") or {}).get("spec") or {}).get("chart")
            or (spec.get("chartRef") or {}).get("name")
            or ""
        )
        target = spec.get("targetNamespace") or meta.get("namespace")
        if any(c in chart for c in _GPU_CHARTS) or target in gpu_namespaces:
            path.add(("HelmRelease", str(meta.get("namespace")), str(meta["name"])))
    for o in gpu_owners:
        kind, ns, name = o.split("/", 2)
        path.add((kind, ns, name))
    kustomizations = lists.flux.get("Kustomization") or []
    on_path: set[tuple[str, str]] = set()
    changed = True
    while changed:  # a Kustomization that applies one on the path is on it too
        changed = False
        for ks in kustomizations:
            key = (str(ks["metadata"].get("namespace")), str(ks["metadata"]["name"]))
            if key in on_path:
                continue
            inv = _inventory(ks)
            hits = inv & path or any(
                kind == "ResourceClaimTemplate" or ns in gpu_namespaces for kind, ns, _ in inv
            )
            if hits:
                on_path.add(key)
                path.add(("Kustomization", *key))
                changed = True
    sources = set()
    out: list[Obj] = []
    for ks in kustomizations:
        key = (str(ks["metadata"].get("namespace")), str(ks["metadata"]["name"]))
        if key in on_path:
            ref = (ks.get("spec") or {}).get("sourceRef") or {}
            sources.add((str(ref.get("namespace") or key[0]), str(ref.get("name"))))
            out.append(_flux_body("Kustomization", ks))
    for hr in releases:
        if ("HelmRelease", str(hr["metadata"].get("namespace")), hr["metadata"]["name"]) in path:
            out.append(_flux_body("HelmRelease", hr))
    for repo in lists.flux.get("GitRepository") or []:
        if (str(repo["metadata"].get("namespace")), repo["metadata"]["name"]) in sources:
            out.append(_flux_body("GitRepository", repo))
    return sorted(out, key=lambda f: (f["kind"], f["namespace"] or "", f["name"]))


def _flux_body(kind: str, obj: Obj) -> Obj:
    status = obj.get("status") or {}
    ready, reason, message = _ready(obj)
    revision = (
        (status.get("artifact") or {}).get("revision")
        if kind == "GitRepository"
        else status.get("lastAppliedRevision")
    )
    return {
        "kind": kind,
        "namespace": obj["metadata"].get("namespace"),
        "name": obj["metadata"]["name"],
        "ready": ready,
        "reason": reason,
        "message": message,
        "revision": revision,
        "suspended": bool((obj.get("spec") or {}).get("suspend")),
    }


def _gpu_node(node: Obj, slices: Iterable[Obj]) -> bool:
    labels = node["metadata"].get("labels") or {}
    status = node.get("status") or {}
    name = node["metadata"]["name"]
    return (
        labels.get("nvidia.com/gpu.present") == "true"
        or "nvidia.com/gpu.count" in labels
        or any(k.startswith(GPU) for k in status.get("capacity") or {})
        or any((s.get("spec") or {}).get("nodeName") == name for s in slices)
    )


def build_snapshot(lists: Lists, *, taken_at: datetime, server: str | None = None) -> Obj:
    """The GpuSnapshot document for what the cluster answered (pure)."""
    slices = [s for s in lists.slices if (s.get("spec") or {}).get("driver") == DRIVER]
    nodes = []
    for n in sorted(lists.nodes, key=lambda n: n["metadata"]["name"]):
        status = n.get("status") or {}
        labels = n["metadata"].get("labels") or {}
        nodes.append(
            {
                "name": n["metadata"]["name"],
                "gpuNode": _gpu_node(n, slices),
                "osImage": (status.get("nodeInfo") or {}).get("osImage"),
                "capacity": _nvidia(status.get("capacity")),
                "allocatable": _nvidia(status.get("allocatable")),
                "labels": {k: str(v) for k, v in sorted(labels.items()) if k.startswith(NVIDIA)},
            }
        )
    agents: dict[str, Obj] = {}
    for ds in sorted(
        lists.daemonsets, key=lambda d: (d["metadata"].get("namespace"), d["metadata"]["name"])
    ):
        found = component(((ds.get("spec") or {}).get("template") or {}).get("spec") or {})
        if found is None:
            continue
        st = ds.get("status") or {}
        entry = agents.setdefault(found[0], {"component": found[0], "daemonSets": [], "pods": []})
        entry["daemonSets"].append(
            {
                "namespace": ds["metadata"].get("namespace"),
                "name": ds["metadata"]["name"],
                "desired": int(st.get("desiredNumberScheduled") or 0),
                "ready": int(st.get("numberReady") or 0),
                "available": int(st.get("numberAvailable") or 0),
            }
        )
    gpu_pods = []
    gpu_namespaces: set[str] = set()
    gpu_owners: set[str] = set()
    for p in sorted(
        lists.pods, key=lambda p: (p["metadata"].get("namespace"), p["metadata"]["name"])
    ):
        spec = p.get("spec") or {}
        found = component(spec)
        if found is not None:
            entry = agents.setdefault(
                found[0], {"component": found[0], "daemonSets": [], "pods": []}
            )
            entry["pods"].append(_agent_pod(p, found[1]))
            gpu_namespaces.add(str(p["metadata"].get("namespace")))
            continue
        requests = _requests(p)
        claims = _claim_names(p)
        if not requests and not claims and not spec.get("resourceClaims"):
            continue
        status = p.get("status") or {}
        reason, message = _unschedulable(p)
        workload = owner(p)
        gpu_owners.add(workload)
        gpu_namespaces.add(str(p["metadata"].get("namespace")))
        gpu_pods.append(
            {
                "namespace": p["metadata"].get("namespace"),
                "name": p["metadata"]["name"],
                "uid": p["metadata"].get("uid"),
                "owner": workload,
                "node": spec.get("nodeName"),
                "phase": status.get("phase", "Pending"),
                "terminating": bool(p["metadata"].get("deletionTimestamp")),
                "pendingReason": reason,
                "pendingMessage": message,
                "requests": requests,
                "claims": claims,
                "bridged": bool(status.get("extendedResourceClaimStatus")),
                # What Priority admission gave the pod (dra-preemption-lost).
                "priority": spec.get("priority") if isinstance(spec.get("priority"), int) else 0,
                "priorityClassName": spec.get("priorityClassName") or None,
                "preemptionPolicy": spec.get("preemptionPolicy") or "PreemptLowerPriority",
            }
        )
    series = lists.series
    doc: Obj = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "takenAt": taken_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "server": server,
        },
        "nodes": nodes,
        "agents": [agents[k] for k in sorted(agents)],
        "resourceSlices": [
            {
                "name": s["metadata"]["name"],
                "driver": s["spec"].get("driver"),
                "node": s["spec"].get("nodeName"),
                "pool": (s["spec"].get("pool") or {}).get("name"),
                "generation": int((s["spec"].get("pool") or {}).get("generation") or 0),
                "devices": [
                    {
                        "name": d.get("name"),
                        "allowMultipleAllocations": bool(d.get("allowMultipleAllocations")),
                        "capacity": {
                            str(k): str((v or {}).get("value"))
                            for k, v in sorted((d.get("capacity") or {}).items())
                        },
                    }
                    for d in s["spec"].get("devices") or []
                ],
            }
            for s in sorted(slices, key=lambda s: s["metadata"]["name"])
        ],
        "deviceClasses": [
            {
                "name": dc["metadata"]["name"],
                "extendedResourceName": (dc.get("spec") or {}).get("extendedResourceName"),
            }
            for dc in sorted(lists.device_classes, key=lambda d: d["metadata"]["name"])
        ],
        "resourceClaims": [
            _claim_body(c)
            for c in sorted(
                lists.claims,
                key=lambda c: (c["metadata"].get("namespace"), c["metadata"]["name"]),
            )
        ],
        "pods": gpu_pods,
        "flux": _flux(lists, gpu_namespaces=gpu_namespaces, gpu_owners=gpu_owners),
        "dcgmSeries": series,
    }
    # The card each GPU pod holds, from both ledgers (unknown for a device-plugin pod on a
    # node of several cards without dcgm-exporter series).
    held: dict[str, set[str]] = {}
    for cards in ledgers(doc).cards.values():
        for card in cards:
            for h in card.holders:
                held.setdefault(h.pod, set()).add(card.label)
    for pod in gpu_pods:
        pod["cards"] = sorted(held.get(f"{pod['namespace']}/{pod['name']}", set()))
    return doc


def load_snapshot(path: Path) -> Obj:
    """Read a GpuSnapshot file.

    Raises:
        InputError: unreadable, not JSON, or not a GpuSnapshot (naming the file).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read file: {err.strerror or err}", path=str(path)) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err.msg}", path=str(path), line=err.lineno) from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("apiVersion") != API_VERSION:
        raise InputError(
            f"not a GpuSnapshot (want apiVersion {API_VERSION}, kind {KIND})",
            path=str(path),
            line=1,
        )
    for key in ("nodes", "agents", "resourceSlices", "deviceClasses", "resourceClaims", "pods"):
        if not isinstance(doc.get(key), list):
            raise InputError(f"GpuSnapshot: {key} must be a list", path=str(path), line=1)
    return doc


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then a rename), so
    a failed run never leaves half a file."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def dump_snapshot(snapshot: Obj) -> bytes:
    """A snapshot as indented JSON (UTF-8)."""
    return (json.dumps(snapshot, indent=2) + "\n").encode()
