"""CEL selectors of the simple form, evaluated without the runtime, agree with the runtime."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift.engine._cel import CelSelectorEvaluator, SelectorEvaluationError, cel_device

NV = "gpu.nvidia.com"
DOMAINS = [NV, "example.com", "resource.kubernetes.io"]
NAMES = ["type", "uuid", "model", "numa"]
WORDS = ["gpu", "mig", "vfio", "", "a b", "GPU-1"]

attribute_values = st.one_of(
    st.sampled_from(WORDS).map(lambda w: {"string": w}),
    st.integers(-2, 2).map(lambda i: {"int": i}),
    st.booleans().map(lambda b: {"bool": b}),
    st.sampled_from(["1.2.3", "580.126.20"]).map(lambda v: {"version": v}),
    st.lists(st.sampled_from(WORDS), max_size=2).map(lambda v: {"strings": v}),
)


@st.composite
def devices(draw: st.DrawFn) -> object:
    attrs = {}
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4)):
        domain = draw(st.sampled_from(["", *DOMAINS]))
        attrs[f"{domain}/{name}" if domain else name] = draw(attribute_values)
    return cel_device(
        driver=draw(st.sampled_from([NV, "other.example.com"])),
        attributes=attrs,
        capacity={},
        allow_multiple_allocations=draw(st.booleans()),
    )


term = st.one_of(
    st.sampled_from([NV, "other.example.com", ""]).map(lambda d: f"device.driver == '{d}'"),
    st.tuples(st.sampled_from(DOMAINS), st.sampled_from(NAMES), st.sampled_from(WORDS)).map(
        lambda t: f"device.attributes['{t[0]}'].{t[1]} == '{t[2]}'"
    ),
    # Near misses that must go to the runtime: other operators, literals, spacing.
    st.sampled_from(
        [
            f"device.attributes['{NV}'].type != 'gpu'",
            f"device.attributes['{NV}'].numa == 1",
            f"device.attributes['{NV}'].type=='gpu'",
            f'device.attributes["{NV}"].type == "gpu"',
            f"has(device.attributes['{NV}'].type)",
            "device.allowMultipleAllocations",
        ]
    ),
)


def outcome(ev: CelSelectorEvaluator, expression: str, device: object) -> object:
    try:
        return ev.matches(expression, device)  # type: ignore[arg-type]
    except SelectorEvaluationError as err:
        return ("error", err.error)


@settings(max_examples=300, deadline=None)
@given(st.lists(term, min_size=1, max_size=3), st.lists(devices(), min_size=1, max_size=4))
def test_simple_forms_agree_with_the_runtime(terms: list[str], devs: list[object]) -> None:
    expression = " && ".join(terms)
    fast, full = CelSelectorEvaluator(), CelSelectorEvaluator(simple_forms=False)
    fast.check(expression)
    full.check(expression)
    for d in devs:
        assert outcome(fast, expression, d) == outcome(full, expression, d), expression


def test_the_nvidia_classes_never_load_the_runtime() -> None:
    # A fresh interpreter: other tests load the runtime into this one.
    code = (
        "import sys\n"
        "from gpushift.engine import StructuredAllocator, AllocatedState, GpuInfo\n"
        "from gpushift.engine import nvidia_device_classes, nvidia_resource_slice\n"
        "gpu = GpuInfo(minor=0, uuid='GPU-0', product_name='H100', memory_bytes=2**30,\n"
        "              architecture='Hopper', cuda_compute_capability='9.0')\n"
        "s = nvidia_resource_slice(node_name='n1', gpus=[gpu], sharing=5)\n"
        "a = StructuredAllocator(slices=[s], classes=nvidia_device_classes())\n"
        "claim = {'metadata': {'name': 'c', 'namespace': 'd'}, 'spec': {'devices': {'requests':"
        " [{'name': 'g', 'exactly': {'deviceClassName': 'gpu.nvidia.com'}}]}}}\n"
        "r = a.allocate(claims=[claim], node={'metadata': {'name': 'n1'}},"
        " state=AllocatedState())\n"
        "assert r is not None and r[0]['devices']['results'][0]['device'] == 'gpu-0', r\n"
        "print('cel' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
