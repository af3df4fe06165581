"""llmkube ModelPools: InferenceServices that take turns on one exclusive GPU slot.

A ``inference.llmkube.dev`` ModelPool (defilantech/LLMKube api/v1alpha1/modelpool_types.go)
names member InferenceServices in its own namespace. llmkube's pool controller keeps at most
one member resident: it drains the incumbent and scales it to zero replicas before it scales
the next member to one, so the members never hold the GPU at the same time.

The controller only patches the members' ``spec.replicas``. It does not copy the pool's
``spec.nodeSelector`` (or anything else) into the member pods: each member schedules with
its own pod options. So the pool's ``nodeSelector`` is recorded on the ``ModelPool`` only and
member workloads keep their own pod spec.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from gpushift.gitops._model import Manifest, ModelPool, ModelPoolMember, Workload

#: The API group of llmkube's kinds (Model, InferenceService, ModelPool).
LLMKUBE_GROUP = "inference.llmkube.dev/"

#: CRD defaults (``+kubebuilder:default``) for fields left out.
DEFAULT_GPU = 1
DEFAULT_SWAP_POLICY = "sticky"
DEFAULT_SWAP_BUDGET = "300s"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


def is_model_pool(obj: Manifest) -> bool:
    """Whether ``obj`` is an llmkube ModelPool."""
    return obj.kind == "ModelPool" and obj.api_version.startswith(LLMKUBE_GROUP)


def _is_inference_service(obj: Manifest) -> bool:
    return obj.kind == "InferenceService" and obj.api_version.startswith(LLMKUBE_GROUP)


def same_namespace(a: str | None, b: str | None) -> bool:
    """Whether two namespaces may be the same one (an unknown namespace matches any)."""
    return a is None or b is None or a == b


def _member_names(spec: Mapping[str, Any]) -> list[tuple[int, str]]:
    """``spec.members[].inferenceServiceRef.name`` with each entry's index, in order.

    Entries without a name are skipped, as the pool controller skips them (they are neither
    members nor missing).
    """
    members = spec.get("members")
    out: list[tuple[int, str]] = []
    for i, m in enumerate(members if isinstance(members, list) else ()):
        name = _text(_dict(_dict(m).get("inferenceServiceRef")).get("name"))
        if name:
            out.append((i, name))
    return out


def model_pool(obj: Manifest, services: Mapping[str, Sequence[Manifest]]) -> ModelPool:
    """The ModelPool ``obj``, its members resolved against ``services`` (InferenceServices by
    name).

    A member is found when an InferenceService of that name is in the pool's namespace (any
    InferenceService for an inactive pool, an active one for an active pool: what a deployed
    pool would find in the cluster). ``gpu``, ``swapPolicy`` and ``swapBudget`` take their CRD
    defaults when left out or not of their type; ``default`` is None when empty.
    """
    spec = _dict(obj.body.get("spec"))
    members = tuple(
        ModelPoolMember(
            name=name,
            found=any(
                s.name == name
                and same_namespace(s.namespace, obj.namespace)
                and (s.active or not obj.active)
                for s in services.get(name, ())
            ),
            source=obj.source.child(("spec", "members", i)),
        )
        for i, name in _member_names(spec)
    )
    gpu = spec.get("gpu")
    budget = spec.get("swapBudget")
    return ModelPool(
        name=obj.name,
        namespace=obj.namespace,
        members=members,
        default=_text(spec.get("default")) or None,
        node_selector={str(k): _text(v) for k, v in _dict(spec.get("nodeSelector")).items()},
        gpu=gpu if isinstance(gpu, int) and not isinstance(gpu, bool) else DEFAULT_GPU,
        swap_policy=_text(spec.get("swapPolicy")) or DEFAULT_SWAP_POLICY,
        swap_budget=budget if isinstance(budget, str) and budget else DEFAULT_SWAP_BUDGET,
        obj=obj,
    )


def model_pools(objects: Sequence[Manifest]) -> tuple[ModelPool, ...]:
    """Every ModelPool in ``objects`` (active and inactive), in repository order."""
    services: dict[str, list[Manifest]] = {}
    for o in objects:
        if _is_inference_service(o):
            services.setdefault(o.name, []).append(o)
    return tuple(model_pool(o, services) for o in objects if is_model_pool(o))


def pool_of(workload: Workload, pools: Sequence[ModelPool]) -> ModelPool | None:
    """The ModelPool that holds an llmkube workload's GPU slot, or None.

    That is the first pool in the workload's namespace that lists its InferenceService and is
    deployed exactly when the workload is: an active pool takes only active members (an
    inactive InferenceService is missing to it), and an inactive pool never takes a deployed
    InferenceService's slot.
    """
    if workload.origin_kind != "llmkube":
        return None
    isvc = workload.origin
    for pool in pools:
        if (
            pool.active == workload.active
            and same_namespace(pool.namespace, isvc.namespace)
            and isvc.name in pool.member_names
        ):
            return pool
    return None


def mark_members(workloads: Sequence[Workload], pools: Sequence[ModelPool]) -> tuple[Workload, ...]:
    """``workloads`` with each pool member's ``pool`` set to its pool's name.

    Only the name is set: the pool controller leaves the member pods' spec as the
    InferenceService renders it (see the module docstring).
    """
    if not pools:
        return tuple(workloads)
    out: list[Workload] = []
    for w in workloads:
        pool = pool_of(w, pools)
        out.append(w if pool is None else dataclasses.replace(w, pool=pool.name))
    return tuple(out)
