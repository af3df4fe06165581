"""DualAdvertiser and DoubleAllocation, on hand-built clusters."""

from __future__ import annotations

from typing import Any

from gpushift.engine import (
    DOUBLE_ALLOCATION,
    DUAL_ADVERTISER,
    GpuInfo,
    as_list,
    from_objects,
    nvidia_device_classes,
    nvidia_resource_slice,
    simulate,
)


def node(name: str, gpu: int | None) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    if gpu is not None:
        alloc["nvidia.com/gpu"] = str(gpu)
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.count": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": alloc},
    }


def slice_for(name: str) -> dict[str, Any]:
    gpu = GpuInfo(
        minor=0,
        uuid="GPU-x",
        product_name="NVIDIA L4",
        memory_bytes=24 * 2**30,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )
    return dict(nvidia_resource_slice(node_name=name, gpus=[gpu], sharing=5))


def gpu_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            **spec,
        },
    }


def claim_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "c", "resources": {"claims": [{"name": "g"}]}}],
        },
    }


TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t", "namespace": "default"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        }
    },
}


def test_both_ledgers_on_one_card() -> None:
    # The device plugin still advertises 5 replicas of the only card while the DRA driver
    # publishes it as gpu-0: one pod takes a replica of card 0, the other a share of gpu-0.
    sim = simulate(
        from_objects(
            [
                node("n", 5),
                slice_for("n"),
                *nvidia_device_classes(),
                TEMPLATE,
                gpu_pod("dp"),
                claim_pod("dra"),
            ]
        )
    )
    reasons = [(h.reason, h.node, h.card) for h in sim.hazards]
    assert reasons == [(DUAL_ADVERTISER, "n", None), (DOUBLE_ALLOCATION, "n", 0)]
    assert "default/dp (c)" in sim.hazards[1].message
    assert "default/dra" in sim.hazards[1].message
    assert sim.exit_code == 1
    events = [i for i in as_list(sim)["items"] if i["kind"] == "Event"]
    assert [
        (e["type"], e["reason"], e["involvedObject"]["kind"], e["involvedObject"]["name"])
        for e in events
    ] == [("Warning", DUAL_ADVERTISER, "Node", "n"), ("Warning", DOUBLE_ALLOCATION, "Node", "n")]


def test_dual_advertiser_without_tenants() -> None:
    sim = simulate(from_objects([node("n", 5), slice_for("n")]))
    assert [h.reason for h in sim.hazards] == [DUAL_ADVERTISER]


def test_zero_allocatable_is_not_dual() -> None:
    # A departed device plugin leaves its key at 0: that node is DRA only.
    sim = simulate(from_objects([node("n", 0), slice_for("n")]))
    assert sim.hazards == []


def test_more_tenants_than_replicas() -> None:
    # Two pods already bound to a node whose single card has one unit.
    sim = simulate(
        from_objects([node("n", 1), gpu_pod("a", nodeName="n"), gpu_pod("b", nodeName="n")])
    )
    (h,) = sim.hazards
    assert (h.reason, h.card) == (DOUBLE_ALLOCATION, 0)
    assert "2 device-plugin tenants but 1 replicas" in h.message


def test_renamed_shared_resource_is_the_same_card() -> None:
    # renameByDefault advertises nvidia.com/gpu.shared: still the device plugin's ledger.
    n = node("n", None)
    n["status"]["allocatable"]["nvidia.com/gpu.shared"] = "4"
    shared_pod = gpu_pod("dp")
    shared_pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu.shared": 1}
    sim = simulate(
        from_objects(
            [n, slice_for("n"), *nvidia_device_classes(), TEMPLATE, shared_pod, claim_pod("dra")]
        )
    )
    assert [(h.reason, h.card) for h in sim.hazards] == [
        (DUAL_ADVERTISER, None),
        (DOUBLE_ALLOCATION, 0),
    ]
    assert "nvidia.com/gpu.shared: 4" in sim.hazards[0].message
