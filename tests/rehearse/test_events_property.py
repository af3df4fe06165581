"""Property: however a move is timed and wherever it is killed, the folded run has each step
once, with the seconds of the attempt that did it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift_twin.rehearse import STEPS, Attempt, KillPoint, fold_run, parse_stream

ORIGIN = datetime(2026, 12, 1, 15, 0, 0, tzinfo=UTC)


def _stamp(t: float) -> str:
    return (ORIGIN + timedelta(seconds=t)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _stream(
    durations: list[float], *, first: int, t0: float, resumed: bool
) -> tuple[list[str], float]:
    """Events for steps[first:], preceded (on a resume) by skipped finishes for steps[:first]."""
    lines: list[dict[str, Any]] = [
        {"event": "run-start", "step": None, "to": "dra", "run": "r", "resumed": resumed}
    ]
    t = t0
    for name in STEPS[:first]:
        lines.append({"event": "step-finish", "step": name, "seconds": 0.0, "result": "skipped"})
    for name, seconds in zip(STEPS[first:], durations[first:], strict=True):
        lines.append({"event": "step-start", "step": name, "t": t})
        lines.append({"event": "wait", "step": name, "for": f"{name} to settle", "t": t})
        t += seconds
        lines.append({"event": "step-finish", "step": name, "seconds": seconds, "t": t})
    out = []
    for obj in lines:
        if obj["event"] == "step-finish":
            obj.setdefault("result", "done")
        stamp = _stamp(obj.pop("t", t0))
        out.append(json.dumps({"kind": "CutoverEvent", "time": stamp, **obj}))
    steps = [
        {
            "name": n,
            "seconds": 0.0 if i < first else durations[i],
            "result": "skipped" if i < first else "done",
        }
        for i, n in enumerate(STEPS)
    ]
    result = {
        "kind": "CutoverResult",
        "to": "dra",
        "result": "done",
        "exitCode": 0,
        "run": "r",
        "steps": steps,
        "reasons": [],
    }
    out.append(json.dumps(result))
    return out, t


durations = st.lists(
    st.floats(min_value=0.001, max_value=600, allow_nan=False).map(lambda x: round(x, 3)),
    min_size=len(STEPS),
    max_size=len(STEPS),
)


@settings(max_examples=200, deadline=None)
@given(durations=durations, step=st.integers(0, len(STEPS) - 1), at_wait=st.booleans())
def test_kill_anywhere_then_resume_folds_to_every_step_once(
    durations: list[float], step: int, at_wait: bool
) -> None:
    whole, _ = _stream(durations, first=0, t0=1.0, resumed=False)
    kill = KillPoint(STEPS[step], at_wait=at_wait)
    events = parse_stream(whole)
    cut = next(i for i, e in enumerate(events) if kill.strikes(e)) + 1
    killed = Attempt(tuple(events[:cut]), -9, killed=True)
    # the resume redoes the killed step and everything after it
    resume_lines, _ = _stream(durations, first=step, t0=1000.0, resumed=True)
    resumed = Attempt(tuple(parse_stream(resume_lines)), 0, resumed=True)
    run = fold_run("dra", [killed, resumed], origin=ORIGIN, kill=kill)
    assert [s["name"] for s in run.steps] == list(STEPS)
    assert [s["seconds"] for s in run.steps] == durations
    assert all(s["result"] == "done" for s in run.steps)
    assert run.killed_at == str(kill)
    assert [s.name for s in run.spans if s.result == "killed"] == [STEPS[step]]


@settings(max_examples=100, deadline=None)
@given(durations=durations)
def test_spans_start_where_the_previous_step_finished(durations: list[float]) -> None:
    lines, end = _stream(durations, first=0, t0=2.0, resumed=False)
    run = fold_run("dra", [Attempt(tuple(parse_stream(lines)), 0)], origin=ORIGIN, kill=None)
    starts = [s.start for s in run.spans]
    expected = [2.0 + sum(durations[:i]) for i in range(len(STEPS))]
    # times are written with milliseconds: each step may round by up to 0.5 ms
    assert None not in starts
    for i, (got, want) in enumerate(zip(starts, expected, strict=True)):
        assert abs(float(got or 0) - want) < 0.001 * (i + 1)
    assert run.wall_seconds is not None and abs(run.wall_seconds - (end - 2.0)) < 0.002 * len(STEPS)
