"""Extended-resource bridging (KEP-5004): ``nvidia.com/gpu`` requests served by DRA.

Per node, the device plugin wins where ``status.allocatable[<name>] > 0``; otherwise a
DeviceClass whose ``extendedResourceName`` is the name (or the implicit
``deviceclass.resource.kubernetes.io/<class>``) takes it, and the scheduler allocates a
generated ResourceClaim owned by the pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpushift.engine import _requests
from gpushift.engine._core_types import (
    ContainerExtendedResourceRequest,
    PodExtendedResourceClaimStatus,
)
from gpushift.engine._workloads import stable_suffix

# k8s.io/api resource/v1 types.go constants.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
FINALIZER = "resource.kubernetes.io/delete-protection"


def class_mapping(classes: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Extended resource name → DeviceClass name.

    Each class maps its implicit name ``deviceclass.resource.kubernetes.io/<class>``; an
    explicit ``extendedResourceName`` shared by several classes goes to the class created
    last, and among classes created at the same time to the name that sorts first
    (k8s.io/api resource/v1 DeviceClassSpec.ExtendedResourceName).
    """
    out: dict[str, str] = {}
    best: dict[str, tuple[str, str]] = {}
    for c in classes:
        meta = c.get("metadata") or {}
        name = str(meta.get("name") or "")
        out[IMPLICIT_PREFIX + name] = name
        ern = (c.get("spec") or {}).get("extendedResourceName")
        if not ern:
            continue
        created = str(meta.get("creationTimestamp") or "")
        cur = best.get(ern)
        # RFC 3339 timestamps in UTC sort as strings; later wins, then the smaller name.
        if cur is None or created > cur[0] or (created == cur[0] and name < cur[1]):
            best[ern] = (created, name)
    for ern, (_, name) in best.items():
        out[ern] = name
    return out


def delegated(
    *, requests: Mapping[str, int], allocatable: Mapping[str, int], mapping: Mapping[str, str]
) -> dict[str, int]:
    """The pod's extended resources that DRA serves on this node (name → amount).

    A resource is delegated when the node's allocatable for it is 0 or absent and a
    DeviceClass maps it (k8s.io/kubernetes scheduler helper ShouldDelegateResourceToDRA).
    """
    return {
        name: amount
        for name, amount in requests.items()
        if amount > 0 and name in mapping and allocatable.get(name, 0) <= 0
    }


@dataclass(frozen=True, slots=True)
class BridgeClaim:
    """A generated claim and the pod status that refers to it."""

    claim: dict[str, Any]
    mappings: list[ContainerExtendedResourceRequest]


def claim_name(*, pod_name: str, seed: str) -> str:
    """The generated claim's name: ``<pod>-extended-resources-<5 chars>``."""
    return f"{pod_name}-extended-resources-{stable_suffix(seed)}"


def bridge_claim(
    *, pod: Mapping[str, Any], resources: Mapping[str, int], mapping: Mapping[str, str]
) -> BridgeClaim:
    """The ResourceClaim the scheduler creates for ``resources`` of ``pod``.

    One request per container and resource, named ``container-<i>-request-<j>`` (``i`` counts
    init containers then containers, ``j`` is the resource's index among the container's sorted
    request names) with ``exactly: {deviceClassName, allocationMode: ExactCount, count}`` and no
    capacity request (k8s.io/kubernetes dynamicresources extendeddynamicresources.go).
    Classic init containers reuse the long-lived requests; only the largest one adds a request,
    for the part the long-lived requests do not already cover.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    pod_name = str(meta.get("name"))
    ns = str(meta.get("namespace") or "default")
    requests: list[dict[str, Any]] = []
    mappings: list[ContainerExtendedResourceRequest] = []
    long_lived: dict[str, int] = {}
    first_long: dict[str, str] = {}
    init_best: dict[str, tuple[int, str, str]] = {}
    init_names: dict[str, list[str]] = {}
    containers = _requests.all_containers(spec)
    n_init = len(spec.get("initContainers") or [])
    for i, c in enumerate(containers):
        creqs = _requests.container_requests(c)
        cname = str(c.get("name"))
        classic_init = i < n_init and not _requests.is_sidecar(c)
        for j, rname in enumerate(sorted(creqs)):
            if rname not in resources or creqs[rname] <= 0:
                continue
            req_name = f"container-{i}-request-{j}"
            if classic_init:
                init_names.setdefault(rname, []).append(cname)
                if creqs[rname] > init_best.get(rname, (0, "", ""))[0]:
                    init_best[rname] = (creqs[rname], req_name, cname)
                continue
            requests.append(
                _request(name=req_name, device_class=mapping[rname], count=creqs[rname])
            )
            mappings.append(
                {"containerName": cname, "resourceName": rname, "requestName": req_name}
            )
            long_lived[rname] = long_lived.get(rname, 0) + creqs[rname]
            first_long.setdefault(rname, req_name)
    for rname, (count, req_name, _cname) in init_best.items():
        extra = count - long_lived.get(rname, 0)
        if extra > 0:
            requests.append(_request(name=req_name, device_class=mapping[rname], count=extra))
            target = req_name
        else:
            target = first_long[rname]
        for name in init_names[rname]:
            mappings.append({"containerName": name, "resourceName": rname, "requestName": target})
    uid = str(meta.get("uid") or "")
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name(pod_name=pod_name, seed=f"{ns}/{pod_name}/extended-resources"),
            "generateName": f"{pod_name}-extended-resources-",
            "namespace": ns,
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": [FINALIZER],
        },
        "spec": {"devices": {"requests": requests}},
    }
    return BridgeClaim(claim, mappings)


def _request(*, name: str, device_class: str, count: int) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {
            "deviceClassName": device_class,
            "allocationMode": "ExactCount",
            "count": count,
        },
    }


def status_entry(bridge: BridgeClaim) -> PodExtendedResourceClaimStatus:
    """``pod.status.extendedResourceClaimStatus`` for a bound pod."""
    return {
        "requestMappings": bridge.mappings,
        "resourceClaimName": bridge.claim["metadata"]["name"],
    }
