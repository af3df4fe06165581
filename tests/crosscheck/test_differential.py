"""Random small GPU clusters, each run by simulate and by kube-scheduler v1.37.2: no difference.

A cluster has nodes under the device plugin's time-slicing (``nvidia.com/gpu`` = cards ×
replicas) and nodes under the NVIDIA DRA driver (consumable shares, or whole cards), the
driver's DeviceClasses (``gpu.nvidia.com`` bridges ``nvidia.com/gpu``), and pods of four
kinds: bridged ``nvidia.com/gpu`` requests, claims from a template, a claim of their own
(a whole card where the driver does not share), and CPU only; bare or in Deployments, at
three priorities, some bound already (low priority, so others may preempt them), with a
NoSchedule taint on one kind of node that some pods tolerate.

What the generator avoids, and why (docs/simulate.md, "The differential test"):

* Inputs where kube-scheduler's random choice among equally scored nodes could change the
  outcome: simulate is run again, picking among equal nodes at random (``tie_break``), eight
  times; an input whose outcome then changes is not used. Nodes of one kind are alike.
* A preempted pod of a controller that is not in the input (out of scope: nothing on the
  cluster would make it again, simulate assumes its controller does): pods bound in the input
  are bare.

Hypothesis runs a fixed set of examples (``derandomize``), generate phase only: one upstream
run each, on one control plane reset between them.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from gpushift import crosscheck, engine

pytestmark = [pytest.mark.upstream, pytest.mark.slow(seconds=300)]

#: Examples per run: about 3 s each on the 2-core machine, resets included.
EXAMPLES = 60
TAINT = {"key": "gpushift.dev/dedicated", "value": "gpu", "effect": "NoSchedule"}
TOLERATION = {"key": "gpushift.dev/dedicated", "operator": "Equal", "value": "gpu"}
PRIORITIES = {"high": 1000, "low": -10}


@dataclass(frozen=True)
class PodSpec:
    """One generated pod (or Deployment)."""

    kind: str  # bridged | template | claim | cpu
    units: int
    priority: str | None
    tolerates: bool
    replicas: int | None  # None: a bare pod
    namespace: str
    cpu: str
    bound_to: int | None  # a bare low-priority pod bound to this node already


@dataclass(frozen=True)
class ClusterSpec:
    """One generated cluster: alike nodes of each kind, and the pods."""

    dp_nodes: int
    dp_cards: int
    dp_replicas: int
    dra_nodes: int
    dra_cards: int
    dra_sharing: str | int  # "disabled" (whole cards) or consumable shares per card
    tainted: str | None  # "dp" or "dra": that kind carries TAINT
    pods: tuple[PodSpec, ...]

    @property
    def nodes(self) -> int:
        return self.dp_nodes + self.dra_nodes


@st.composite
def clusters(draw: st.DrawFn) -> ClusterSpec:
    dp = draw(st.integers(0, 3))
    dra = draw(st.integers(0 if dp else 1, 3))
    n = dp + dra
    pods: list[PodSpec] = []
    bound_nodes: set[int] = set()
    for _ in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["bridged", "bridged", "template", "claim", "cpu"]))
        bound = None
        if draw(st.integers(0, 3)) == 0:
            free = [i for i in range(n) if i not in bound_nodes]
            if free and kind in ("bridged", "cpu"):
                bound = draw(st.sampled_from(free))
                bound_nodes.add(bound)
        pods.append(
            PodSpec(
                kind=kind,
                units=1 if bound is not None else draw(st.integers(1, 2)),
                priority="low"
                if bound is not None
                else draw(st.sampled_from([None, "high", "low"])),
                tolerates=draw(st.booleans()),
                replicas=None
                if bound is not None or not draw(st.booleans())
                else draw(st.integers(1, 3)),
                namespace=draw(st.sampled_from(["default", "team"])),
                cpu=draw(st.sampled_from(["100m", "500m", "2"])),
                bound_to=bound,
            )
        )
    return ClusterSpec(
        dp_nodes=dp,
        dp_cards=draw(st.integers(1, 2)),
        dp_replicas=draw(st.sampled_from([1, 2, 4])),
        dra_nodes=dra,
        dra_cards=draw(st.integers(1, 2)),
        dra_sharing=draw(st.sampled_from(["disabled", 2, 4])),
        tainted=draw(st.sampled_from([None, "dp", "dra"])),
        pods=tuple(pods),
    )


def _gpu(node: str, minor: int) -> engine.GpuInfo:
    return engine.GpuInfo(
        minor=minor,
        uuid=f"GPU-{node}-{minor}",
        product_name="NVIDIA L4",
        memory_bytes=24 * 2**30,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )


def render(spec: ClusterSpec, names: list[str]) -> list[dict[str, Any]]:
    """The cluster's objects, node ``i`` named ``names[i]`` (device-plugin nodes first)."""
    objs: list[dict[str, Any]] = []
    for i in range(spec.nodes):
        name, dp = names[i], i < spec.dp_nodes
        labels = {"kubernetes.io/hostname": name, "gpushift.dev/kind": "dp" if dp else "dra"}
        alloc = {"cpu": "16", "memory": "64Gi", "pods": "110"}
        if dp:
            labels |= {
                "nvidia.com/gpu.count": str(spec.dp_cards),
                "nvidia.com/gpu.replicas": str(spec.dp_replicas),
            }
            alloc["nvidia.com/gpu"] = str(spec.dp_cards * spec.dp_replicas)
        node: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": alloc},
        }
        if spec.tainted == ("dp" if dp else "dra"):
            node["spec"] = {"taints": [dict(TAINT)]}
        objs.append(node)
        if not dp:
            gpus = [_gpu(name, k) for k in range(spec.dra_cards)]
            objs.append(
                dict(
                    engine.nvidia_resource_slice(
                        node_name=name, gpus=gpus, sharing=spec.dra_sharing
                    )
                )
            )
    objs += [dict(c) for c in engine.nvidia_device_classes()]
    for pname, value in PRIORITIES.items():
        objs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": pname},
                "value": value,
            }
        )
    request = [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
    for ns in sorted({p.namespace for p in spec.pods if p.kind == "template"}):
        objs.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "gpu", "namespace": ns},
                "spec": {"spec": {"devices": {"requests": request}}},
            }
        )
    for i, p in enumerate(spec.pods):
        name = f"p{i}"
        container: dict[str, Any] = {"name": "main", "resources": {"requests": {"cpu": p.cpu}}}
        pspec: dict[str, Any] = {"containers": [container]}
        if p.kind == "bridged":
            container["resources"]["limits"] = {"nvidia.com/gpu": p.units}
        elif p.kind in ("template", "claim"):
            ref = (
                {"resourceClaimTemplateName": "gpu"}
                if p.kind == "template"
                else {"resourceClaimName": f"{name}-card"}
            )
            pspec["resourceClaims"] = [{"name": "gpu", **ref}]
            container["resources"]["claims"] = [{"name": "gpu"}]
            if p.kind == "claim":
                objs.append(
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceClaim",
                        "metadata": {"name": f"{name}-card", "namespace": p.namespace},
                        "spec": {"devices": {"requests": request}},
                    }
                )
        if p.priority:
            pspec["priorityClassName"] = p.priority
        if p.tolerates:
            pspec["tolerations"] = [dict(TOLERATION)]
        if p.bound_to is not None:
            pspec["nodeName"] = names[p.bound_to]
        if p.replicas is None:
            objs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": p.namespace},
                    "spec": pspec,
                }
            )
        else:
            objs.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": f"app{i}", "namespace": p.namespace},
                    "spec": {
                        "replicas": p.replicas,
                        "selector": {"matchLabels": {"app": f"app{i}"}},
                        "template": {"metadata": {"labels": {"app": f"app{i}"}}, "spec": pspec},
                    },
                }
            )
    return objs


