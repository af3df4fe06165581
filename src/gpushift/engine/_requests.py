"""Pod resource requests, computed the way kube-scheduler computes them.

Quantities are integers: cpu in milli-cores, everything else in whole units (memory in bytes,
extended resources in counts), as the scheduler's ``framework.Resource`` stores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift import _quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"

# k8s.io/kubernetes pkg/scheduler/util/pod_resources.go: used for scoring pods without requests.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

#: A resource list: resource name → integer amount (milli-cpu for cpu).
Resources = dict[str, int]


def amount(name: str, raw: str | int | float) -> int:
    """A quantity as the scheduler stores it: milli-units for cpu, rounded-up units otherwise.

    Raises QuantityError for a string Kubernetes would not accept.
    """
    return _quantity.milli_value(raw) if name == CPU else _quantity.value(raw)


def is_extended(name: str) -> bool:
    """Whether ``name`` is an extended resource (``vendor.domain/name``, not ``kubernetes.io``)."""
    # k8s.io/kubernetes pkg/apis/core/v1/helper IsExtendedResourceName.
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def container_requests(container: Mapping[str, Any]) -> Resources:
    """A container's requests, with a limit standing in for a missing request.

    The API server defaults each unset request to its limit, so ``limits: {nvidia.com/gpu: 1}``
    alone requests one GPU. Raises QuantityError on an invalid quantity.
    """
    res = container.get("resources") or {}
    limits = res.get("limits") or {}
    requests = res.get("requests") or {}
    out: Resources = {}
    for name, raw in limits.items():
        out[str(name)] = amount(str(name), raw)
    for name, raw in requests.items():
        out[str(name)] = amount(str(name), raw)
    return out


def _add(into: Resources, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: Resources, other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _is_sidecar(container: Mapping[str, Any]) -> bool:
    return container.get("restartPolicy") == "Always"


def _aggregate(spec: Mapping[str, Any], *, non_zero: bool) -> Resources:
    # k8s.io/component-helpers resource/helpers.go PodRequests (regular containers summed,
    # native sidecars added and carried into later init containers, init max taken).
    def reqs(c: Mapping[str, Any]) -> Resources:
        r = container_requests(c)
        if non_zero:
            if not r.get(CPU):
                r[CPU] = DEFAULT_MILLI_CPU_REQUEST
            if not r.get(MEMORY):
                r[MEMORY] = DEFAULT_MEMORY_REQUEST
        return r

    total: Resources = {}
    for c in spec.get("containers") or []:
        _add(total, reqs(c))
    sidecars: Resources = {}
    init_max: Resources = {}
    for c in spec.get("initContainers") or []:
        r = reqs(c)
        if _is_sidecar(c):
            _add(total, r)
            _add(sidecars, r)
            _max(init_max, sidecars)
        else:
            tmp = dict(r)
            _add(tmp, sidecars)
            _max(init_max, tmp)
    _max(total, init_max)
    overhead = spec.get("overhead") or {}
    for name, raw in overhead.items():
        total[str(name)] = total.get(str(name), 0) + amount(str(name), raw)
    return total


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """The pod's effective requests (what NodeResourcesFit compares with free allocatable).

    Regular containers and native sidecars (init containers with ``restartPolicy: Always``)
    are summed; each classic init container counts together with the sidecars started before
    it, and the pod needs the larger of that maximum and the sum. ``spec.overhead`` is added.
    Raises QuantityError on an invalid quantity.
    """
    return _aggregate(spec, non_zero=False)


def pod_non_zero_requests(spec: Mapping[str, Any]) -> Resources:
    """Requests for scoring: containers without cpu or memory count 100m and 200Mi."""
    return _aggregate(spec, non_zero=True)


def all_containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Init containers then regular containers: the index space of bridged requests."""
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def is_sidecar(container: Mapping[str, Any]) -> bool:
    """Whether an init container is a native sidecar (``restartPolicy: Always``)."""
    return _is_sidecar(container)
