"""Allocating the claims real GitOps repositories ship, on slices the NVIDIA driver publishes.

The sharing mode comes from each repository's dra-driver-nvidia-gpu HelmRelease; the expected
counts follow from the driver's published capacity (N shares per card, or memory default 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushift.engine import (
    AllocatedState,
    GpuInfo,
    StructuredAllocator,
    UnknownDeviceClassError,
    nvidia_device_classes,
    nvidia_resource_slice,
    parse_consumable_shares,
)

REPOS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "repos"
pytestmark = pytest.mark.skipif(not REPOS.is_dir(), reason="fixture repositories not present")

LUKE = REPOS / "LukeEvansTech__talos-cluster__later-dra" / "kubernetes" / "apps"
FLATOPS = REPOS / "jfroy__flatops__later-dra" / "kubernetes" / "apps"
JHART = REPOS / "jhart99__home-ops" / "kubernetes"


def load(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1
    doc: dict[str, Any] = docs[0]
    return doc


def l4(node: str) -> GpuInfo:
    return GpuInfo(
        minor=0,
        uuid=f"GPU-{node}",
        product_name="NVIDIA L4",
        memory_bytes=24 * 2**30,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )


def claim_from_template(template: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"pod-{i}-nvidia-gpu", "namespace": "media"},
        "spec": template["spec"]["spec"],
    }


def nodes(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"gpu-{k}"}} for k in range(n)]


def sharing_of(helmrelease: Path) -> Any:
    return parse_consumable_shares(load(helmrelease)["spec"]["values"]["consumableShares"])


def test_shares_five_fit_five_claims_per_card() -> None:
    sharing = sharing_of(
        LUKE / "gpu-operator" / "dra-driver-nvidia-gpu" / "app" / "helmrelease.yaml"
    )
    assert sharing == 5
    template = load(LUKE / "media" / "gpu-claim-templates" / "app" / "resourceclaimtemplate.yaml")
    ns = nodes(3)
    slices = [
        nvidia_resource_slice(
            node_name=n["metadata"]["name"], gpus=[l4(n["metadata"]["name"])], sharing=sharing
        )
        for n in ns
    ]
    alloc = StructuredAllocator(slices=slices, classes=nvidia_device_classes())
    state = AllocatedState()
    placed: dict[str, int] = {}
    i = 0
    for n in ns:
        while (
            got := alloc.allocate(claims=[claim_from_template(template, i)], node=n, state=state)
        ) is not None:
            (r,) = got[0]["devices"]["results"]
            assert (r["request"], r["device"]) == ("nvidia-gpu", "gpu-0")
            assert r["consumedCapacity"] == {"memory": "0", "shares": "1"}
            state.add(got[0])
            placed[n["metadata"]["name"]] = placed.get(n["metadata"]["name"], 0) + 1
            i += 1
    assert placed == {"gpu-0": 5, "gpu-1": 5, "gpu-2": 5}


def test_unlimited_never_runs_out_for_claims_without_memory_requests() -> None:
    sharing = sharing_of(
        FLATOPS / "nvidia-system" / "dra-driver-nvidia-gpu" / "app" / "helmrelease.yaml"
    )
    assert sharing == "unlimited"
    template = load(
        FLATOPS / "default" / "gpu-claim-templates" / "app" / "resourceclaimtemplate.yaml"
    )
    (node,) = nodes(1)
    alloc = StructuredAllocator(
        slices=[nvidia_resource_slice(node_name="gpu-0", gpus=[l4("gpu-0")], sharing=sharing)],
        classes=nvidia_device_classes(),
    )
    state = AllocatedState()
    for i in range(50):
        got = alloc.allocate(claims=[claim_from_template(template, i)], node=node, state=state)
        assert got is not None
        assert got[0]["devices"]["results"][0]["consumedCapacity"] == {"memory": "0"}
        state.add(got[0])


def test_shared_claim_with_time_slicing_config_gets_the_whole_card() -> None:
    # jhart99 runs the driver without consumable shares: the claim holds gpu-0 exclusively and
    # carries its GpuConfig as claim config.
    c = load(JHART / "apps" / "ai" / "dgx-resource-claim" / "app" / "resourceclaim.yaml")
    alloc = StructuredAllocator(
        slices=[nvidia_resource_slice(node_name="gpu-0", gpus=[l4("gpu-0")])],
        classes=nvidia_device_classes(),
    )
    state = AllocatedState()
    got = alloc.allocate(claims=[c], node=nodes(1)[0], state=state)
    assert got is not None
    (r,) = got[0]["devices"]["results"]
    assert r == {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "gpu-0", "device": "gpu-0"}
    assert got[0]["devices"]["config"] == [
        {
            "source": "FromClaim",
            "requests": ["gpu"],
            "opaque": {
                "driver": "gpu.nvidia.com",
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {
                        "strategy": "TimeSlicing",
                        "timeSlicingConfig": {"interval": "Long"},
                    },
                },
            },
        }
    ]
    state.add(got[0])
    other = {"metadata": {"name": "other", "namespace": "ai"}, "spec": c["spec"]}
    assert alloc.allocate(claims=[other], node=nodes(1)[0], state=state) is None


def test_intel_template_has_no_class_among_nvidias() -> None:
    template = load(JHART / "components" / "intel-gpu" / "resourceclaimtemplate.yaml")
    alloc = StructuredAllocator(slices=[], classes=nvidia_device_classes())
    with pytest.raises(UnknownDeviceClassError) as e:
        alloc.allocate(
            claims=[claim_from_template(template, 0)], node=nodes(1)[0], state=AllocatedState()
        )
    assert e.value.class_name == "gpu.intel.com"
