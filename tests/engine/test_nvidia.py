"""NVIDIA DRA driver objects, checked against the shapes in consumable_shares.go and the chart."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._errors import InputError
from gpushift.engine import (
    ConsumableSharesError,
    GpuInfo,
    nvidia_device_classes,
    nvidia_resource_slice,
    parse_consumable_shares,
)

MI = 2**20
# 23034 MiB plus a few bytes, as NVML reports for an L4
L4_BYTES = 23034 * MI + 123

L4 = GpuInfo(
    minor=1,
    uuid="GPU-2fa81118-5a5f-aa66-7660-471eed407181",
    product_name="NVIDIA L4",
    memory_bytes=L4_BYTES,
    architecture="Ada Lovelace",
    cuda_compute_capability="8.9",
    driver_version="580.126.20",
    cuda_driver_version="13.0",
    pci_bus_id="0000:01:00.0",
    pcie_root="pci0000:00",
    numa_node=0,
)

ATTRIBUTES = {
    "type": {"string": "gpu"},
    "uuid": {"string": "GPU-2fa81118-5a5f-aa66-7660-471eed407181"},
    "productName": {"string": "NVIDIA L4"},
    "brand": {"string": "Nvidia"},
    "architecture": {"string": "Ada Lovelace"},
    "cudaComputeCapability": {"version": "8.9.0"},
    "driverVersion": {"version": "580.126.20"},
    "cudaDriverVersion": {"version": "13.0.0"},
    "resource.kubernetes.io/pciBusID": {"string": "0000:01:00.0"},
    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    "resource.kubernetes.io/numaNode": {"int": 0},
}


def device(sharing: Any, gpu: GpuInfo = L4) -> dict[str, Any]:
    s = nvidia_resource_slice(node_name="node-a", gpus=[gpu], sharing=sharing)
    return dict(s["spec"]["devices"][0])


def test_exclusive_slice_shape() -> None:
    s = nvidia_resource_slice(node_name="node-a", gpus=[L4])
    assert s["apiVersion"] == "resource.k8s.io/v1"
    assert s["kind"] == "ResourceSlice"
    assert s["metadata"]["generateName"] == "00000-gpu.nvidia.com-node-a-"
    assert s["metadata"]["name"].startswith("00000-gpu.nvidia.com-node-a-")
    assert len(s["metadata"]["name"]) == len("00000-gpu.nvidia.com-node-a-") + 5
    assert s["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "node-a", "controller": True}
    ]
    assert s["spec"] == {
        "driver": "gpu.nvidia.com",
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-1",
                "attributes": ATTRIBUTES,
                # the exact NVML byte count: no rounding without consumable shares
                "capacity": {"memory": {"value": str(L4_BYTES)}},
            }
        ],
    }


def test_shares_mode_shape() -> None:
    assert device(5) == {
        "name": "gpu-1",
        "attributes": ATTRIBUTES,
        "allowMultipleAllocations": True,
        "capacity": {
            "memory": {
                "value": "23034Mi",
                "requestPolicy": {
                    "default": "0",
                    "validRange": {"min": "0", "max": "23034Mi", "step": "1Mi"},
                },
            },
            "shares": {
                "value": "5",
                "requestPolicy": {
                    "default": "1",
                    "validRange": {"min": "1", "max": "5", "step": "1"},
                },
            },
        },
    }


def test_memory_mode_defaults_to_the_whole_card() -> None:
    assert device("memory")["capacity"] == {
        "memory": {
            "value": "23034Mi",
            "requestPolicy": {
                "default": "23034Mi",
                "validRange": {"min": "1Mi", "max": "23034Mi", "step": "1Mi"},
            },
        }
    }


def test_unlimited_mode_has_memory_only() -> None:
    d = device("unlimited")
    assert d["allowMultipleAllocations"] is True
    assert d["capacity"] == {
        "memory": {
            "value": "23034Mi",
            "requestPolicy": {
                "default": "0",
                "validRange": {"min": "0", "max": "23034Mi", "step": "1Mi"},
            },
        }
    }


def test_gpu_without_memory_info_is_shareable_without_limits() -> None:
    gpu = GpuInfo(
        minor=0,
        uuid="GPU-x",
        product_name="NVIDIA GB10",
        memory_bytes=None,
        architecture="Blackwell",
        cuda_compute_capability="12.1",
    )
    d = device(5, gpu)
    assert d["allowMultipleAllocations"] is True
    assert "capacity" not in d


def test_devices_are_named_by_minor_and_optional_attributes_are_left_out() -> None:
    gpus = [
        GpuInfo(
            minor=m,
            uuid=f"GPU-{m}",
            product_name="NVIDIA L4",
            memory_bytes=MI,
            architecture="Ada Lovelace",
            cuda_compute_capability="8.9",
            numa_node=-1,
        )
        for m in (3, 0)
    ]
    devs = nvidia_resource_slice(node_name="n", gpus=gpus)["spec"]["devices"]
    assert [d["name"] for d in devs] == ["gpu-0", "gpu-3"]
    attrs = devs[0]["attributes"]
    assert "resource.kubernetes.io/numaNode" not in attrs
    assert "resource.kubernetes.io/pciBusID" not in attrs
    assert "index" not in attrs and "minor" not in attrs


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (None, "disabled"),
        ("", "disabled"),
        ("disabled", "disabled"),
        ("memory", "memory"),
        ("unlimited", "unlimited"),
        ("5", 5),
        (8, 8),
    ],
)
def test_parse_consumable_shares(raw: Any, parsed: Any) -> None:
    assert parse_consumable_shares(raw) == parsed


@pytest.mark.parametrize("bad", ["0", "-1", "1.5", "five", "Memory", " 4 ", 0])
def test_parse_consumable_shares_rejects_with_plugin_wording(bad: Any) -> None:
    with pytest.raises(ConsumableSharesError) as e:
        parse_consumable_shares(bad)
    assert isinstance(e.value, InputError)
    assert str(e.value) == (
        f'invalid value for --consumable-shares: "{bad}" '
        "(must be 'disabled', 'memory', 'unlimited', or a positive integer)"
    )


def test_device_classes_on_v1() -> None:
    classes = nvidia_device_classes()
    assert [(c["metadata"]["name"], c["spec"]) for c in classes] == [
        (
            "gpu.nvidia.com",
            {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && "
                            "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                        }
                    }
                ],
                "extendedResourceName": "nvidia.com/gpu",
            },
        ),
        (
            "mig.nvidia.com",
            {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && "
                            "device.attributes['gpu.nvidia.com'].type == 'mig'"
                        }
                    }
                ]
            },
        ),
        (
            "vfio.gpu.nvidia.com",
            {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && "
                            "device.attributes['gpu.nvidia.com'].type == 'vfio'"
                        }
                    }
                ]
            },
        ),
    ]
    assert all(c["apiVersion"] == "resource.k8s.io/v1" for c in classes)


def test_extended_resource_name_only_on_v1() -> None:
    classes = nvidia_device_classes(api_version="resource.k8s.io/v1beta1")
    assert all("extendedResourceName" not in c["spec"] for c in classes)


@given(n=st.integers(1, 10**9))
def test_any_positive_integer_is_a_share_count(n: int) -> None:
    assert parse_consumable_shares(str(n)) == n
    assert parse_consumable_shares(n) == n


@given(text=st.text(max_size=12))
def test_only_the_documented_values_are_accepted(text: str) -> None:
    # strconv.Atoi: an optional sign and ASCII digits; the plugin wants it above zero.
    number = re.fullmatch(r"[+-]?[0-9]+", text)
    valid = text in ("", "disabled", "memory", "unlimited") or (
        number is not None and int(text) > 0
    )
    if valid:
        parse_consumable_shares(text)
    else:
        with pytest.raises(ConsumableSharesError):
            parse_consumable_shares(text)
