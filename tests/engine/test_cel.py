"""DRA CEL selectors: the device variable, Kubernetes' quantity/semver libraries, errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift._errors import InputError
from gpushift.engine._cel import (
    CelDevice,
    CelSelectorEvaluator,
    SelectorError,
    SelectorEvaluationError,
    cel_device,
)

NV = "gpu.nvidia.com"


def a100(uuid: str = "GPU-1") -> CelDevice:
    return cel_device(
        driver=NV,
        attributes={
            "type": {"string": "gpu"},
            "uuid": {"string": uuid},
            "productName": {"string": "NVIDIA A100-PCIE-40GB"},
            "driverVersion": {"version": "580.126.20"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:65:00.0"},
            "resource.kubernetes.io/numaNode": {"int": 1},
        },
        capacity={"memory": {"value": "40Gi"}, "shares": {"value": "5"}},
        allow_multiple_allocations=True,
    )


@pytest.fixture
def ev() -> CelSelectorEvaluator:
    return CelSelectorEvaluator()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # unqualified names belong to the driver's domain
        (f"device.attributes['{NV}'].productName == 'NVIDIA A100-PCIE-40GB'", True),
        (f"device.attributes['{NV}'].type == 'mig'", False),
        (f"device.driver == '{NV}'", True),
        # qualified names go to their own domain, and only there
        ("device.attributes['resource.kubernetes.io'].pciBusID == '0000:65:00.0'", True),
        (f"has(device.attributes['{NV}'].pciBusID)", False),
        ("device.attributes['resource.kubernetes.io'].numaNode == 1", True),
        ("device.allowMultipleAllocations", True),
        # quantities
        (f"device.capacity['{NV}'].memory.compareTo(quantity('40Gi')) >= 0", True),
        (f"device.capacity['{NV}'].memory.compareTo(quantity('41Gi')) >= 0", False),
        (f"device.capacity['{NV}'].memory.compareTo(quantity('40960Mi')) == 0", True),
        (f"device.capacity['{NV}'].memory.isGreaterThan(quantity('39Gi'))", True),
        (f"device.capacity['{NV}'].memory.isLessThan(quantity('39Gi'))", False),
        (f"device.capacity['{NV}'].memory == quantity('40960Mi')", True),
        (f"device.capacity['{NV}'].shares.asInteger() == 5", True),
        (f"device.capacity['{NV}'].memory.sub(quantity('8Gi')).asInteger() == 34359738368", True),
        ("quantity('1Gi').add(quantity('512Mi')).compareTo(quantity('1536Mi')) == 0", True),
        ("quantity('500m').isInteger()", False),
        ("isQuantity('1Gi') && !isQuantity('1GB')", True),
        # semver
        (f"device.attributes['{NV}'].driverVersion.isGreaterThan(semver('550.54.15'))", True),
        (f"device.attributes['{NV}'].driverVersion.compareTo(semver('580.126.20')) == 0", True),
        (f"device.attributes['{NV}'].driverVersion.major() == 580", True),
        # semver precedence: a pre-release sorts before its release
        ("semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", True),
        ("semver('1.0.0-alpha.2').isLessThan(semver('1.0.0-alpha.10'))", True),
        ("semver('1.0.0-alpha').isLessThan(semver('1.0.0-alpha.1'))", True),
        ("semver('1.0.0-1').isLessThan(semver('1.0.0-alpha'))", True),
        ("semver('1.0.0+build.5').compareTo(semver('1.0.0')) == 0", True),
        # the strings extension used by NVIDIA's demo selectors
        (f"device.attributes['{NV}'].productName.lowerAscii().matches('^.*a100.*$')", True),
        # a domain the device has nothing in reads as an empty map
        ("has(device.attributes['other.example.com'].x)", False),
    ],
)
def test_expression(ev: CelSelectorEvaluator, expression: str, expected: bool) -> None:
    assert ev.matches(expression, a100()) is expected


def test_compile_error_names_expression_and_is_input_error(ev: CelSelectorEvaluator) -> None:
    with pytest.raises(SelectorError) as e:
        ev.check("device.driver ==")
    assert isinstance(e.value, InputError)
    assert "device.driver ==" in str(e.value)
    assert "Syntax error" in str(e.value)


def test_non_bool_result_aborts(ev: CelSelectorEvaluator) -> None:
    with pytest.raises(SelectorEvaluationError, match="could not be converted to bool"):
        ev.matches("device.driver", a100())


def test_missing_attribute_is_a_runtime_error(ev: CelSelectorEvaluator) -> None:
    with pytest.raises(SelectorEvaluationError, match="no such key: model"):
        ev.matches(f"device.attributes['{NV}'].model == 'x'", a100())


def test_bad_quantity_literal_is_a_runtime_error(ev: CelSelectorEvaluator) -> None:
    with pytest.raises(SelectorEvaluationError):
        ev.matches(f"device.capacity['{NV}'].memory.compareTo(quantity('4 GB')) > 0", a100())


class CountingEvaluator(CelSelectorEvaluator):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _evaluate(self, *args: object, **kw: object) -> object:  # type: ignore[override]
        self.calls += 1
        return super()._evaluate(*args, **kw)  # type: ignore[arg-type]


def test_results_are_shared_by_devices_that_differ_only_in_unread_fields() -> None:
    ev = CountingEvaluator()
    expr = f"device.attributes['{NV}'].productName == 'NVIDIA A100-PCIE-40GB'"
    for i in range(50):
        assert ev.matches(expr, a100(f"GPU-{i}"))
    assert ev.calls == 1


def test_results_are_not_shared_when_the_read_field_differs() -> None:
    ev = CountingEvaluator()
    expr = f"device.attributes['{NV}'].uuid == 'GPU-7'"
    got = [ev.matches(expr, a100(f"GPU-{i}")) for i in range(10)]
    assert got == [i == 7 for i in range(10)]
    assert ev.calls == 10


def test_whole_map_expressions_are_memoised_by_full_content() -> None:
    ev = CountingEvaluator()
    expr = f"'uuid' in device.attributes['{NV}']"
    assert ev.matches(expr, a100("GPU-1")) and ev.matches(expr, a100("GPU-2"))
    assert ev.matches(expr, a100("GPU-1"))
    assert ev.calls == 2


def test_list_attributes_are_cel_lists(ev: CelSelectorEvaluator) -> None:
    # DRAListTypeAttributes: the driver may publish numaNode as an `ints` list.
    d = cel_device(
        driver=NV,
        attributes={"resource.kubernetes.io/numaNode": {"ints": [0, 1]}},
        capacity=None,
        allow_multiple_allocations=False,
    )
    assert ev.matches("1 in device.attributes['resource.kubernetes.io'].numaNode", d)
    assert not ev.matches("2 in device.attributes['resource.kubernetes.io'].numaNode", d)
    assert ev.matches("size(device.attributes['resource.kubernetes.io'].numaNode) == 2", d)


def test_errors_are_absorbed_by_logical_operators_as_in_cel_go(ev: CelSelectorEvaluator) -> None:
    # CEL's && and || are commutative over errors: false && error is false either way round.
    assert not ev.matches(f"device.attributes['{NV}'].model == 'x' && false", a100())
    assert ev.matches(f"device.attributes['{NV}'].model == 'x' || true", a100())


# --- the simple form, evaluated without the runtime ---

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
