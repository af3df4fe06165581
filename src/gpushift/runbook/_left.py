"""What an unfinished run left changed in the cluster, as its journal records it.

A run that stops (a failed step, a timeout, Ctrl-C, the cluster gone) leaves the cluster
between the two allocators: Flux owners suspended, workloads at 0, GPU nodes tainted. The
journal says which: a change is left in place once it was marked applied in its own step and
not set back since, by a later step (resume, the taint's release) or by ``--abort``. A change
recorded but never marked (the run stopped between the two) may or may not have been made;
it is listed apart. Reconcile requests are not state and are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpushift._obj import Obj
from gpushift.runbook._barrier import BARRIER_KEYS
from gpushift.runbook._journal import Journal
from gpushift.runbook._model import PARKED_LABEL

#: The journal's data key of the merge command's last lines of output.
MERGE_OUTPUT_KEY = "mergeOutput"


def _marks(journal: Journal) -> dict[str, str] | None:
    """Per change key: ``made`` (last marked in its own step), ``restored`` (marked by a
    later step, or undone); None when the log holds no marks (a journal in the format before
    records, read whole: its changes carry their state)."""
    steps = {str(c["key"]): str(c.get("step") or "") for c in journal.changes}
    current = ""
    out: dict[str, str] = {}
    seen = False
    for rec in journal.log:
        op = rec.get("op")
        if op == "step" and rec.get("current"):
            current = str(rec["current"])
        elif op == "mark":
            seen = True
            key = str(rec.get("key"))
            if rec.get("state") == "undone" or current != steps.get(key):
                out[key] = "restored"
            else:
                out[key] = "made"
    return out if seen else None


def _taint_text(taint: Any) -> str:
    if not isinstance(taint, dict):
        return str(taint)
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def _merge_state(journal: Journal) -> str:
    data = journal.data
    merged = journal.step("merge")
    if (merged and merged.get("result") == "done") or data.get("mergeDone"):
        return "made"
    output = data.get(MERGE_OUTPUT_KEY)
    if isinstance(output, dict) and output.get("exitCode"):
        return "failed"
    if data.get("mergeStarted"):
        return "started"
    return "not-made"


def left_state(journal: Journal) -> Obj:
    """What ``journal``'s run left changed (see the module docstring), as the final result's
    ``leftState``: ``recorded`` (False when the journal's records could not be read, only
    its head), ``suspended`` (Flux owners, CronJobs), ``scaledToZero`` (replicas 0, a
    DaemonSet parked by its nodeSelector), ``tainted`` (nodes and the taint), ``unconfirmed``
    (recorded, not known to be made), and the ``merge``: ``made``, ``failed``, ``started``
    (running when the run stopped) or ``not-made``."""
    marks = _marks(journal)
    suspended: list[Obj] = []
    stopped: list[Obj] = []
    tainted: list[Obj] = []
    unconfirmed: list[str] = []
    for rec in journal.changes:
        key = str(rec["key"])
        path = tuple(str(p) for p in rec.get("path") or ())
        step = rec.get("step")
        obj = str(rec.get("object") or "")
        is_taint = step == "merge" and path == ("spec", "taints")
        if step != "suspend" and not is_taint:
            continue  # reconcile requests, and restores recorded under their own key
        if marks is not None:
            state = marks.get(key, "planned")
        else:
            state = {"applied": "made", "undone": "restored"}.get(str(rec.get("state")), "planned")
        if state == "restored":
            continue
        if state == "planned":
            unconfirmed.append(key)
            continue
        item: Obj = {"object": obj, "field": rec.get("field"), "before": rec.get("before")}
        if is_taint:
            held = [t for t in rec.get("after") or [] if isinstance(t, dict)]
            ours = [_taint_text(t) for t in held if t.get("key") in BARRIER_KEYS]
            tainted.append({"object": obj, "taint": ours[0] if ours else ""})
        elif path == ("spec", "suspend"):  # a Flux owner, or a CronJob
            suspended.append(item)
        else:
            stopped.append(item)
    return {
        "run": journal.run,
        "to": journal.to,
        "step": journal.current,
        # False: only the head was readable (its records were not), so the changes are not
        # known; a journal as written holds its consumers, if only as an empty list.
        "recorded": journal.consumers is not None or bool(journal.changes),
        "suspended": suspended,
        "scaledToZero": stopped,
        "tainted": tainted,
        "unconfirmed": unconfirmed,
        "merge": _merge_state(journal),
    }


def left_lines(left: Obj) -> Iterator[str]:
    """:func:`left_state` as text, one line per kind of change."""
    yield (
        f"left in the cluster by run {left.get('run')} (to {left.get('to')}, stopped at "
        f"{left.get('step') or 'its start'}), as its journal records it:"
    )
    suspended = [str(i["object"]) for i in left.get("suspended") or ()]
    if suspended:
        yield f"  suspended: {', '.join(suspended)}"
    stopped = []
    for i in left.get("scaledToZero") or ():
        if str(i.get("field") or "").startswith("spec.template.spec.nodeSelector"):
            stopped.append(f"{i['object']} (nodeSelector {PARKED_LABEL})")
        else:
            stopped.append(f"{i['object']} (was {i.get('before')})")
    if stopped:
        yield f"  at 0: {', '.join(stopped)}"
    by_taint: dict[str, list[str]] = {}
    for i in left.get("tainted") or ():
        by_taint.setdefault(str(i.get("taint")), []).append(str(i["object"]))
    for taint, nodes in by_taint.items():
        yield f"  tainted {taint}: {', '.join(nodes)}"
    unconfirmed = list(left.get("unconfirmed") or ())
    if unconfirmed:
        yield f"  recorded but not known to be made: {'; '.join(unconfirmed)}"
    if left.get("recorded") is False:
        yield (
            "  the journal's records of its changes could not be read: what is suspended, "
            "at 0 or tainted is not known"
        )
    elif not (suspended or stopped or by_taint or unconfirmed):
        yield "  nothing suspended, at 0 or tainted"
    merge = left.get("merge")
    yield "  the merge: " + {
        "made": "made (--abort does not undo it)",
        "failed": "the merge command failed; the source is not known to have changed",
        "started": "started, not known to have finished",
    }.get(str(merge), "not made")
