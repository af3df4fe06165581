"""Folding the cutover's event stream into a run: hand-written contract streams."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from gpushift._errors import InputError, UsageError
from gpushift_twin.rehearse import STEPS, KillPoint, fold_run, parse_line, parse_stream


def test_steps_are_the_contracts_in_order() -> None:
    assert STEPS == (
        "preflight",
        "snapshot",
        "suspend",
        "drained",
        "merge",
        "old-allocator-gone",
        "new-allocator-up",
        "resume",
        "resume-bridged",
        "verdict",
    )


def test_a_whole_move_folds_into_its_steps_with_wall_offsets(stream: Any, origin: datetime) -> None:
    run = fold_run("dra", [stream("to-dra", 0)], origin=origin, kill=None)
    assert run.result == "done"
    assert run.exit_code == 0
    assert run.run == "11111111-1111-4111-8111-111111111111"
    assert [s["name"] for s in run.steps] == list(STEPS)
    assert sum(s["seconds"] for s in run.steps) == pytest.approx(11.5)
    drained = next(s for s in run.spans if s.name == "drained")
    # started 2 s after the origin (15:00:02.000), two different waits, no change
    assert drained.start == pytest.approx(2.0)
    assert drained.seconds == 2.0
    assert drained.waits == (
        "no GPU pod: media/jellyfin-5c9f, ai/llama-nvidia-85cc",
        "no GPU pod: ai/llama-nvidia-85cc",
    )
    assert next(s for s in run.spans if s.name == "suspend").changes == 2
    # first event 15:00:01.000, last 15:00:12.500
    assert run.start == pytest.approx(1.0)
    assert run.wall_seconds == pytest.approx(11.5)
    assert run.killed_at is None


def test_a_killed_attempt_and_its_resume_make_one_run(stream: Any, origin: datetime) -> None:
    kill = KillPoint.parse("drained:wait")
    killed = stream("killed-in-drained", -9, killed=True)
    run = fold_run("dra", [killed, stream("resumed", 0)], origin=origin, kill=kill)
    assert run.attempts == 2
    assert run.killed_at == "drained:wait"
    assert run.result == "done"
    # the killed drained span runs from its start (+2.0) to the last event seen (+3.1)
    died = [s for s in run.spans if s.result == "killed"]
    assert [(s.name, s.attempt) for s in died] == [("drained", 1)]
    assert died[0].seconds == pytest.approx(1.1)
    # steps skipped by the resume keep the first attempt's figures; drained is the resume's
    by_name = {s["name"]: s for s in run.steps}
    assert by_name["suspend"] == {"name": "suspend", "seconds": 0.5, "result": "done"}
    assert by_name["preflight"]["result"] == "done"
    assert by_name["drained"] == {"name": "drained", "seconds": 1.5, "result": "done"}
    assert [s["name"] for s in run.steps] == list(STEPS)


def test_a_timed_out_rollback_keeps_its_reason_and_exit_code(stream: Any, origin: datetime) -> None:
    run = fold_run("device-plugin", [stream("rollback-timeout", 5)], origin=origin, kill=None)
    assert run.result == "timeout"
    assert run.exit_code == 5
    assert run.reasons == ("allocatable nvidia.com/gpu: k8s-1 0, k8s-2 0, k8s-3 0",)
    assert [(s["name"], s["result"]) for s in run.steps] == [
        ("preflight", "done"),
        ("new-allocator-up", "timeout"),
    ]


def test_a_stream_without_a_result_is_a_failed_run(stream: Any, origin: datetime) -> None:
    run = fold_run("dra", [stream("killed-in-drained", 1)], origin=origin, kill=None)
    assert run.result == "failed"
    assert run.exit_code == 1
    assert run.reasons == ("the cutover wrote no CutoverResult",)
    assert run.run == "11111111-1111-4111-8111-111111111111"


def test_kill_points() -> None:
    at_start = KillPoint.parse("merge")
    at_wait = KillPoint.parse("old-allocator-gone:wait")
    start = {"kind": "CutoverEvent", "event": "step-start", "step": "merge"}
    wait = {"kind": "CutoverEvent", "event": "wait", "step": "old-allocator-gone"}
    assert at_start.strikes(start) and not at_start.strikes(wait)
    assert at_wait.strikes(wait) and not at_wait.strikes(start)
    assert str(at_wait) == "old-allocator-gone:wait"
    for bad in ("drain", "merge:finish", ""):
        with pytest.raises(UsageError, match="--kill-at"):
            KillPoint.parse(bad)


def test_a_moment_that_never_came_says_why(stream: Any) -> None:
    whole = stream("to-dra", 0).events
    # preflight never waits: the step ended first.
    assert KillPoint.parse("preflight:wait").missed(whole) == (
        "preflight ended done in 0.25s without waiting: what it waits for already held when it "
        "started"
    )
    # A run that ended before the step, with a result and without one.
    failed = [*whole[:3], {"kind": "CutoverResult", "result": "refused", "exitCode": 4}]
    assert KillPoint.parse("drained:wait").missed(failed) == (
        "the cutover ended refused before drained"
    )
    assert KillPoint.parse("merge").missed(stream("killed-in-drained", None).events) == (
        "the cutover's event stream ended before merge, with no result"
    )


def test_lines_that_break_the_contract_name_their_line() -> None:
    with pytest.raises(InputError, match=r"cutover -o json:3: not JSON"):
        parse_stream(['{"kind": "CutoverEvent", "event": "wait", "step": "drained"}', "", "oops"])
    with pytest.raises(InputError, match=r":1: expected a CutoverEvent or CutoverResult"):
        parse_line('{"kind": "Status"}', number=1)
    with pytest.raises(InputError, match="unknown event 'begin'"):
        parse_line('{"kind": "CutoverEvent", "event": "begin"}', number=1)
    assert parse_line("   ", number=4) is None
