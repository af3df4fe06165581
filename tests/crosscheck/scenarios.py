"""Every whole input the engine's and the CLI's tests give simulate, plus the examples.

The engine's tests build their inputs inline and hand them to ``from_objects``; a test is run
with ``from_objects`` recording what it is handed, so whatever inputs the test has today are
the ones gathered. An input is kept when simulate takes it (inputs a test expects to be
refused are not whole inputs). :func:`sources` names them cheaply (for collection); each
source's callable gathers its inputs when the test runs.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushift import crosscheck, engine

ROOT = Path(__file__).resolve().parents[2]
#: The test modules whose inputs are gathered: each calls simulate on objects it builds.
MODULES = (
    "tests.engine.test_scheduler",
    "tests.engine.test_hazards",
    "tests.engine.test_hazards_directions",
    "tests.engine.test_admin_access",
    "tests.engine.test_owned_pods",
    "tests.engine.test_example",
)

Objects = list[dict[str, Any]]
Source = Callable[[], list[Objects]]


def _record(into: list[Objects]) -> Callable[..., engine.Inputs]:
    real = engine.from_objects

    def spy(objects: Any, **kw: Any) -> engine.Inputs:
        objects = list(objects)
        kept = copy.deepcopy(objects)
        inputs = real(objects, **kw)  # raises for a bad input: not recorded
        engine.simulate(real(copy.deepcopy(kept)))
        into.append(kept)
        return inputs

    return spy


def _gather(module_name: str, function: str) -> Source:
    def gather() -> list[Objects]:
        module = importlib.import_module(module_name)
        found: list[Objects] = []
        # A test's own failure is its module's business: its inputs are kept all the same.
        with pytest.MonkeyPatch.context() as mp, contextlib.suppress(Exception):
            mp.setattr(module, "from_objects", _record(found), raising=False)
            getattr(module, function)()
        # A test may hand simulate the same objects several times (seeds of a tie-break).
        unique: dict[str, Objects] = {}
        for objects in found:
            unique.setdefault(json.dumps(objects, sort_keys=True, default=str), objects)
        return list(unique.values())

    return gather


def _example(allocator: str, sharing: str) -> Source:
    return lambda: [engine.homelab(engine.setup(allocator=allocator, sharing=sharing))]


def _roundtrip(allocator: str) -> Source:
    # tests/cli/test_simulate_roundtrip.py: `simulate --example homelab -o yaml --all` read
    # back: every pod bound, every claim allocated and reserved.
    def build() -> list[Objects]:
        sim = engine.simulate(
            engine.from_objects(engine.homelab(engine.setup(allocator=allocator, sharing="5")))
        )
        dumped = json.loads(json.dumps(engine.as_list(sim, everything=True)))
        return [list(dumped["items"])]

    return build


def _cli(*pods: str) -> Source:
    # tests/cli/test_simulate.py: its one-node cluster and one-GPU pods, as YAML.
    def build() -> list[Objects]:
        cli = importlib.import_module("tests.cli.test_simulate")
        text = cli.NODE + "".join(cli.gpu_pod(p) for p in pods)
        return [[d for d in yaml.safe_load_all(text) if d]]

    return build


def sources() -> Iterator[tuple[str, Source]]:
    """``(id, source)`` of every scenario: the examples, the CLI's inputs and the engine
    tests' inputs (a test function with parameters is left out: its plain siblings carry
    the scenarios)."""
    yield "examples/cluster", lambda: [crosscheck.read_objects([ROOT / "examples" / "cluster"])]
    for allocator, sharings in (
        ("dra", ("5", "memory", "unlimited", "exclusive")),
        ("device-plugin", ("5", "exclusive")),
    ):
        for sharing in sharings:
            yield (
                f"homelab --allocator {allocator} --sharing {sharing}",
                _example(allocator, sharing),
            )
    for allocator in ("dra", "device-plugin"):
        yield f"homelab --allocator {allocator} -o yaml --all, read back", _roundtrip(allocator)
    yield "cli::test_all_scheduled_exits_0_with_tables", _cli("a")
    yield "cli::test_pending_exits_1_and_json_is_a_list", _cli("a", "b")
    for name in MODULES:
        module = importlib.import_module(name)
        short = name.rsplit(".", 1)[1]
        for fname, fn in sorted(vars(module).items()):
            plain = inspect.isfunction(fn) and not inspect.signature(fn).parameters
            if fname.startswith("test_") and plain:
                yield f"{short}::{fname}", _gather(name, fname)
