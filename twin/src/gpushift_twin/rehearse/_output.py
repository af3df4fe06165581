"""A rehearsal as text (the timeline and the monitor's result) and as JSON (``Rehearsal``)."""

from __future__ import annotations

from gpushift.common import Obj
from gpushift_twin.rehearse._events import RunRecord, StepSpan
from gpushift_twin.rehearse._run import Rehearsal
from gpushift_twin.rehearse._sampler import Sample


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{rest:02d}s"


def _span_json(span: StepSpan, scale: float) -> Obj:
    return {
        "name": span.name,
        "attempt": span.attempt,
        "start": None if span.start is None else round(span.start, 3),
        "seconds": None if span.seconds is None else round(span.seconds, 3),
        "clusterSeconds": None if span.seconds is None else round(span.seconds * scale, 1),
        "result": span.result,
        "waits": list(span.waits),
        "changes": span.changes,
    }


def run_json(run: RunRecord, *, scale: float, verdict: Obj | None) -> Obj:
    """One direction as the ``runs`` entries of ``-o json``."""
    return {
        "to": run.to,
        "result": run.result,
        "exitCode": run.exit_code,
        "run": run.run,
        "attempts": run.attempts,
        "killedAt": run.killed_at,
        "wallSeconds": None if run.wall_seconds is None else round(run.wall_seconds, 3),
        "steps": [
            {
                "name": s["name"],
                "seconds": round(s["seconds"], 3),
                "clusterSeconds": round(s["seconds"] * scale, 1),
                "result": s["result"],
            }
            for s in run.steps
        ],
        "timeline": [_span_json(s, scale) for s in run.spans],
        "reasons": list(run.reasons),
        "warnings": list(run.warnings),
        "verdict": verdict,
    }


def as_json(rehearsal: Rehearsal) -> Obj:
    """``{"kind": "Rehearsal", "violations": [...], "runs": [...], …}``."""
    verdicts = list(rehearsal.verdicts) + [None] * (len(rehearsal.runs) - len(rehearsal.verdicts))
    return {
        "kind": "Rehearsal",
        "subject": rehearsal.subject,
        "controlPlane": rehearsal.control_plane,
        "timeScale": rehearsal.time_scale,
        "faults": rehearsal.faults,
        "ok": rehearsal.ok,
        "wallSeconds": round(rehearsal.wall_seconds, 3),
        "violations": list(rehearsal.violations),
        "runs": [
            run_json(r, scale=rehearsal.time_scale, verdict=v)
            for r, v in zip(rehearsal.runs, verdicts, strict=True)
        ],
        "samples": len(rehearsal.samples),
        "last": None if not rehearsal.samples else sample_json(rehearsal.samples[-1]),
        "unsettled": [u.as_json() for u in rehearsal.unsettled],
        "pending": list(rehearsal.pending),
        "notes": list(rehearsal.notes),
        "target": None if rehearsal.made_target is None else rehearsal.made_target.as_json(),
        "nodeLabels": [lb.as_json() for lb in rehearsal.node_labels],
        "nodeResources": [r.as_json() for r in rehearsal.node_resources],
    }


def sample_json(sample: Sample) -> Obj:
    """One sample as ``-o json``'s ``last``: the figures at the rehearsal's end."""
    return {
        "t": round(sample.t, 3),
        "gpuPodsRunning": sample.gpu_pods_running,
        "allocatable": dict(sample.allocatable),
        "slices": dict(sample.slices),
        "violationsActive": sample.violations_active,
    }


def as_text(rehearsal: Rehearsal) -> str:
    """The timeline, one line per step (wall and cluster time), then the monitor's result."""
    scale = rehearsal.time_scale
    if rehearsal.control_plane == "upstream":
        head = f"rehearsal on the upstream control plane: {rehearsal.subject}, real time"
    else:
        head = (
            f"rehearsal on the twin: {rehearsal.subject}, time-scale {scale:g} "
            f"(cluster time = wall time × {scale:g})"
        )
    lines = [head, *rehearsal.setup]
    for i, run in enumerate(rehearsal.runs):
        verdict = rehearsal.verdicts[i] if i < len(rehearsal.verdicts) else None
        head = f"\nmove to {run.to}: {run.result}"
        if run.wall_seconds is not None:
            head += (
                f" in {_clock(run.wall_seconds)} wall, {_clock(run.wall_seconds * scale)} cluster"
            )
        if run.killed_at is not None:
            head += f" (killed at {run.killed_at}, resumed)"
        lines.append(head)
        lines.append(f"  {'step':<20} {'start':>8} {'wall':>8} {'cluster':>9}  result")
        for span in run.spans:
            start = "-" if span.start is None else f"+{span.start:.1f}s"
            tag = f"{span.result}" + (f" (attempt {span.attempt})" if run.attempts > 1 else "")
            cluster = None if span.seconds is None else span.seconds * scale
            wall = _clock(span.seconds)
            lines.append(f"  {span.name:<20} {start:>8} {wall:>8} {_clock(cluster):>9}  {tag}")
        for reason in run.reasons:
            lines.append(f"  reason: {reason}")
        for warning in run.warnings:
            lines.append(f"  warning: {warning}")
        if verdict is not None:
            lines.append(f"  verdict: {verdict.get('verdict')} ({verdict.get('source')})")
    lines.append("")
    if rehearsal.violations:
        lines.append(
            f"invariant monitor: {len(rehearsal.violations)} violations over "
            f"{_clock(rehearsal.wall_seconds)}"
        )
        for v in rehearsal.violations:
            state = "active" if v.get("active") else f"resolved {v.get('resolved')}"
            lines.append(f"  {v.get('reason')}\t{v.get('node')}\t{state}\t{v.get('message')}")
    else:
        lines.append(
            f"invariant monitor: no violations over {_clock(rehearsal.wall_seconds)} "
            f"({len(rehearsal.samples)} samples)"
        )
    for note in rehearsal.notes:
        lines.append(f"note: {note}")
    return "\n".join(lines) + "\n"
