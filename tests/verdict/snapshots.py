"""Hand-built GpuSnapshot parts for tests that need no cluster."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def make_node(name: str, *, alloc: str | None = "5", labels: dict[str, str] | None = None) -> Obj:
    quantities = {} if alloc is None else {"nvidia.com/gpu": alloc}
    return {
        "name": name,
        "gpuNode": True,
        "osImage": "Talos (v1.13.0)",
        "capacity": dict(quantities),
        "allocatable": quantities,
        "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "1", **(labels or {})},
    }


def make_slice(node: str, shares: str = "5") -> Obj:
    return {
        "name": f"00000-gpu.nvidia.com-{node}-abcde",
        "driver": "gpu.nvidia.com",
        "node": node,
        "pool": node,
        "generation": 1,
        "devices": [
            {
                "name": "gpu-0",
                "allowMultipleAllocations": True,
                "capacity": {"memory": "23034Mi", "shares": shares},
            }
        ],
    }


def make_pod(name: str, *, node: str | None = "n1", phase: str = "Running", **extra: Any) -> Obj:
    body = {
        "namespace": "media",
        "name": name,
        "uid": f"uid-{name}",
        "owner": f"Deployment/media/{name.rsplit('-', 2)[0]}",
        "node": node,
        "phase": phase,
        "terminating": False,
        "pendingReason": None,
        "pendingMessage": None,
        "requests": {"nvidia.com/gpu": 1},
        "claims": [],
        "bridged": False,
    }
    body.update(extra)
    return body


def make_claim(name: str, pod: str, node: str = "n1", config: Any = None) -> Obj:
    return {
        "namespace": "media",
        "name": name,
        "deviceClasses": ["gpu.nvidia.com"],
        "allocated": True,
        "devices": [
            {
                "request": "gpu",
                "driver": "gpu.nvidia.com",
                "pool": node,
                "device": "gpu-0",
                "shareID": f"share-{name}",
                "consumedCapacity": {"shares": "1"},
            }
        ],
        "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}],
        "config": []
        if config is None
        else [{"requests": [], "driver": "gpu.nvidia.com", "parameters": config}],
        "extendedResource": False,
    }


def make_snapshot(**parts: Any) -> Obj:
    doc: Obj = {
        "apiVersion": "gpushift.dev/v1alpha1",
        "kind": "GpuSnapshot",
        "metadata": {"takenAt": "2026-12-01T00:00:00Z", "server": None},
        "nodes": [],
        "agents": [],
        "resourceSlices": [],
        "deviceClasses": [],
        "resourceClaims": [],
        "pods": [],
        "flux": [],
        "dcgmSeries": None,
    }
    doc.update(parts)
    return doc
