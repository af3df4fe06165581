"""KEP-5004 extended-resource bridging: which class maps a name, and the generated claim."""

from __future__ import annotations

from typing import Any

from gpushift.engine import bridge_claim, class_mapping, delegated


def cls(name: str, ern: str | None, created: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if created:
        meta["creationTimestamp"] = created
    spec = {"extendedResourceName": ern} if ern else {}
    return {"kind": "DeviceClass", "metadata": meta, "spec": spec}


def test_latest_class_wins_then_first_name() -> None:
    older = cls("a-old", "nvidia.com/gpu", "2026-01-01T00:00:00Z")
    newer = cls("z-new", "nvidia.com/gpu", "2026-02-01T00:00:00Z")
    assert class_mapping([newer, older])["nvidia.com/gpu"] == "z-new"
    same1 = cls("beta", "example.com/x", "2026-01-01T00:00:00Z")
    same2 = cls("alpha", "example.com/x", "2026-01-01T00:00:00Z")
    assert class_mapping([same1, same2])["example.com/x"] == "alpha"


def test_every_class_maps_its_implicit_name() -> None:
    m = class_mapping([cls("gpu.nvidia.com", None)])
    assert m == {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "gpu.nvidia.com"}


def test_delegation_needs_zero_allocatable_and_a_mapping() -> None:
    mapping = {"nvidia.com/gpu": "gpu.nvidia.com"}
    req = {"nvidia.com/gpu": 1}
    assert delegated(requests=req, allocatable={"nvidia.com/gpu": 5}, mapping=mapping) == {}
    assert delegated(requests=req, allocatable={"nvidia.com/gpu": 0}, mapping=mapping) == req
    assert delegated(requests=req, allocatable={}, mapping=mapping) == req
    assert delegated(requests=req, allocatable={}, mapping={}) == {}


def test_request_names_follow_container_and_sorted_resource_index() -> None:
    # Index space: init containers then containers. "app" (index 1) has sorted requests
    # [cpu, nvidia.com/gpu] -> request-1; "worker" (index 2) has only the GPU -> request-0.
    # The classic init container's 1 GPU is covered by the 3 long-lived ones, so it adds no
    # request and maps to the first long-lived request.
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {
            "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            "containers": [
                {
                    "name": "app",
                    "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": 1}},
                },
                {"name": "worker", "resources": {"limits": {"nvidia.com/gpu": 2}}},
            ],
        },
    }
    b = bridge_claim(
        pod=pod, resources={"nvidia.com/gpu": 3}, mapping={"nvidia.com/gpu": "gpu.nvidia.com"}
    )
    reqs = b.claim["spec"]["devices"]["requests"]
    assert [(r["name"], r["exactly"]["count"]) for r in reqs] == [
        ("container-1-request-1", 1),
        ("container-2-request-0", 2),
    ]
    assert all(set(r["exactly"]) == {"deviceClassName", "allocationMode", "count"} for r in reqs)
    assert b.mappings == [
        {
            "containerName": "app",
            "resourceName": "nvidia.com/gpu",
            "requestName": "container-1-request-1",
        },
        {
            "containerName": "worker",
            "resourceName": "nvidia.com/gpu",
            "requestName": "container-2-request-0",
        },
        {
            "containerName": "init",
            "resourceName": "nvidia.com/gpu",
            "requestName": "container-1-request-1",
        },
    ]
    meta = b.claim["metadata"]
    assert meta["generateName"] == "p-extended-resources-"
    assert meta["name"].startswith("p-extended-resources-")
    assert meta["ownerReferences"][0]["uid"] == "u"
