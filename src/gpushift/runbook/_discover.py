"""Finding the GPU consumers in the cluster, pure: pods in, consumers out.

A consumer pod holds ``nvidia.com/*`` (``nvidia.com/gpu`` or a renamed shared resource such as
``nvidia.com/gpu.shared``) or a claim on a ``gpu.nvidia.com`` device. Its workload is found
through controller ownerReferences (ReplicaSet to Deployment, Job to CronJob, and on to an
operator resource such as an llmkube InferenceService); its Flux owners through the labels
helm-controller and kustomize-controller put on what they apply. The GPU agents (device plugin,
DRA kubelet plugin, GFD, dcgm-exporter, validator, the operator) are not consumers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpushift._obj import Obj
from gpushift.runbook._model import DRA_DRIVER, GPU_RESOURCE, Consumer, ObjectRef
from gpushift.runbook._view import View, api_version_of

#: Name fragments of the GPU stack's own pods (gpu-operator operands, the device plugin chart,
#: the DRA driver chart); they never count as consumers.
AGENT_NAMES = (
    "nvidia-device-plugin",
    "device-plugin",
    "dra-driver",
    "kubelet-plugin",
    "gpu-feature-discovery",
    "dcgm-exporter",
    "operator-validator",
    "container-toolkit",
    "gpu-operator",
    "nvidia-driver",
    "mig-manager",
)
_BUILTIN_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet"}
_HR_LABEL = "helm.toolkit.fluxcd.io"
_KS_LABEL = "kustomize.toolkit.fluxcd.io"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name`` of a pod."""
    meta = _meta(pod)
    return f"{meta.get('namespace')}/{meta.get('name')}"


