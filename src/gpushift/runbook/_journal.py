"""The journal and the lock, as data: what a run records and how a Lease is judged.

The journal holds every step (started, finished, its result) and every change (object, field,
value before and after, planned then applied), the run's facts and the consumers recorded
before anything was changed. The executor stores it in the ConfigMap
``gpushift-cutover-journal`` (optimistic concurrency through resourceVersion) and in a local
file (written atomically); both carry ``seq``, so the newer one wins on ``--resume``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from gpushift._obj import Obj
from gpushift.runbook._model import Change, Consumer

JOURNAL_NAME = "gpushift-cutover-journal"
JOURNAL_KEY = "journal.json"
HISTORY_KEY = "history.json"
LEASE_NAME = "gpushift-cutover"
LEASE_SECONDS = 60
RENEW_SECONDS = 15
FINISHED = ("done", "unhealthy", "aborted")


def now_rfc3339(now: datetime | None = None) -> str:
    """RFC 3339 UTC with milliseconds: ``2026-12-01T15:04:05.123Z``."""
    now = now or datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def micro_time(now: datetime | None = None) -> str:
    """metav1.MicroTime as a Lease carries it: RFC 3339 with microseconds."""
    now = now or datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime | None:
    """An RFC 3339 time, or None."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None


@dataclass
class Journal:
    """One run's record (mutable: the executor updates it, then persists it)."""

    run: str
    to: str
    started: str
    state: str = "running"
    seq: int = 0
    current: str = ""
    options: Obj = field(default_factory=dict)
    facts: Obj = field(default_factory=dict)
    consumers: list[Obj] | None = None
    steps: list[Obj] = field(default_factory=list)
    changes: list[Obj] = field(default_factory=list)
    data: Obj = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Done, unhealthy or aborted: history, blocking nothing."""
        return self.state in FINISHED

    def step(self, name: str) -> Obj | None:
        """The record of a step, if it started."""
        return next((s for s in self.steps if s["name"] == name), None)

    def step_done(self, name: str) -> bool:
        """Whether a step finished (done or skipped)."""
        rec = self.step(name)
        return rec is not None and rec.get("result") in ("done", "skipped")

    def start_step(self, name: str, when: str) -> None:
        """Record that a step starts (again, on a resumed run)."""
        rec = self.step(name)
        if rec is None:
            self.steps.append({"name": name, "started": when, "result": "running"})
        else:
            rec.update(started=rec.get("started") or when, result="running")
        self.current = name

    def finish_step(self, name: str, result: str, seconds: float, when: str) -> None:
        """Record a step's result."""
        rec = self.step(name)
        if rec is None:
            rec = {"name": name, "started": when}
            self.steps.append(rec)
        rec.update(result=result, finished=when, seconds=round(seconds, 3))

    def change(self, change: Change) -> Obj | None:
        """The record of a change, by its key."""
        return next((c for c in self.changes if c["key"] == change.key), None)

    def plan_change(self, change: Change, when: str) -> None:
        """Record a change before it is made (state ``planned``)."""
        if self.change(change) is None:
            self.changes.append(
                {**change.to_json(), "key": change.key, "state": "planned", "planned": when}
            )

    def applied(self, change: Change, when: str, *, state: str = "applied") -> None:
        """Record that a change was made (or ``undone``)."""
        rec = self.change(change)
        if rec is not None:
            rec.update(state=state, **{state: when})

    def recorded(self) -> dict[str, Change]:
        """Journaled changes by key (planned ones included: they may have been made)."""
        return {c["key"]: Change.from_json(c) for c in self.changes}

    def recorded_consumers(self) -> tuple[Consumer, ...] | None:
        """Consumers recorded before anything was changed, if recorded."""
        if self.consumers is None:
            return None
        return tuple(Consumer.from_json(c) for c in self.consumers)

    def to_json(self) -> Obj:
        """The stored document."""
        return {
            "kind": "CutoverJournal",
            "version": 1,
            "run": self.run,
            "to": self.to,
            "state": self.state,
            "seq": self.seq,
            "started": self.started,
            "current": self.current,
            "options": self.options,
            "facts": self.facts,
            "consumers": self.consumers,
            "steps": self.steps,
            "changes": self.changes,
            "data": self.data,
        }

    def dumps(self) -> str:
        """As JSON text."""
        return json.dumps(self.to_json(), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Journal:
        """From :meth:`to_json`.

        Raises:
            ValueError: not a cutover journal.
        """
        if doc.get("kind") != "CutoverJournal":
            raise ValueError("not a CutoverJournal")
        return cls(
            run=str(doc["run"]),
            to=str(doc["to"]),
            started=str(doc.get("started") or ""),
            state=str(doc.get("state") or "running"),
            seq=int(doc.get("seq") or 0),
            current=str(doc.get("current") or ""),
            options=dict(doc.get("options") or {}),
            facts=dict(doc.get("facts") or {}),
            consumers=list(doc["consumers"]) if doc.get("consumers") is not None else None,
            steps=list(doc.get("steps") or []),
            changes=list(doc.get("changes") or []),
            data=dict(doc.get("data") or {}),
        )


def newer(a: Journal | None, b: Journal | None) -> Journal | None:
    """The journal to trust of two copies: the later write of the same run, else the one
    started later."""
    if a is None or b is None:
        return a or b
    if a.run == b.run:
        return a if a.seq >= b.seq else b
    return a if a.started >= b.started else b


# --- the lock ---------------------------------------------------------------------------------


def holder_identity(run: str) -> str:
    """``host/pid/run``: the Lease's holderIdentity for this process."""
    import os

    return f"{socket.gethostname()}/{os.getpid()}/{run}"


@dataclass(frozen=True, slots=True)
class LeaseVerdict:
    """``take`` (absent, expired, or its holder is a dead process on this host), ``renew``
    (ours) or ``refuse`` with the message naming holder and renewTime."""

    action: str
    message: str = ""


def judge_lease(
    lease: Mapping[str, Any] | None,
    *,
    me: str,
    now: datetime,
    alive: Any = None,
) -> LeaseVerdict:
    """Whether this run may hold the lock. ``alive(pid) -> bool`` tells whether a process of
    this host still runs (a holder killed with -9 leaves its Lease behind until it expires;
    on the same host that is known at once)."""
    if lease is None:
        return LeaseVerdict("take")
    spec = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    if not holder:
        return LeaseVerdict("take")
    if holder == me:
        return LeaseVerdict("renew")
    renewed = parse_time(str(spec.get("renewTime") or spec.get("acquireTime") or ""))
    duration = int(spec.get("leaseDurationSeconds") or LEASE_SECONDS)
    if renewed is None or renewed + timedelta(seconds=duration) < now:
        return LeaseVerdict("take", f"lease of {holder} expired")
    host, _, rest = holder.partition("/")
    pid = rest.partition("/")[0]
    local = alive is not None and host == socket.gethostname() and pid.isdigit()
    if local and not alive(int(pid)):
        return LeaseVerdict("take", f"holder {holder} is no longer running")
    meta = lease.get("metadata") or {}
    return LeaseVerdict(
        "refuse",
        f"another cutover holds the lock: Lease {meta.get('namespace')}/{meta.get('name')} held "
        f"by {holder}, last renewed {spec.get('renewTime')} (expires after "
        f"{duration}s without renewal)",
    )


def lease_body(
    *,
    name: str,
    namespace: str,
    me: str,
    now: datetime,
    acquired: str | None = None,
    transitions: int = 0,
) -> Obj:
    """A coordination.k8s.io/v1 Lease held by ``me``."""
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": me,
            "leaseDurationSeconds": LEASE_SECONDS,
            "acquireTime": acquired or micro_time(now),
            "renewTime": micro_time(now),
            "leaseTransitions": transitions,
        },
    }
