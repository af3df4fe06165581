"""The cutover's ``-o json`` stream, as the cutover contract fixes it, folded into one run.

``gpushift cutover``/``rollback -o json`` write JSON lines: ``CutoverEvent`` objects
(``run-start``, ``step-start``, ``change``, ``wait``, ``step-finish``) and a final
``CutoverResult``. A rehearsal reads them live (to kill at a step) and folds every attempt of
one direction (the first, and each ``--resume`` after a kill) into a :class:`RunRecord`.
Everything here is pure: lines in, frozen values out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from gpushift.common import InputError, Obj, UsageError

#: The cutover's steps in order; the same strings name them in events, journal and --kill-at.
STEPS = (
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
EVENTS = ("run-start", "step-start", "change", "delete", "wait", "step-finish")
STEP_RESULTS = ("done", "skipped", "timeout", "failed")
RUN_RESULTS = ("done", "unhealthy", "timeout", "refused", "aborted", "failed")

Direction = Literal["dra", "device-plugin"]


class StepBody(TypedDict):
    """One step as the final ``CutoverResult`` lists it."""

    name: str
    seconds: float
    result: str


@dataclass(frozen=True, slots=True)
class KillPoint:
    """Where ``--kill-at`` strikes: at a step's start, or at its first wait."""

    step: str
    at_wait: bool = False

    @classmethod
    def parse(cls, text: str) -> KillPoint:
        """``STEP`` or ``STEP:wait``.

        Raises:
            UsageError: not a step name (the message lists them).
        """
        step, _, where = text.partition(":")
        if step not in STEPS or where not in ("", "wait"):
            raise UsageError(
                f"--kill-at {text!r}: expected STEP or STEP:wait, STEP one of {', '.join(STEPS)}"
            )
        return cls(step, at_wait=where == "wait")

    def strikes(self, event: Obj) -> bool:
        """Whether this event is the moment to kill."""
        if event.get("step") != self.step or event.get("kind") != "CutoverEvent":
            return False
        return event.get("event") == ("wait" if self.at_wait else "step-start")

    def missed(self, events: Sequence[Obj]) -> str:
        """Why the moment never came in ``events``, a stream this point did not strike: the
        step ended without waiting (what it waits for already held when it began, as when
        faults slow the step before and the drain finishes meanwhile), or the run ended
        before the step."""
        finish = next(
            (
                o
                for o in events
                if o.get("kind") == "CutoverEvent"
                and o.get("event") == "step-finish"
                and o.get("step") == self.step
            ),
            None,
        )
        if finish is not None:
            seconds = finish.get("seconds")
            took = f" in {seconds:g}s" if isinstance(seconds, int | float) else ""
            return (
                f"{self.step} ended {finish.get('result', 'done')}{took} without waiting: "
                "what it waits for already held when it started"
            )
        final = next((o for o in reversed(events) if o.get("kind") == "CutoverResult"), None)
        if final is not None:
            return f"the cutover ended {final.get('result', 'failed')} before {self.step}"
        return f"the cutover's event stream ended before {self.step}, with no result"

    def __str__(self) -> str:
        return f"{self.step}:wait" if self.at_wait else self.step


def parse_line(line: str, *, number: int, source: str = "cutover -o json") -> Obj | None:
    """One line of the stream as an object; None for a blank line.

    Raises:
        InputError: the line is not a JSON object of the contract's kinds.
    """
    text = line.strip()
    if not text:
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err.msg}", path=source, line=number) from None
    if not isinstance(obj, dict) or obj.get("kind") not in ("CutoverEvent", "CutoverResult"):
        raise InputError(
            "expected a CutoverEvent or CutoverResult object", path=source, line=number
        )
    if obj["kind"] == "CutoverEvent" and obj.get("event") not in EVENTS:
        raise InputError(f"unknown event {obj.get('event')!r}", path=source, line=number)
    return obj


def parse_stream(lines: Iterable[str], *, source: str = "cutover -o json") -> list[Obj]:
    """Every object of a stream, in order (see :func:`parse_line`)."""
    out: list[Obj] = []
    for number, line in enumerate(lines, 1):
        obj = parse_line(line, number=number, source=source)
        if obj is not None:
            out.append(obj)
    return out


def parse_time(text: object) -> datetime | None:
    """An event's RFC 3339 ``time`` (``2026-12-01T15:00:00.123Z``), or None if unreadable."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One cutover process: its events, how it ended, and whether ``--kill-at`` ended it."""

    events: tuple[Obj, ...]
    exit_code: int | None
    killed: bool = False
    resumed: bool = False

    @property
    def result(self) -> Obj | None:
        """The final ``CutoverResult``, if the process wrote one."""
        for obj in reversed(self.events):
            if obj.get("kind") == "CutoverResult":
                return obj
        return None


