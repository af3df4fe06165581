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
