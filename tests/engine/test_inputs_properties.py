"""Malformed objects are bad input (InputError), never a crash."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift._errors import InputError
from gpushift.engine import as_list, from_objects, human, simulate

junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n", "labels": {"a": "b"}},
    "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10", "nvidia.com/gpu": "1"}},
}
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "x"}},
    "spec": {
        "nodeSelector": {"a": "b"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": "x"}},
                    }
                ]
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "a",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {},
            }
        ],
        "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
    },
}
PATHS = [
    ("node", ["metadata", "labels"]),
    ("node", ["spec", "taints"]),
    ("node", ["spec", "taints", 0]),
    ("node", ["status", "allocatable"]),
    ("node", ["spec", "unschedulable"]),
    ("pod", ["metadata", "labels"]),
    ("pod", ["spec", "nodeSelector"]),
    ("pod", ["spec", "tolerations"]),
    ("pod", ["spec", "tolerations", 0]),
    ("pod", ["spec", "affinity"]),
    ("pod", ["spec", "affinity", "podAntiAffinity"]),
    ("pod", ["spec", "topologySpreadConstraints"]),
    ("pod", ["spec", "topologySpreadConstraints", 0]),
    ("pod", ["spec", "containers", 0]),
    ("pod", ["spec", "containers", 0, "resources"]),
    ("pod", ["spec", "priority"]),
    ("pod", ["spec", "priorityClassName"]),
    ("pod", ["spec", "resourceClaims"]),
]


@settings(max_examples=150, deadline=None)
@given(where=st.sampled_from(PATHS), value=junk)
def test_junk_in_known_fields_is_input_error_or_fine(
    where: tuple[str, list[Any]], value: Any
) -> None:
    objs = {"node": copy.deepcopy(NODE), "pod": copy.deepcopy(POD)}
    which, keys = where
    target: Any = objs[which]
    for k in keys[:-1]:
        target = target[k]
    target[keys[-1]] = value
    with contextlib.suppress(InputError):
        sim = simulate(from_objects([objs["node"], objs["pod"]]))
        # What the CLI prints must not fail either.
        human(sim)
        json.dumps(as_list(sim))


def _dra_objects() -> dict[str, Any]:
    from gpushift.engine import GpuInfo, nvidia_device_classes, nvidia_resource_slice

    gpu = GpuInfo(
        minor=0,
        uuid="GPU-0",
        product_name="NVIDIA L4",
        memory_bytes=2**30,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )
    node = copy.deepcopy(NODE)
    del node["status"]["allocatable"]["nvidia.com/gpu"]
    return {
        "node": node,
        "slice": copy.deepcopy(dict(nvidia_resource_slice(node_name="n", gpus=[gpu], sharing=2))),
        "class": copy.deepcopy(dict(nvidia_device_classes()[0])),
        "template": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "g",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "count": 1,
                                    "capacity": {"requests": {"shares": "1"}},
                                },
                            }
                        ]
                    }
                }
            },
        },
        "pod": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
                "containers": [
                    {
                        "name": "c",
                        "resources": {"claims": [{"name": "g"}], "limits": {"nvidia.com/gpu": 1}},
                    }
                ],
            },
        },
    }


DRA_PATHS = [
    ("slice", ["spec", "devices", 0, "attributes"]),
    ("slice", ["spec", "devices", 0, "attributes", "productName"]),
    ("slice", ["spec", "devices", 0, "capacity", "shares"]),
    ("slice", ["spec", "devices", 0, "capacity", "shares", "requestPolicy"]),
    ("slice", ["spec", "devices", 0, "allowMultipleAllocations"]),
    ("slice", ["spec", "pool"]),
    ("slice", ["spec", "pool", "resourceSliceCount"]),
    ("class", ["spec"]),
    ("class", ["spec", "extendedResourceName"]),
    ("class", ["spec", "selectors", 0]),
    ("template", ["spec", "spec", "devices", "requests", 0, "exactly"]),
    ("template", ["spec", "spec", "devices", "requests", 0, "exactly", "count"]),
    ("template", ["spec", "spec", "devices", "requests", 0, "exactly", "allocationMode"]),
    ("template", ["spec", "spec", "devices", "requests", 0, "exactly", "capacity"]),
    ("template", ["spec", "spec", "devices", "constraints"]),
    ("pod", ["spec", "resourceClaims", 0]),
    ("pod", ["spec", "containers", 0, "resources", "claims"]),
]


@settings(max_examples=200, deadline=None)
@given(where=st.sampled_from(DRA_PATHS), value=junk)
def test_junk_in_dra_objects_is_input_error_or_fine(
    where: tuple[str, list[Any]], value: Any
) -> None:
    objs = _dra_objects()
    which, keys = where
    target: Any = objs[which]
    for k in keys[:-1]:
        target = target[k]
    target[keys[-1]] = value
    with contextlib.suppress(InputError):
        sim = simulate(from_objects(list(objs.values())))
        human(sim)
        json.dumps(as_list(sim))


def _pod_variant(value: Any, where: list[Any] | None, name: str) -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    pod["metadata"]["name"] = name
    if where is not None:
        target: Any = pod
        for k in where[:-1]:
            target = target[k]
        target[where[-1]] = value
    return pod


def _outcome(objects: list[dict[str, Any]]) -> tuple[str, str | None] | None:
    try:
        from_objects(copy.deepcopy(objects))
    except InputError as err:
        return err.message, err.obj
    return None


@settings(max_examples=150, deadline=None)
@given(
    variants=st.lists(
        st.tuples(
            st.sampled_from([None, *(keys for which, keys in PATHS if which == "pod")]), junk
        ),
        min_size=1,
        max_size=3,
    ),
    picks=st.lists(st.integers(0, 2), min_size=1, max_size=6),
)
def test_pods_sharing_a_spec_are_checked_as_if_alone(
    variants: list[tuple[list[Any] | None, Any]], picks: list[int]
) -> None:
    # Fast path: a pod whose spec equals one already checked skips the spec checks. Loading
    # pods together must reject exactly when one of them alone is rejected, with its error.
    pods = []
    for i, pick in enumerate(picks):
        where, value = variants[pick % len(variants)]
        pods.append(_pod_variant(value, where, f"p-{i}"))
    together = _outcome([NODE, *pods])
    alone = {f"p-{i}": _outcome([NODE, pod]) for i, pod in enumerate(pods)}
    if together is None:
        assert all(v is None for v in alone.values())
        return
    assert any(v is not None for v in alone.values())
    named = [n for n in alone if together[1] is not None and together[1].endswith(f"/{n}")]
    if named:
        assert alone[named[0]] == together