@dataclass(frozen=True, slots=True)
class StepSpan:
    """One step on the timeline: when it started (wall seconds since the rehearsal began),
    how long it took by the cutover's own count, and how it ended."""

    name: str
    attempt: int
    start: float | None
    seconds: float | None
    result: str
    waits: tuple[str, ...] = ()
    changes: int = 0


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One direction of the move, over all its attempts."""

    to: str
    result: str
    exit_code: int | None
    run: str | None
    attempts: int
    killed_at: str | None
    spans: tuple[StepSpan, ...]
    steps: tuple[StepBody, ...]
    reasons: tuple[str, ...]
    start: float | None
    end: float | None
    #: What the cutover's preflight let pass (its ``step-finish`` event's ``warnings``).
    warnings: tuple[str, ...] = ()

    @property
    def wall_seconds(self) -> float | None:
        """From the first event to the last, wall seconds."""
        if self.start is None or self.end is None:
            return None
        return self.end - self.start


def _offset(obj: Obj, origin: datetime | None) -> float | None:
    when = parse_time(obj.get("time"))
    if when is None or origin is None:
        return None
    return (when - origin).total_seconds()


def _spans(events: Sequence[Obj], *, attempt: int, origin: datetime | None) -> list[StepSpan]:
    open_: dict[str, dict[str, Any]] = {}
    out: list[StepSpan] = []
    for obj in events:
        if obj.get("kind") != "CutoverEvent":
            continue
        step = obj.get("step")
        kind = obj.get("event")
        if not isinstance(step, str):
            continue
        if kind == "step-start":
            open_[step] = {"start": _offset(obj, origin), "waits": [], "changes": 0}
        elif kind == "wait" and step in open_:
            text = str(obj.get("for", ""))
            if not open_[step]["waits"] or open_[step]["waits"][-1] != text:
                open_[step]["waits"].append(text)
        elif kind == "change" and step in open_:
            open_[step]["changes"] += 1
        elif kind == "step-finish":
            state = open_.pop(step, None) or {"start": None, "waits": [], "changes": 0}
            seconds = obj.get("seconds")
            start = state["start"]
            if start is None and isinstance(seconds, int | float):
                end = _offset(obj, origin)
                start = None if end is None else end - float(seconds)
            out.append(
                StepSpan(
                    step,
                    attempt,
                    start,
                    float(seconds) if isinstance(seconds, int | float) else None,
                    str(obj.get("result", "done")),
                    tuple(state["waits"]),
                    state["changes"],
                )
            )
    # A step still open when the stream ended: the process died in it (killed, or crashed).
    last = next((_offset(o, origin) for o in reversed(events) if o.get("time")), None)
    for step, state in open_.items():
        start = state["start"]
        seconds = None if start is None or last is None else max(last - start, 0.0)
        out.append(StepSpan(step, attempt, start, seconds, "killed", tuple(state["waits"]), 0))
    return out


def fold_run(
    to: str, attempts: Sequence[Attempt], *, origin: datetime | None, kill: KillPoint | None
) -> RunRecord:
    """Fold the attempts of one direction into its record.

    The run's steps are the final ``CutoverResult``'s when the last attempt wrote one, with
    steps the resumed attempt skipped (already done before the kill) taken from the earlier
    attempt that did them; without a result they come from the events.
    """
    spans: list[StepSpan] = []
    for i, attempt in enumerate(attempts, 1):
        spans.extend(_spans(attempt.events, attempt=i, origin=origin))
    last = attempts[-1] if attempts else None
    final = last.result if last is not None else None
    finished = [s for s in spans if s.result != "killed" and s.seconds is not None]
    listed: dict[str, StepBody] = {}
    for body in (final.get("steps") or []) if final is not None else []:
        if isinstance(body, dict) and body.get("name") in STEPS:
            listed[str(body["name"])] = {
                "name": str(body["name"]),
                "seconds": float(body.get("seconds") or 0.0),
                "result": str(body.get("result", "done")),
            }
    steps: list[StepBody] = []
    for name in STEPS:
        # Preference: the result's own figure for a step it did; else the last attempt that
        # did it (a resume lists steps done before the kill as skipped); else what is known.
        done_here = listed.get(name)
        if done_here is not None and done_here["result"] != "skipped":
            steps.append(done_here)
            continue
        mine = [s for s in finished if s.name == name]
        real = [s for s in mine if s.result != "skipped"] or mine
        if real:
            span = real[-1]
            steps.append(
                {"name": name, "seconds": float(span.seconds or 0.0), "result": span.result}
            )
        elif done_here is not None:
            steps.append(done_here)
    if final is not None:
        result = str(final.get("result", "failed"))
        code = final.get("exitCode")
        exit_code = int(code) if isinstance(code, int) else (last.exit_code if last else None)
        reasons = tuple(str(r) for r in final.get("reasons") or [])
        run_id = final.get("run")
    else:
        result = "failed"
        exit_code = last.exit_code if last is not None else None
        reasons = ("the cutover wrote no CutoverResult",)
        run_id = None
    if run_id is None:
        for attempt in attempts:
            for obj in attempt.events:
                if obj.get("event") == "run-start" and obj.get("run"):
                    run_id = obj["run"]
                    break
    times = [
        t
        for attempt in attempts
        for obj in attempt.events
        if (t := _offset(obj, origin)) is not None
    ]
    killed_at = str(kill) if kill is not None and any(a.killed for a in attempts) else None
    return RunRecord(
        to=to,
        result=result,
        exit_code=exit_code,
        run=str(run_id) if run_id else None,
        attempts=len(attempts),
        killed_at=killed_at,
        spans=tuple(spans),
        steps=tuple(steps),
        reasons=reasons,
        start=min(times) if times else None,
        end=max(times) if times else None,
        warnings=tuple(
            dict.fromkeys(
                str(w)
                for attempt in attempts
                for obj in attempt.events
                if obj.get("event") == "step-finish" and obj.get("step") == "preflight"
                for w in obj.get("warnings") or ()
            )
        ),
    )
