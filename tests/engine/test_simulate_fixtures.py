"""simulate on objects read in place from the real GitOps fixture repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpushift.engine import (
    GpuInfo,
    load_inputs,
    nvidia_device_classes,
    nvidia_resource_slice,
    simulate,
)

REPOS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "repos"
AFTER = REPOS / "LukeEvansTech__talos-cluster__later-dra" / "kubernetes" / "apps"
BEFORE = REPOS / "LukeEvansTech__talos-cluster" / "kubernetes" / "apps"
TEMPLATE = AFTER / "media" / "gpu-claim-templates" / "app" / "resourceclaimtemplate.yaml"
PRIORITY = BEFORE / "ai" / "llmkube" / "models" / "priorityclass.yaml"

pytestmark = pytest.mark.skipif(
    not (TEMPLATE.is_file() and PRIORITY.is_file()), reason="fixture repositories not present"
)


def test_real_claim_template_and_priority_class(tmp_path: Path) -> None:
    # The repository's ResourceClaimTemplate any-nvidia-gpu (one unqualified gpu.nvidia.com
    # request) and its PriorityClass gpu-preemptible (value -100). One node, one card,
    # exclusive (no consumable shares): one claim fits. The model is listed and created
    # first, but the media pod has priority 0 > -100 and is queued first, so it gets the card.
    gpu = GpuInfo(
        minor=0,
        uuid="GPU-1",
        product_name="NVIDIA L4",
        memory_bytes=23034 * 2**20,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )
    cluster = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "k8s-1", "labels": {"kubernetes.io/hostname": "k8s-1"}},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
        },
        nvidia_resource_slice(node_name="k8s-1", gpus=[gpu], sharing="disabled"),
        *nvidia_device_classes(),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "llama",
                "namespace": "ai",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {
                "priorityClassName": "gpu-preemptible",
                "containers": [{"name": "s", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "jellyfin",
                "namespace": "media",
                "creationTimestamp": "2026-02-01T00:00:00Z",
            },
            "spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}],
                "containers": [{"name": "app", "resources": {"claims": [{"name": "gpu"}]}}],
            },
        },
    ]
    (tmp_path / "cluster.json").write_text(json.dumps({"kind": "List", "items": cluster}))
    sim = simulate(load_inputs([TEMPLATE, PRIORITY, tmp_path]))
    placed = {p.name: (p.node.name if p.node else None) for p in sim.outcome.pods}
    assert placed == {"llama": None, "jellyfin": "k8s-1"}
    llama = next(p for p in sim.outcome.pods if p.name == "llama")
    assert llama.priority == -100
    assert llama.message == (
        "0/1 nodes are available: 1 cannot allocate all claims. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    (claim,) = [c for c in sim.outcome.claims if c.get("status", {}).get("allocation")]
    assert claim["metadata"]["generateName"] == "jellyfin-gpu-"
    assert claim["spec"]["devices"]["requests"][0]["name"] == "nvidia-gpu"