def gpu_resources(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``nvidia.com/*`` extended resources a pod's containers ask for, sorted."""
    spec = pod.get("spec") or {}
    found: set[str] = set()
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = container.get("resources") or {}
        for part in ("requests", "limits"):
            for name, value in (res.get(part) or {}).items():
                if str(name).startswith("nvidia.com/") and str(value) not in ("0", ""):
                    found.add(str(name))
    return tuple(sorted(found))


def pod_claims(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the ResourceClaims a pod uses: from its status (templates and direct
    claims) and its extended-resource claim."""
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    names = [
        str(s.get("resourceClaimName"))
        for s in status.get("resourceClaimStatuses") or []
        if s.get("resourceClaimName")
    ]
    names += [
        str(c["resourceClaimName"])
        for c in spec.get("resourceClaims") or []
        if c.get("resourceClaimName")
    ]
    ext = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if ext:
        names.append(str(ext))
    return tuple(dict.fromkeys(names))


def claim_is_gpu(claim: Mapping[str, Any]) -> bool:
    """A claim allocated a ``gpu.nvidia.com`` device, or asks for an NVIDIA device class."""
    results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
        "results"
    ) or []
    if any(r.get("driver") == DRA_DRIVER for r in results):
        return True
    for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        subs = [req.get("exactly") or req, *(req.get("firstAvailable") or [])]
        if any(str(s.get("deviceClassName") or "").endswith("nvidia.com") for s in subs):
            return True
    return False


def is_agent(pod: Mapping[str, Any]) -> bool:
    """One of the GPU stack's own pods (by its name or its owner's)."""
    meta = _meta(pod)
    names = [str(meta.get("name") or "")]
    names += [str(o.get("name") or "") for o in meta.get("ownerReferences") or []]
    return any(fragment in n for n in names for fragment in AGENT_NAMES)


def active(pod: Mapping[str, Any]) -> bool:
    """Holds what it was given: not Succeeded or Failed (a Terminating pod still holds its
    devices until it is gone)."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def holds_gpu(pod: Mapping[str, Any], view: View) -> bool:
    """A consumer pod that still holds (or asks for) a GPU."""
    if is_agent(pod) or not active(pod):
        return False
    if gpu_resources(pod):
        return True
    ns = str(_meta(pod).get("namespace") or "")
    for name in pod_claims(pod):
        claim = view.get("ResourceClaim", ns, name)
        if claim is not None and claim_is_gpu(claim):
            return True
    # A claim from a template not created yet: judge by the template's class.
    for c in (pod.get("spec") or {}).get("resourceClaims") or []:
        if c.get("resourceClaimTemplateName") and not pod_claims(pod):
            return True
    return False


def gpu_pods(view: View) -> list[Obj]:
    """Every consumer pod holding a GPU, by namespace/name."""
    return sorted((p for p in view.all("Pod") if holds_gpu(p, view)), key=pod_key)


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for owner in _meta(obj).get("ownerReferences") or []:
        if owner.get("controller"):
            return dict(owner)
    refs = _meta(obj).get("ownerReferences") or []
    return dict(refs[0]) if refs else None


def _ref(obj: Mapping[str, Any], kind: str) -> ObjectRef:
    meta = _meta(obj)
    api = str(obj.get("apiVersion") or api_version_of(kind))
    return ObjectRef(api, kind, str(meta.get("namespace") or ""), str(meta.get("name")))


def workload_of(pod: Mapping[str, Any], view: View) -> tuple[ObjectRef | None, ObjectRef | None]:
    """(the workload, the operator resource owning it) of a pod; (None, None) for a bare pod.

    The chain is followed through controller ownerReferences: ReplicaSet to Deployment, Job
    to CronJob, then one more hop to a non-built-in owner (the operator resource).
    """
    ns = str(_meta(pod).get("namespace") or "")
    owner = _controller(pod)
    if owner is None:
        return None, None
    kind, name = str(owner.get("kind")), str(owner.get("name"))
    obj = view.get(kind, ns, name)
    if kind == "ReplicaSet" and obj is not None:
        up = _controller(obj)
        if up is not None and up.get("kind") == "Deployment":
            kind, name = "Deployment", str(up.get("name"))
            obj = view.get(kind, ns, name)
    if kind == "Job" and obj is not None:
        up = _controller(obj)
        if up is not None and up.get("kind") == "CronJob":
            kind, name = "CronJob", str(up.get("name"))
            obj = view.get(kind, ns, name)
    if kind not in _BUILTIN_WORKLOADS:
        # The pod is an operator's own (no built-in workload between).
        return ObjectRef(str(owner.get("apiVersion")), kind, ns, name), None
    workload = (
        _ref(obj, kind) if obj is not None else ObjectRef(api_version_of(kind), kind, ns, name)
    )
    operator = None
    if obj is not None:
        up = _controller(obj)
        if up is not None and str(up.get("kind")) not in _BUILTIN_WORKLOADS:
            operator = ObjectRef(
                str(up.get("apiVersion")), str(up.get("kind")), ns, str(up["name"])
            )
    return workload, operator


def flux_owners(
    obj: Mapping[str, Any] | None, view: View, *, stop: ObjectRef | None
) -> list[ObjectRef]:
    """The HelmRelease and Kustomization that apply ``obj``, innermost first, from the
    ``helm.toolkit.fluxcd.io/*`` and ``kustomize.toolkit.fluxcd.io/*`` labels; the chain ends
    before ``stop`` (the Kustomization that applies the merge) and after the first
    Kustomization."""
    out: list[ObjectRef] = []
    cur = obj
    seen: set[str] = set()
    while cur is not None:
        labels = _meta(cur).get("labels") or {}
        hr = labels.get(f"{_HR_LABEL}/name"), labels.get(f"{_HR_LABEL}/namespace")
        ks = labels.get(f"{_KS_LABEL}/name"), labels.get(f"{_KS_LABEL}/namespace")
        if hr[0] and hr[1]:
            ref = ObjectRef(api_version_of("HelmRelease"), "HelmRelease", str(hr[1]), str(hr[0]))
        elif ks[0] and ks[1]:
            ref = ObjectRef(
                api_version_of("Kustomization"), "Kustomization", str(ks[1]), str(ks[0])
            )
        else:
            break
        if ref == stop or ref.key in seen:
            break
        seen.add(ref.key)
        out.append(ref)
        if ref.kind == "Kustomization":
            break
        cur = view.find(ref)
    return out


def discover(view: View, *, apps: ObjectRef | None) -> tuple[list[Consumer], list[str]]:
    """The GPU consumers of the cluster, sorted, and the pods that cannot be stopped (bare
    pods) as messages."""
    by_workload: dict[ObjectRef, dict[str, Any]] = {}
    loose: list[str] = []
    for pod in gpu_pods(view):
        workload, operator = workload_of(pod, view)
        if workload is None:
            loose.append(f"pod {pod_key(pod)} holds a GPU and no workload owns it")
            continue
        entry = by_workload.setdefault(
            workload, {"operator": operator, "pods": [], "resources": set()}
        )
        entry["pods"].append(pod_key(pod))
        entry["running"] = entry.get("running", 0) + (
            (pod.get("status") or {}).get("phase") == "Running"
        )
        entry["resources"].update(gpu_resources(pod))
        entry["claims"] = entry.get("claims", False) or bool(
            (pod.get("spec") or {}).get("resourceClaims")
        )
    consumers: list[Consumer] = []
    for workload, entry in sorted(by_workload.items()):
        op: ObjectRef | None = entry["operator"]
        top = view.find(op) if op else view.find(workload)
        owners = flux_owners(top, view, stop=apps)
        resources = tuple(sorted(entry["resources"]))
        consumers.append(
            Consumer(
                workload=workload,
                owner=op,
                pods=tuple(sorted(entry["pods"])),
                flux=tuple(owners),
                # An operator resource renders only extended-resource limits: under DRA its
                # pods get their GPU through bridging.
                bridged=op is not None and GPU_RESOURCE in resources,
                resources=resources,
                running=int(entry["running"]),
            )
        )
    return consumers, loose


def merge_consumers(known: Iterable[Consumer], found: Iterable[Consumer]) -> tuple[Consumer, ...]:
    """Journaled consumers first (what a resumed run recorded before it scaled anything),
    then any found now that the journal does not have."""
    out = {c.workload: c for c in known}
    for c in found:
        out.setdefault(c.workload, c)
    return tuple(sorted(out.values(), key=lambda c: c.workload))
