"""Every whole input of the tests, and the examples, on kube-scheduler v1.37.2: simulate and
the real scheduler agree (docs/simulate.md says what agreeing means).

One control plane serves the module; each input starts from an empty cluster (the session
resets it and restarts the scheduler and the controller manager).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from gpushift import crosscheck, engine

from .scenarios import Source, sources

pytestmark = [pytest.mark.upstream, pytest.mark.slow(seconds=300)]

#: Inputs whose difference is known and out of the comparison's reach, with the reason
#: (docs/simulate.md, "Known differences").
OUT_OF_SCOPE: dict[str, str] = {}


def _params() -> Iterator[Any]:
    for name, source in sources():
        marks = []
        if name in OUT_OF_SCOPE:
            marks.append(pytest.mark.xfail(strict=True, reason=OUT_OF_SCOPE[name]))
        yield pytest.param(source, id=name, marks=marks)


@pytest.fixture(scope="module")
def session() -> Iterator[crosscheck.Session]:
    with crosscheck.Session(quiet=1.5) as s:
        yield s


def simulated(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """simulate's List for ``objects``, as `simulate -o json` prints it."""
    sim = engine.simulate(engine.from_objects(copy.deepcopy(objects)))
    out: dict[str, Any] = json.loads(json.dumps(engine.as_list(sim)))
    return out


@pytest.mark.parametrize("source", list(_params()))
def test_simulate_agrees_with_kube_scheduler(source: Source, session: crosscheck.Session) -> None:
    inputs = source()
    if not inputs:
        # The test hands simulate nothing whole: an input simulate refuses, or no simulate.
        pytest.skip("no whole input: the test's objects are refused, or it runs no simulate")
    for objects in inputs:
        result = crosscheck.against_upstream(objects, simulated(objects), session=session)
        assert [d.as_dict() for d in result.differences] == []
        # Not vacuous: every pod of the input is accounted for on both sides.
        assert result.rows
