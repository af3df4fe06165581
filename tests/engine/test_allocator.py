"""DRA structured allocation: expectations derived by hand from allocator_incubating.go."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from gpushift.engine import (
    AllocatedState,
    GpuInfo,
    SelectorError,
    SelectorEvaluationError,
    StructuredAllocator,
    UnknownDeviceClassError,
    device_key,
    nvidia_device_classes,
    nvidia_resource_slice,
)

DRV = "dra.example.com"
NODE = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}
NODE2 = {"metadata": {"name": "n2", "labels": {"zone": "b"}}}
PIN_N1 = {
    "nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    ]
}


def dev(name: str, **kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    d.update(kw)
    return d


def slice_(
    name: str,
    devices: list[dict[str, Any]],
    *,
    driver: str = DRV,
    pool: str = "n1",
    node: str | None = "n1",
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devices,
    }
    if node is not None:
        s["nodeName"] = node
    s.update(spec)
    return {"metadata": {"name": name}, "spec": s}


def cls(name: str = "any", *exprs: str, config: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    if config:
        spec["config"] = config
    return {"metadata": {"name": name}, "spec": spec}


def claim(*requests: dict[str, Any], name: str = "c", **devices: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"requests": list(requests)}
    d.update(devices)
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"devices": d}}


def req(name: str = "r", klass: str = "any", **exactly: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": klass}
    e.update(exactly)
    return {"name": name, "exactly": e}


def picked(allocation: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["request"], r["pool"], r["device"]) for r in allocation["devices"]["results"]]


def shared_device(name: str, memory: str = "80Gi") -> dict[str, Any]:
    # scheduler_perf dra/templates/resourceslice-consumablecapacity.yaml
    return dev(
        name,
        allowMultipleAllocations=True,
        capacity={
            "memory": {
                "value": memory,
                "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi"}},
            }
        },
    )


# --- basics and result shape ------------------------------------------------------------------


def test_exclusive_device_result_shape_and_node_selector() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0"), dev("d1")])], classes=[cls()])
    state = AllocatedState()
    got = a.allocate(claims=[claim(req())], node=NODE, state=state)
    assert got == [
        {
            "devices": {"results": [{"request": "r", "driver": DRV, "pool": "n1", "device": "d0"}]},
            "nodeSelector": PIN_N1,
        }
    ]
    # allocate never changes the ledger
    assert state.exclusive == {} and state.shared == {}


def test_committed_devices_are_not_handed_out_again() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0"), dev("d1")])], classes=[cls()])
    state = AllocatedState()
    names = []
    for _ in range(2):
        got = a.allocate(claims=[claim(req())], node=NODE, state=state)
        assert got is not None
        state.add(got[0])
        names.append(got[0]["devices"]["results"][0]["device"])
    assert names == ["d0", "d1"]
    assert a.allocate(claims=[claim(req())], node=NODE, state=state) is None
    assert a.free_devices(node=NODE, state=state) == 0


def test_other_nodes_devices_are_invisible() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0")])], classes=[cls()])
    assert a.allocate(claims=[claim(req())], node=NODE2, state=AllocatedState()) is None
    assert not a.has_devices(node=NODE2)
    assert a.has_devices(node=NODE)
    assert a.node_names() == frozenset({"n1"})


def test_claims_of_one_pod_are_allocated_together() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0"), dev("d1")])], classes=[cls()])
    two = [claim(req(), name="a"), claim(req(), name="b")]
    got = a.allocate(claims=two, node=NODE, state=AllocatedState())
    assert got is not None
    assert [picked(g) for g in got] == [[("r", "n1", "d0")], [("r", "n1", "d1")]]
    three = [*two, claim(req(), name="c")]
    assert a.allocate(claims=three, node=NODE, state=AllocatedState()) is None


def test_count_takes_devices_in_order() -> None:
    a = StructuredAllocator(
        slices=[slice_("s", [dev("d0"), dev("d1"), dev("d2")])], classes=[cls()]
    )
    got = a.allocate(claims=[claim(req(count=2))], node=NODE, state=AllocatedState())
    assert got is not None
    assert picked(got[0]) == [("r", "n1", "d0"), ("r", "n1", "d1")]
    assert a.allocate(claims=[claim(req(count=4))], node=NODE, state=AllocatedState()) is None


# --- pools, slices, generations ---------------------------------------------------------------


def test_order_is_driver_then_pool_then_slice_name_then_device_list() -> None:
    slices = [
        slice_("x", [dev("b0")], driver="b.example.com", pool="a"),
        slice_("s-2", [dev("z2")], driver="a.example.com", pool="z", count=2),
        slice_("s-1", [dev("z1b"), dev("z1a")], driver="a.example.com", pool="z", count=2),
        slice_("y", [dev("m0")], driver="a.example.com", pool="m"),
    ]
    a = StructuredAllocator(slices=slices, classes=[cls()])
    got = a.allocate(claims=[claim(req(count=5))], node=NODE, state=AllocatedState())
    assert got is not None
    assert [(r["driver"], r["device"]) for r in got[0]["devices"]["results"]] == [
        ("a.example.com", "m0"),
        ("a.example.com", "z1b"),
        ("a.example.com", "z1a"),
        ("a.example.com", "z2"),
        ("b.example.com", "b0"),
    ]


def test_incomplete_pool_is_not_allocated() -> None:
    a = StructuredAllocator(slices=[slice_("s-1", [dev("d0")], count=2)], classes=[cls()])
    assert a.allocate(claims=[claim(req())], node=NODE, state=AllocatedState()) is None


def test_only_the_newest_generation_counts() -> None:
    slices = [
        slice_("old", [dev("old-0")], generation=1),
        slice_("new", [dev("new-0")], generation=2),
    ]
    a = StructuredAllocator(slices=slices, classes=[cls()])
    got = a.allocate(claims=[claim(req(count=1))], node=NODE, state=AllocatedState())
    assert got is not None and picked(got[0]) == [("r", "n1", "new-0")]
    assert a.allocate(claims=[claim(req(count=2))], node=NODE, state=AllocatedState()) is None


def test_all_nodes_slice_serves_every_node_without_node_selector() -> None:
    s = slice_("net", [dev("d0")], pool="fabric", node=None, allNodes=True)
    a = StructuredAllocator(slices=[s], classes=[cls()])
    for n in (NODE, NODE2):
        got = a.allocate(claims=[claim(req())], node=n, state=AllocatedState())
        assert got is not None
        assert "nodeSelector" not in got[0]
    assert a.has_network_devices()


def test_node_selector_slice_serves_matching_nodes_and_is_copied_to_the_result() -> None:
    sel = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
        ]
    }
    s = slice_("net", [dev("d0")], pool="zone-a", node=None, nodeSelector=sel)
    a = StructuredAllocator(slices=[s], classes=[cls()])
    got = a.allocate(claims=[claim(req())], node=NODE, state=AllocatedState())
    assert got is not None and got[0]["nodeSelector"] == sel
    assert a.allocate(claims=[claim(req())], node=NODE2, state=AllocatedState()) is None


# --- selectors --------------------------------------------------------------------------------


def test_slice_node_selector_compares_numbers_written_unquoted_as_text() -> None:
    # Pod affinity and slice node selectors share one matcher, which reads YAML numbers in
    # values as the strings the API stores; the slice-only matcher once compared 2 with "2".
    rack = {"metadata": {"name": "n3", "labels": {"rack": "2"}}}
    sel = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": [2]}]}
        ]
    }
    s = slice_("net", [dev("d0")], pool="rack-2", node=None, nodeSelector=sel)
    a = StructuredAllocator(slices=[s], classes=[cls()])
    assert a.allocate(claims=[claim(req())], node=rack, state=AllocatedState()) is not None
    assert a.allocate(claims=[claim(req())], node=NODE, state=AllocatedState()) is None


def test_class_and_request_selectors_both_apply() -> None:
    devices = [
        dev("d0", attributes={"model": {"string": "a"}, "type": {"string": "x"}}),
        dev("d1", attributes={"model": {"string": "b"}, "type": {"string": "gpu"}}),
        dev("d2", attributes={"model": {"string": "a"}, "type": {"string": "gpu"}}),
    ]
    gpu = cls("gpu", f"device.attributes['{DRV}'].type == 'gpu'")
    sel = [{"cel": {"expression": f"device.attributes['{DRV}'].model == 'a'"}}]
    a = StructuredAllocator(slices=[slice_("s", devices)], classes=[gpu])
    got = a.allocate(
        claims=[claim(req(klass="gpu", selectors=sel))], node=NODE, state=AllocatedState()
    )
    assert got is not None and picked(got[0]) == [("r", "n1", "d2")]


def test_unknown_device_class_is_reported_with_its_name() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0")])], classes=[cls()])
    with pytest.raises(UnknownDeviceClassError) as e:
        a.allocate(claims=[claim(req(klass="nope"))], node=NODE, state=AllocatedState())
    assert e.value.class_name == "nope"
    assert e.value.claim == "ns/c"
    assert "device class nope" in str(e.value)


def test_selector_that_does_not_compile_is_an_input_error() -> None:
    a = StructuredAllocator(
        slices=[slice_("s", [dev("d0")])], classes=[cls("bad", "device.driver ==")]
    )
    with pytest.raises(SelectorError, match=r"device\.driver =="):
        a.allocate(claims=[claim(req(klass="bad"))], node=NODE, state=AllocatedState())


def test_selector_runtime_error_aborts_the_allocation() -> None:
    # d0 lacks the attribute; upstream stops with "CEL runtime error" instead of skipping it
    devices = [dev("d0"), dev("d1", attributes={"model": {"string": "a"}})]
    a = StructuredAllocator(
        slices=[slice_("s", devices)],
        classes=[cls("m", f"device.attributes['{DRV}'].model == 'a'"), cls()],
    )
    with pytest.raises(SelectorEvaluationError) as e:
        a.allocate(claims=[claim(req(klass="m"))], node=NODE, state=AllocatedState())
    assert str(e.value) == "class m: selector #0: CEL runtime error: no such key: model"
    # a request selector is reported against the claim, counting from its own selectors
    sel = [
        {"cel": {"expression": "true"}},
        {"cel": {"expression": f"device.attributes['{DRV}'].size > 1"}},
    ]
    with pytest.raises(SelectorEvaluationError) as e:
        a.allocate(claims=[claim(req(selectors=sel))], node=NODE, state=AllocatedState())
    assert str(e.value) == "claim ns/c: selector #1: CEL runtime error: no such key: size"


# --- firstAvailable ---------------------------------------------------------------------------


def test_first_available_names_the_chosen_subrequest() -> None:
    devices = [dev("d0", attributes={"size": {"int": 1}})]
    big = cls("big", f"device.attributes['{DRV}'].size > 1")
    small = cls(
        "small",
        f"device.attributes['{DRV}'].size <= 1",
        config=[{"opaque": {"driver": DRV, "parameters": {"kind": "Small"}}}],
    )
    r = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "large", "deviceClassName": "big"},
            {"name": "tiny", "deviceClassName": "small"},
        ],
    }
    a = StructuredAllocator(slices=[slice_("s", devices)], classes=[big, small])
    got = a.allocate(claims=[claim(r)], node=NODE, state=AllocatedState())
    assert got is not None
    assert picked(got[0]) == [("gpu/tiny", "n1", "d0")]
    assert got[0]["devices"]["config"] == [
        {
            "source": "FromClass",
            "requests": ["gpu/tiny"],
            "opaque": {"driver": DRV, "parameters": {"kind": "Small"}},
        }
    ]


def test_first_available_backtracks_when_a_later_request_fails() -> None:
    # "a" prefers two devices; then "b" finds none left, so "a" falls back to one.
    devices = [dev("d0"), dev("d1")]
    a = StructuredAllocator(slices=[slice_("s", devices)], classes=[cls()])
    ra = {
        "name": "a",
        "firstAvailable": [
            {"name": "two", "deviceClassName": "any", "count": 2},
            {"name": "one", "deviceClassName": "any", "count": 1},
        ],
    }
    got = a.allocate(claims=[claim(ra, req("b"))], node=NODE, state=AllocatedState())
    assert got is not None
    assert picked(got[0]) == [("a/one", "n1", "d0"), ("b", "n1", "d1")]


# --- constraints ------------------------------------------------------------------------------


def numa_devices() -> list[dict[str, Any]]:
    return [
        dev("d0", attributes={"numa": {"int": 0}}),
        dev("d1", attributes={"numa": {"int": 1}}),
        dev("d2", attributes={"numa": {"int": 1}}),
    ]


def test_match_attribute_backtracks_to_a_matching_pair() -> None:
    a = StructuredAllocator(slices=[slice_("s", numa_devices())], classes=[cls()])
    c = claim(req(count=2), constraints=[{"matchAttribute": f"{DRV}/numa"}])
    got = a.allocate(claims=[c], node=NODE, state=AllocatedState())
    assert got is not None
    assert picked(got[0]) == [("r", "n1", "d1"), ("r", "n1", "d2")]


def test_match_attribute_across_requests() -> None:
    a = StructuredAllocator(slices=[slice_("s", numa_devices())], classes=[cls()])
    c = claim(
        req("a"), req("b"), constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRV}/numa"}]
    )
    got = a.allocate(claims=[c], node=NODE, state=AllocatedState())
    assert got is not None
    assert picked(got[0]) == [("a", "n1", "d1"), ("b", "n1", "d2")]


def test_match_attribute_on_a_missing_attribute_fails() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0"), dev("d1")])], classes=[cls()])
    c = claim(req(count=2), constraints=[{"matchAttribute": f"{DRV}/numa"}])
    assert a.allocate(claims=[c], node=NODE, state=AllocatedState()) is None


def test_constraint_limited_to_named_requests() -> None:
    a = StructuredAllocator(slices=[slice_("s", numa_devices())], classes=[cls()])
    # only "b" and "c" must match: a=d0, b=d1, c=d2
    c = claim(
        req("a"),
        req("b"),
        req("c"),
        constraints=[{"requests": ["b", "c"], "matchAttribute": f"{DRV}/numa"}],
    )
    got = a.allocate(claims=[c], node=NODE, state=AllocatedState())
    assert got is not None
    assert picked(got[0]) == [("a", "n1", "d0"), ("b", "n1", "d1"), ("c", "n1", "d2")]


def test_qualified_standard_attribute_is_matched_by_full_name() -> None:
    devices = [
        dev("d0", attributes={"resource.kubernetes.io/pcieRoot": {"string": "pci0"}}),
        dev("d1", attributes={"resource.kubernetes.io/pcieRoot": {"string": "pci1"}}),
        dev("d2", attributes={"resource.kubernetes.io/pcieRoot": {"string": "pci1"}}),
    ]
    a = StructuredAllocator(slices=[slice_("s", devices)], classes=[cls()])
    c = claim(req(count=2), constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}])
    got = a.allocate(claims=[c], node=NODE, state=AllocatedState())
    assert got is not None and picked(got[0]) == [("r", "n1", "d1"), ("r", "n1", "d2")]


def test_distinct_attribute_spreads_shares_over_devices() -> None:
    devices = [
        shared_device("g0") | {"attributes": {"uuid": {"string": "U0"}}},
        shared_device("g1") | {"attributes": {"uuid": {"string": "U1"}}},
    ]
    a = StructuredAllocator(slices=[slice_("s", devices)], classes=[cls()])
    same = a.allocate(claims=[claim(req("a"), req("b"))], node=NODE, state=AllocatedState())
    assert same is not None
    assert picked(same[0]) == [("a", "n1", "g0"), ("b", "n1", "g0")]
    c = claim(req("a"), req("b"), constraints=[{"distinctAttribute": f"{DRV}/uuid"}])
    spread = a.allocate(claims=[c], node=NODE, state=AllocatedState())
    assert spread is not None
    assert picked(spread[0]) == [("a", "n1", "g0"), ("b", "n1", "g1")]


# --- allocationMode All -----------------------------------------------------------------------


def test_all_mode_takes_every_matching_device() -> None:
    devices = [
        dev("d0", attributes={"ok": {"bool": True}}),
        dev("d1", attributes={"ok": {"bool": False}}),
        dev("d2", attributes={"ok": {"bool": True}}),
    ]
    a = StructuredAllocator(
        slices=[slice_("s", devices)], classes=[cls("ok", f"device.attributes['{DRV}'].ok")]
    )
    got = a.allocate(
        claims=[claim(req(klass="ok", allocationMode="All"))], node=NODE, state=AllocatedState()
    )
    assert got is not None and picked(got[0]) == [("r", "n1", "d0"), ("r", "n1", "d2")]


def test_all_mode_fails_if_a_matching_device_is_in_use() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0"), dev("d1")])], classes=[cls()])
    state = AllocatedState()
    first = a.allocate(claims=[claim(req())], node=NODE, state=state)
    assert first is not None
    state.add(first[0])
    assert a.allocate(claims=[claim(req(allocationMode="All"))], node=NODE, state=state) is None


def test_all_mode_fails_while_a_pool_is_incomplete() -> None:
    slices = [slice_("s", [dev("d0")]), slice_("t", [dev("e0")], pool="other", count=2)]
    a = StructuredAllocator(slices=slices, classes=[cls()])
    assert a.allocate(claims=[claim(req())], node=NODE, state=AllocatedState()) is not None
    assert (
        a.allocate(claims=[claim(req(allocationMode="All"))], node=NODE, state=AllocatedState())
        is None
    )


def test_all_mode_needs_at_least_one_device() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0")])], classes=[cls("none", "false")])
    assert (
        a.allocate(
            claims=[claim(req(klass="none", allocationMode="All"))],
            node=NODE,
            state=AllocatedState(),
        )
        is None
    )


# --- consumable capacity ----------------------------------------------------------------------


def test_scheduler_perf_consumable_capacity_vector() -> None:
    # Each claim: two requests of 10Gi; both land on the one 80Gi shareable device.
    a = StructuredAllocator(
        slices=[slice_("s", [shared_device("shareable-device")])], classes=[cls()]
    )
    tenGi = {"requests": {"memory": "10Gi"}}
    state = AllocatedState()
    for i in range(4):
        got = a.allocate(
            claims=[claim(req("a", capacity=tenGi), req("b", capacity=tenGi))],
            node=NODE,
            state=state,
        )
        assert got is not None, i
        results = got[0]["devices"]["results"]
        assert [r["device"] for r in results] == ["shareable-device"] * 2
        assert [r["consumedCapacity"] for r in results] == [{"memory": "10Gi"}] * 2
        ids = [r["shareID"] for r in results]
        assert len(set(ids)) == 2 and all(uuid.UUID(i) for i in ids)
        state.add(got[0])
    key = device_key(DRV, "n1", "shareable-device")
    assert state.consumed[key] == {"memory": 80 * 2**30}
    assert state.shared[key] == 8
    one = claim(req(capacity={"requests": {"memory": "1"}}))
    assert a.allocate(claims=[one], node=NODE, state=state) is None


def test_in_flight_consumption_counts_within_one_call() -> None:
    a = StructuredAllocator(
        slices=[slice_("s", [shared_device("g", memory="15Gi")])], classes=[cls()]
    )
    ten = {"requests": {"memory": "10Gi"}}
    assert (
        a.allocate(
            claims=[claim(req("a", capacity=ten), req("b", capacity=ten))],
            node=NODE,
            state=AllocatedState(),
        )
        is None
    )


def test_shares_mode_puts_five_claims_on_a_card_then_moves_on() -> None:
    gpus = [
        GpuInfo(
            minor=i,
            uuid=f"GPU-{i}",
            product_name="NVIDIA L4",
            memory_bytes=24 * 2**30,
            architecture="Ada Lovelace",
            cuda_compute_capability="8.9",
        )
        for i in range(2)
    ]
    a = StructuredAllocator(
        slices=[nvidia_resource_slice(node_name="n1", gpus=gpus, sharing=5)],
        classes=nvidia_device_classes(),
    )
    state = AllocatedState()
    seen = []
    for _ in range(10):
        got = a.allocate(claims=[claim(req(klass="gpu.nvidia.com"))], node=NODE, state=state)
        assert got is not None
        r = got[0]["devices"]["results"][0]
        assert r["consumedCapacity"] == {"memory": "0", "shares": "1"}
        seen.append(r["device"])
        state.add(got[0])
    assert seen == ["gpu-0"] * 5 + ["gpu-1"] * 5
    assert a.allocate(claims=[claim(req(klass="gpu.nvidia.com"))], node=NODE, state=state) is None
    assert a.free_devices(node=NODE, state=state) == 0


def test_memory_mode_claim_without_request_takes_the_whole_card() -> None:
    gpu = GpuInfo(
        minor=0,
        uuid="GPU-0",
        product_name="NVIDIA L4",
        memory_bytes=24 * 2**30,
        architecture="Ada Lovelace",
        cuda_compute_capability="8.9",
    )
    a = StructuredAllocator(
        slices=[nvidia_resource_slice(node_name="n1", gpus=[gpu], sharing="memory")],
        classes=nvidia_device_classes(),
    )
    state = AllocatedState()
    four = claim(req(klass="gpu.nvidia.com", capacity={"requests": {"memory": "4Gi"}}))
    got = a.allocate(claims=[four], node=NODE, state=state)
    assert got is not None
    assert got[0]["devices"]["results"][0]["consumedCapacity"] == {"memory": "4Gi"}
    state.add(got[0])
    # the whole card (24Gi) no longer fits beside 4Gi
    assert a.allocate(claims=[claim(req(klass="gpu.nvidia.com"))], node=NODE, state=state) is None
    fresh = AllocatedState()
    whole = a.allocate(claims=[claim(req(klass="gpu.nvidia.com"))], node=NODE, state=fresh)
    assert whole is not None
    assert whole[0]["devices"]["results"][0]["consumedCapacity"] == {"memory": "24Gi"}
    fresh.add(whole[0])
    assert a.allocate(claims=[four], node=NODE, state=fresh) is None


def test_requesting_a_capacity_the_device_lacks_skips_it() -> None:
    devices = [
        dev("plain", allowMultipleAllocations=True, capacity={"memory": {"value": "8Gi"}}),
        dev(
            "cores",
            allowMultipleAllocations=True,
            capacity={"memory": {"value": "8Gi"}, "cores": {"value": "4"}},
        ),
    ]
    a = StructuredAllocator(slices=[slice_("s", devices)], classes=[cls()])
    got = a.allocate(
        claims=[claim(req(capacity={"requests": {"cores": "1"}}))],
        node=NODE,
        state=AllocatedState(),
    )
    assert got is not None
    r = got[0]["devices"]["results"][0]
    # memory has no policy and was not requested: the whole 8Gi is consumed
    assert (r["device"], r["consumedCapacity"]) == ("cores", {"memory": "8Gi", "cores": "1"})


def test_exclusive_result_on_a_multi_allocatable_device_blocks_it() -> None:
    a = StructuredAllocator(slices=[slice_("s", [shared_device("g")])], classes=[cls()])
    state = AllocatedState()
    state.add(
        {"devices": {"results": [{"request": "r", "driver": DRV, "pool": "n1", "device": "g"}]}}
    )
    assert a.allocate(claims=[claim(req())], node=NODE, state=state) is None


def test_whole_device_capacity_request_acts_as_selector() -> None:
    devices = [
        dev("small", capacity={"memory": {"value": "8Gi"}}),
        dev("big", capacity={"memory": {"value": "80Gi"}}),
    ]
    a = StructuredAllocator(slices=[slice_("s", devices)], classes=[cls()])
    got = a.allocate(
        claims=[claim(req(capacity={"requests": {"memory": "40Gi"}}))],
        node=NODE,
        state=AllocatedState(),
    )
    assert got is not None
    r = got[0]["devices"]["results"][0]
    assert r["device"] == "big"
    assert "shareID" not in r and "consumedCapacity" not in r


# --- config, taints, admin access, existing allocations ---------------------------------------


def test_class_config_then_claim_config() -> None:
    ccfg = {"opaque": {"driver": DRV, "parameters": {"from": "class"}}}
    a = StructuredAllocator(
        slices=[slice_("s", [dev("d0"), dev("d1")])], classes=[cls("any", config=[ccfg])]
    )
    c = claim(
        req("a"),
        req("b"),
        config=[{"requests": ["b"], "opaque": {"driver": DRV, "parameters": {"from": "claim"}}}],
    )
    got = a.allocate(claims=[c], node=NODE, state=AllocatedState())
    assert got is not None
    assert got[0]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["a"], "opaque": ccfg["opaque"]},
        {"source": "FromClass", "requests": ["b"], "opaque": ccfg["opaque"]},
        {
            "source": "FromClaim",
            "requests": ["b"],
            "opaque": {"driver": DRV, "parameters": {"from": "claim"}},
        },
    ]


def test_tainted_device_needs_a_toleration() -> None:
    taint = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}
    a = StructuredAllocator(slices=[slice_("s", [dev("d0", taints=[taint])])], classes=[cls()])
    assert a.allocate(claims=[claim(req())], node=NODE, state=AllocatedState()) is None
    tol = [{"key": "maintenance", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]
    got = a.allocate(claims=[claim(req(tolerations=tol))], node=NODE, state=AllocatedState())
    assert got is not None
    assert got[0]["devices"]["results"][0]["tolerations"] == tol


def test_admin_access_ignores_use_and_is_not_counted() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0")])], classes=[cls()])
    state = AllocatedState()
    first = a.allocate(claims=[claim(req())], node=NODE, state=state)
    assert first is not None
    state.add(first[0])
    admin = a.allocate(claims=[claim(req(adminAccess=True))], node=NODE, state=state)
    assert admin is not None
    assert admin[0]["devices"]["results"][0]["adminAccess"] is True
    before = copy.deepcopy(state.exclusive)
    state.add(admin[0])
    assert state.exclusive == before


def test_already_allocated_claims_are_returned_unchanged_on_their_node() -> None:
    a = StructuredAllocator(slices=[slice_("s", [dev("d0")])], classes=[cls()])
    done = claim(req())
    alloc = a.allocate(claims=[done], node=NODE, state=AllocatedState())
    assert alloc is not None
    done["status"] = {"allocation": alloc[0]}
    assert a.allocate(claims=[done], node=NODE, state=AllocatedState()) == alloc
    assert a.allocate(claims=[done], node=NODE2, state=AllocatedState()) is None


# --- the ledger -------------------------------------------------------------------------------


def test_state_add_remove_round_trip() -> None:
    state = AllocatedState()
    shared = {
        "devices": {
            "results": [
                {
                    "request": "r",
                    "driver": DRV,
                    "pool": "p",
                    "device": "g",
                    "shareID": "s1",
                    "consumedCapacity": {"memory": "4Gi", "shares": "1"},
                },
                {"request": "r", "driver": DRV, "pool": "p", "device": "x"},
            ]
        }
    }
    other = {
        "devices": {
            "results": [
                {
                    "request": "r",
                    "driver": DRV,
                    "pool": "p",
                    "device": "g",
                    "shareID": "s2",
                    "consumedCapacity": {"memory": "2Gi", "shares": "2"},
                }
            ]
        }
    }
    state.add(shared)
    state.add_claim({"metadata": {"name": "o"}, "spec": {}, "status": {"allocation": other}})
    g = device_key(DRV, "p", "g")
    assert state.consumed[g] == {"memory": 6 * 2**30, "shares": 3}
    assert state.shared[g] == 2
    assert state.in_use(device_key(DRV, "p", "x"))
    c = state.copy()
    state.remove(shared)
    assert state.consumed[g] == {"memory": 2 * 2**30, "shares": 2}
    assert not state.in_use(device_key(DRV, "p", "x"))
    state.remove(other)
    assert state.consumed == {} and state.shared == {} and state.exclusive == {}
    assert c.consumed[g] == {"memory": 6 * 2**30, "shares": 3}


# --- node selection and prefilter hints -------------------------------------------------------


def test_node_selectors_of_several_devices_are_merged_into_one_term() -> None:
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    rack = {"key": "rack", "operator": "Exists"}
    slices = [
        slice_(
            "s1",
            [dev("d0")],
            pool="p1",
            node=None,
            nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [zone]}]},
        ),
        slice_(
            "s2",
            [dev("e0")],
            pool="p2",
            node=None,
            nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [zone, rack]}]},
        ),
    ]
    a = StructuredAllocator(slices=slices, classes=[cls()])
    node = {"metadata": {"name": "n1", "labels": {"zone": "a", "rack": "r1"}}}
    got = a.allocate(claims=[claim(req(count=2))], node=node, state=AllocatedState())
    assert got is not None
    assert got[0]["nodeSelector"] == {"nodeSelectorTerms": [{"matchExpressions": [zone, rack]}]}


def test_node_local_device_wins_over_network_devices_in_the_node_selector() -> None:
    slices = [
        slice_("net", [dev("f0")], pool="fabric", node=None, allNodes=True),
        slice_("local", [dev("d0")], pool="n1"),
    ]
    a = StructuredAllocator(slices=slices, classes=[cls()])
    got = a.allocate(claims=[claim(req(count=2))], node=NODE, state=AllocatedState())
    assert got is not None
    assert picked(got[0]) == [("r", "fabric", "f0"), ("r", "n1", "d0")]
    assert got[0]["nodeSelector"] == PIN_N1


def test_per_device_node_selection() -> None:
    s = slice_(
        "s",
        [dev("on-n1", nodeName="n1"), dev("on-n2", nodeName="n2"), dev("anywhere", allNodes=True)],
        pool="mixed",
        node=None,
        perDeviceNodeSelection=True,
    )
    a = StructuredAllocator(slices=[s], classes=[cls()])
    got = a.allocate(claims=[claim(req(allocationMode="All"))], node=NODE2, state=AllocatedState())
    assert got is not None
    assert [r["device"] for r in got[0]["devices"]["results"]] == ["on-n2", "anywhere"]
    assert got[0]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n2"]


def test_free_devices_counts_cards_that_can_take_another_claim() -> None:
    gpus = [
        GpuInfo(
            minor=i,
            uuid=f"GPU-{i}",
            product_name="NVIDIA L4",
            memory_bytes=24 * 2**30,
            architecture="Ada Lovelace",
            cuda_compute_capability="8.9",
        )
        for i in range(2)
    ]
    a = StructuredAllocator(
        slices=[nvidia_resource_slice(node_name="n1", gpus=gpus, sharing="memory")],
        classes=nvidia_device_classes(),
    )
    state = AllocatedState()
    assert a.free_devices(node=NODE, state=state) == 2
    assert a.free_devices(node=NODE2, state=state) == 0
    # 24Gi - 1Mi used on gpu-0: one more 1Mi share still fits
    almost = claim(
        req(klass="gpu.nvidia.com", capacity={"requests": {"memory": f"{24 * 1024 - 1}Mi"}})
    )
    got = a.allocate(claims=[almost], node=NODE, state=state)
    assert got is not None
    state.add(got[0])
    assert a.free_devices(node=NODE, state=state) == 2
    one = claim(req(klass="gpu.nvidia.com", capacity={"requests": {"memory": "1Mi"}}))
    got = a.allocate(claims=[one], node=NODE, state=state)
    assert got is not None and got[0]["devices"]["results"][0]["device"] == "gpu-0"
    state.add(got[0])
    # gpu-0 is full: the range minimum (1Mi) no longer fits
    assert a.free_devices(node=NODE, state=state) == 1


# --- partitionable devices (shared counters) --------------------------------------------------


def partitioned(*, split: bool = False, multi: bool = False) -> list[dict[str, Any]]:
    # One 40Gi GPU published whole and as two 20Gi halves, all drawing on one counter set.
    def consumes(gi: int) -> list[dict[str, Any]]:
        return [{"counterSet": "gpu-0", "counters": {"memory": {"value": f"{gi}Gi"}}}]

    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    devices = [
        dev("gpu-0", consumesCounters=consumes(40), attributes={"kind": {"string": "whole"}}),
        dev("gpu-0-half-0", consumesCounters=consumes(20), attributes={"kind": {"string": "half"}}),
        dev("gpu-0-half-1", consumesCounters=consumes(20), attributes={"kind": {"string": "half"}}),
    ]
    if multi:
        for d in devices[1:]:
            d["allowMultipleAllocations"] = True
            d["capacity"] = {"shares": {"value": "2", "requestPolicy": {"default": "1"}}}
    if split:
        # Kubernetes 1.35+: counters in their own slice of the pool
        return [
            slice_("a-counters", [], count=2, sharedCounters=counters),
            slice_("b-devices", devices, count=2),
        ]
    return [slice_("s", devices, sharedCounters=counters)]


def kind(k: str) -> dict[str, Any]:
    return cls(k, f"device.attributes['{DRV}'].kind == '{k}'")


@pytest.mark.parametrize("split", [False, True])
def test_partitions_draw_on_shared_counters(split: bool) -> None:
    a = StructuredAllocator(slices=partitioned(split=split), classes=[kind("whole"), kind("half")])
    state = AllocatedState()
    half = a.allocate(claims=[claim(req(klass="half"))], node=NODE, state=state)
    assert half is not None and picked(half[0]) == [("r", "n1", "gpu-0-half-0")]
    state.add(half[0])
    # 20Gi of 40Gi left: the whole GPU no longer fits, the other half does
    assert a.allocate(claims=[claim(req(klass="whole"))], node=NODE, state=state) is None
    other = a.allocate(claims=[claim(req(klass="half"))], node=NODE, state=state)
    assert other is not None and picked(other[0]) == [("r", "n1", "gpu-0-half-1")]
    state.add(other[0])
    state.remove(half[0])
    # half-1 still holds 20Gi
    assert a.allocate(claims=[claim(req(klass="whole"))], node=NODE, state=state) is None
    state.remove(other[0])
    fresh = a.allocate(claims=[claim(req(klass="whole"))], node=NODE, state=AllocatedState())
    assert fresh is not None and picked(fresh[0]) == [("r", "n1", "gpu-0")]


def test_counters_in_flight_count_within_one_claim() -> None:
    a = StructuredAllocator(slices=partitioned(), classes=[kind("whole"), kind("half")])
    # the whole GPU and a half together need 60Gi of 40Gi
    c = claim(req("w", klass="whole"), req("h", klass="half"))
    assert a.allocate(claims=[c], node=NODE, state=AllocatedState()) is None
    two = a.allocate(claims=[claim(req(klass="half", count=2))], node=NODE, state=AllocatedState())
    assert two is not None
    assert picked(two[0]) == [("r", "n1", "gpu-0-half-0"), ("r", "n1", "gpu-0-half-1")]


def test_a_shared_partition_takes_its_counters_once() -> None:
    a = StructuredAllocator(slices=partitioned(multi=True), classes=[kind("whole"), kind("half")])
    state = AllocatedState()
    for _ in range(2):
        got = a.allocate(claims=[claim(req(klass="half"))], node=NODE, state=state)
        assert got is not None and picked(got[0]) == [("r", "n1", "gpu-0-half-0")]
        state.add(got[0])
    # two shares of half-0 hold 20Gi, not 40Gi: half-1 still fits, the whole GPU does not
    got = a.allocate(claims=[claim(req(klass="half"))], node=NODE, state=state)
    assert got is not None and picked(got[0]) == [("r", "n1", "gpu-0-half-1")]
    assert a.allocate(claims=[claim(req(klass="whole"))], node=NODE, state=state) is None