def simulated(objects: list[dict[str, Any]]) -> dict[str, Any]:
    sim = engine.simulate(engine.from_objects(copy.deepcopy(objects)))
    out: dict[str, Any] = json.loads(json.dumps(engine.as_list(sim)))
    return out


def tie_free(spec: ClusterSpec, *, draws: int = 8) -> bool:
    """Whether simulate's outcome stays the same, up to the comparison, when it picks among
    equally scored nodes at random (``tie_break``), as kube-scheduler does, ``draws`` times."""
    objects = render(spec, [f"node-{i}" for i in range(spec.nodes)])
    cluster = crosscheck.Cluster.of(objects)
    base = simulated(objects)
    for seed in range(draws):
        sim = engine.simulate(
            engine.from_objects(copy.deepcopy(objects)), tie_break=random.Random(seed)
        )
        if crosscheck.compare(base, json.loads(json.dumps(engine.as_list(sim))), cluster):
            return False
    return True


@pytest.fixture(scope="module")
def session() -> Iterator[crosscheck.Session]:
    with crosscheck.Session(quiet=1.5) as s:
        yield s


@settings(
    derandomize=True,
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(clusters())
def test_simulate_and_kube_scheduler_agree_on_random_clusters(
    session: crosscheck.Session, spec: ClusterSpec
) -> None:
    assume(tie_free(spec))
    objects = render(spec, [f"node-{i}" for i in range(spec.nodes)])
    result = crosscheck.against_upstream(objects, simulated(objects), session=session)
    assert [d.as_dict() for d in result.differences] == [], json.dumps(objects)
