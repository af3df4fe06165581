"""The journal and the lock, as data: what a run records and how a Lease is judged.

The journal holds every step (started, finished, its result) and every change (object, field,
value before and after, planned then applied), the run's facts and the consumers recorded
before anything was changed. It is kept as a log of records, each with its ``seq`` (1, 2, …):
every change to the journal appends one bounded record, so storing it never rewrites what was
stored before. :meth:`Journal.replay` rebuilds the journal from its records;
:func:`parse_lines` reads the local file's JSON lines, a torn last line ignored;
:func:`chunk_plan` places records in the numbered chunk ConfigMaps. The executor's store does
the I/O (docs/formats.md).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from gpushift._obj import Obj
from gpushift.runbook._model import Change, Consumer

JOURNAL_NAME = "gpushift-cutover-journal"
#: The head's keys: the run (written once), its state and steps (patched when they change),
#: the finished runs before it.
RUN_KEY = "run.json"
STATE_KEY = "state.json"
STEPS_KEY = "steps.json"
HISTORY_KEY = "history.json"
#: The key of the format before records (one document, rewritten whole): still read.
JOURNAL_KEY = "journal.json"
#: A chunk's key naming the run its records belong to.
CHUNK_RUN_KEY = "run"
#: What a chunk's record values may total: well under kube-apiserver's 1 MiB per object.
CHUNK_BYTES = 128 * 1024
#: What one record's text may hold of a data value: a larger value (a snapshot of thousands
#: of GPU pods) is split over ``data-part`` records, so no record nears a chunk's bound.
PART_BYTES = 32 * 1024
#: Consumers per ``consumers`` record.
CONSUMERS_PER_RECORD = 50
LEASE_NAME = "gpushift-cutover"
LEASE_SECONDS = 60
RENEW_SECONDS = 15
FINISHED = ("done", "unhealthy", "aborted")
VERSION = 2


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


def dumps(doc: Any) -> str:
    """Compact JSON, keys sorted: the stored text of a record or a head key."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def chunk_name(index: int) -> str:
    """The ConfigMap holding chunk ``index`` (1, 2, …) of the records."""
    return f"{JOURNAL_NAME}-{index}"


def record_key(seq: int) -> str:
    """A record's key in its chunk: the seq, zero-padded so keys sort as records do."""
    return f"{seq:08d}"


@dataclass
class Journal:
    """One run's record, built by appending records (see the module docstring).

    Every mutator appends one record to :attr:`log` and applies it; the fields are what the
    log replays to. The store persists ``log`` past what each copy already holds.
    """

    run: str
    to: str
    started: str
    state: str = "running"
    current: str = ""
    options: Obj = field(default_factory=dict)
    facts: Obj = field(default_factory=dict)
    consumers: list[Obj] | None = None
    steps: list[Obj] = field(default_factory=list)
    changes: list[Obj] = field(default_factory=list)
    data: Obj = field(default_factory=dict)
    log: list[Obj] = field(default_factory=list, repr=False)
    _by_key: dict[str, Obj] = field(default_factory=dict, repr=False)
    _pending_consumers: list[Obj] = field(default_factory=list, repr=False)
    _expect: int = field(default=0, repr=False)
    _parts: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @property
    def seq(self) -> int:
        """The last record's seq (0: none)."""
        return len(self.log)

    @property
    def finished(self) -> bool:
        """Done, unhealthy or aborted: history, blocking nothing."""
        return self.state in FINISHED

    # --- building ------------------------------------------------------------------------

    @classmethod
    def begin(
        cls,
        *,
        run: str,
        to: str,
        started: str,
        options: Mapping[str, Any],
        facts: Mapping[str, Any],
        consumers: Iterable[Obj] | None,
    ) -> Journal:
        """A new run's journal: the ``begin`` record, then the consumers in records of at
        most :data:`CONSUMERS_PER_RECORD` (all counted in the first, so a journal whose
        consumer records did not all reach a copy reads as not having recorded them; None:
        not recorded)."""
        journal = cls(run=run, to=to, started=started)
        items = [dict(c) for c in consumers or ()]
        journal._append(
            {
                "op": "begin",
                "kind": "CutoverJournal",
                "version": VERSION,
                "run": run,
                "to": to,
                "started": started,
                "options": dict(options),
                "facts": dict(facts),
                "consumers": None if consumers is None else len(items),
            }
        )
        for i in range(0, len(items), CONSUMERS_PER_RECORD):
            journal._append({"op": "consumers", "items": items[i : i + CONSUMERS_PER_RECORD]})
        return journal

    @classmethod
    def replay(cls, records: Iterable[Mapping[str, Any]]) -> Journal:
        """The journal its records build: ``seq`` 1, 2, … with none missing, the first a
        ``begin``. Records past a gap (or a duplicate seq) are not read.

        Raises:
            ValueError: no ``begin`` record first.
        """
        it = iter(records)
        first = next(it, None)
        if first is None or first.get("op") != "begin" or first.get("seq") != 1:
            raise ValueError("not a CutoverJournal: no begin record first")
        journal = cls(run=str(first["run"]), to=str(first["to"]), started=str(first["started"]))
        journal._apply(dict(first))
        journal.log.append(dict(first))
        for rec in it:
            if rec.get("seq") != journal.seq + 1:
                break
            journal._apply(dict(rec))
            journal.log.append(dict(rec))
        return journal

    def _append(self, rec: Obj) -> Obj:
        rec = {"seq": self.seq + 1, **rec}
        self._apply(rec)
        self.log.append(rec)
        return rec

    def _apply(self, rec: Obj) -> None:
        op = rec.get("op")
        if op == "begin":
            self.run, self.to, self.started = str(rec["run"]), str(rec["to"]), str(rec["started"])
            self.options = dict(rec.get("options") or {})
            self.facts = dict(rec.get("facts") or {})
            self._pending_consumers = []
            count = rec.get("consumers")
            self._expect = -1 if count is None else int(count)
            self.consumers = [] if self._expect == 0 else None
        elif op == "consumers":
            self._pending_consumers.extend(dict(c) for c in rec.get("items") or [])
            if 0 <= self._expect <= len(self._pending_consumers):
                self.consumers = self._pending_consumers
        elif op == "step":
            step = dict(rec["step"])
            for i, old in enumerate(self.steps):
                if old["name"] == step["name"]:
                    self.steps[i] = step
                    break
            else:
                self.steps.append(step)
            if rec.get("current"):
                self.current = str(rec["current"])
        elif op == "change":
            change = dict(rec["change"])
            if change["key"] not in self._by_key:
                self.changes.append(change)
                self._by_key[change["key"]] = change
        elif op == "mark":
            found = self._by_key.get(str(rec["key"]))
            if found is not None:
                found.update(state=rec["state"], **{str(rec["state"]): rec["at"]})
        elif op == "data":
            self.data[str(rec["key"])] = rec.get("value")
        elif op == "data-part":
            key, part, parts = str(rec["key"]), int(rec["part"]), int(rec["parts"])
            got = [] if part == 0 else self._parts.get(key, [])
            if len(got) == part:
                got.append(str(rec["text"]))
                self._parts[key] = got
            if len(got) == parts:
                self.data[key] = json.loads("".join(self._parts.pop(key)))
        elif op == "state":
            self.state = str(rec["state"])
        else:
            raise ValueError(f"unknown journal record op {op!r}")

    # --- reading -------------------------------------------------------------------------

    def step(self, name: str) -> Obj | None:
        """The record of a step, if it started."""
        return next((s for s in self.steps if s["name"] == name), None)

    def step_done(self, name: str) -> bool:
        """Whether a step finished (done or skipped)."""
        rec = self.step(name)
        return rec is not None and rec.get("result") in ("done", "skipped")

    def change(self, change: Change) -> Obj | None:
        """The record of a change, by its key."""
        return self._by_key.get(change.key)

    def recorded(self) -> dict[str, Change]:
        """Journaled changes by key (planned ones included: they may have been made)."""
        return {c["key"]: Change.from_json(c) for c in self.changes}

    def recorded_consumers(self) -> tuple[Consumer, ...] | None:
        """Consumers recorded before anything was changed, if recorded."""
        if self.consumers is None:
            return None
        return tuple(Consumer.from_json(c) for c in self.consumers)

    # --- mutators: each appends one record -----------------------------------------------

    def start_step(self, name: str, when: str) -> None:
        """Record that a step starts (again, on a resumed run)."""
        rec = self.step(name) or {}
        step = {**rec, "name": name, "started": rec.get("started") or when, "result": "running"}
        self._append({"op": "step", "current": name, "step": step})

    def finish_step(self, name: str, result: str, seconds: float, when: str) -> None:
        """Record a step's result."""
        rec = self.step(name) or {"name": name, "started": when}
        step = {**rec, "result": result, "finished": when, "seconds": round(seconds, 3)}
        self._append({"op": "step", "step": step})

    def plan_change(self, change: Change, when: str) -> None:
        """Record a change before it is made (state ``planned``)."""
        if self.change(change) is None:
            rec = {**change.to_json(), "key": change.key, "state": "planned", "planned": when}
            self._append({"op": "change", "change": rec})

    def applied(self, change: Change, when: str, *, state: str = "applied") -> None:
        """Record that a change was made (or ``undone``)."""
        if self.change(change) is not None:
            self._append({"op": "mark", "key": change.key, "state": state, "at": when})

    def set_data(self, key: str, value: Any) -> None:
        """Record one of the run's data (snapshots, tokens, the merge's times, the verdict):
        one ``data`` record, or ``data-part`` records of :data:`PART_BYTES` of its text each
        when it is larger (the value is set when the last part is read)."""
        text = dumps(value)
        if len(text) <= PART_BYTES:
            self._append({"op": "data", "key": key, "value": value})
            return
        pieces = [text[i : i + PART_BYTES] for i in range(0, len(text), PART_BYTES)]
        for i, piece in enumerate(pieces):
            self._append(
                {"op": "data-part", "key": key, "part": i, "parts": len(pieces), "text": piece}
            )

    def set_state(self, state: str) -> None:
        """Record the run's state (``running``, then done, unhealthy or aborted)."""
        self._append({"op": "state", "state": state})

    # --- the stored forms ----------------------------------------------------------------

    def head(self) -> dict[str, str]:
        """The head ConfigMap's journal keys as stored text (history apart): small and
        bounded whatever the number of consumers or changes."""
        run = {
            "kind": "CutoverJournal",
            "version": VERSION,
            "run": self.run,
            "to": self.to,
            "started": self.started,
            "options": self.options,
            "facts": self.facts,
        }
        return {
            RUN_KEY: dumps(run),
            STATE_KEY: dumps({"state": self.state, "current": self.current}),
            STEPS_KEY: dumps(self.steps),
        }

    def to_json(self) -> Obj:
        """The whole journal as one document (for reading; never stored whole)."""
        return {
            "kind": "CutoverJournal",
            "version": VERSION,
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

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Journal:
        """From a whole document (:meth:`to_json`, or the format before records): its
        records are made again, so a resumed run appends to them.

        Raises:
            ValueError: not a cutover journal.
        """
        if doc.get("kind") != "CutoverJournal":
            raise ValueError("not a CutoverJournal")
        consumers = doc.get("consumers")
        journal = cls.begin(
            run=str(doc["run"]),
            to=str(doc["to"]),
            started=str(doc.get("started") or ""),
            options=dict(doc.get("options") or {}),
            facts=dict(doc.get("facts") or {}),
            consumers=None if consumers is None else list(consumers),
        )
        current = str(doc.get("current") or "")
        for step in doc.get("steps") or []:
            at = {"current": current} if step.get("name") == current else {}
            journal._append({"op": "step", "step": dict(step), **at})
        for change in doc.get("changes") or []:
            journal._append({"op": "change", "change": dict(change)})
        for key, value in (doc.get("data") or {}).items():
            journal.set_data(str(key), value)
        if (doc.get("state") or "running") != "running":
            journal.set_state(str(doc["state"]))
        return journal


def head_journal(data: Mapping[str, str]) -> Journal | None:
    """The journal a head ConfigMap's data names, without its records (run, options, facts,
    state, steps), or None when it holds none. A head in the format before records (key
    ``journal.json``) is read whole."""
    try:
        if JOURNAL_KEY in data and RUN_KEY not in data:
            return Journal.from_json(json.loads(data[JOURNAL_KEY]))
        run = json.loads(data[RUN_KEY])
        if run.get("kind") != "CutoverJournal":
            return None
        state = json.loads(data.get(STATE_KEY) or "{}")
        # Its records are made again from what the head holds (the consumers not: a resumed
        # run finds them again, as when the run stopped before recording them).
        return Journal.from_json(
            {
                **run,
                "state": state.get("state") or "running",
                "current": state.get("current") or "",
                "steps": json.loads(data.get(STEPS_KEY) or "[]"),
                "consumers": None,
            }
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def chunk_records(data: Mapping[str, str], *, run: str) -> list[Obj] | None:
    """A chunk's records in seq order, or None when the chunk belongs to another run."""
    if data.get(CHUNK_RUN_KEY) != run:
        return None
    out = []
    for key in sorted(k for k in data if k.isdigit()):
        try:
            out.append(json.loads(data[key]))
        except ValueError:
            break
    return out


def cluster_journal(head: Mapping[str, str], chunks: Iterable[Mapping[str, str]]) -> Journal | None:
    """The journal a head ConfigMap's data and its chunks' data (``-1``, ``-2``, … in order)
    hold: the head's run replayed from the chunks up to the first of another run, else what the
    head alone holds. None: no journal."""
    found = head_journal(head)
    if found is None or RUN_KEY not in head:
        return found
    records: list[Obj] = []
    for data in chunks:
        got = chunk_records(data, run=found.run)
        if got is None:
            break
        records += got
    try:
        return Journal.replay(records)
    except (ValueError, KeyError, TypeError):
        return found


def parse_lines(text: str) -> list[Obj]:
    """The local file's records: one JSON object a line. A line that does not parse (a write
    torn by a crash) ends the log: it and what follows are not read."""
    out: list[Obj] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            break
        if not isinstance(rec, dict):
            break
        out.append(rec)
    return out


def read_local(text: str) -> Journal | None:
    """The journal in the local file's text (JSON lines, or the whole document of the format
    before records), or None."""
    try:
        return Journal.replay(parse_lines(text))
    except (ValueError, KeyError, TypeError):
        pass
    try:
        return Journal.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def chunk_plan(
    records: Iterable[Mapping[str, Any]], *, index: int, used: int, limit: int = CHUNK_BYTES
) -> list[tuple[int, dict[str, str]]]:
    """Where records go: ``(chunk index, {key: text})`` in order, filling chunk ``index``
    (holding ``used`` bytes of record text) and then the next ones, each to at most ``limit``
    bytes (a record larger than ``limit`` takes a chunk of its own)."""
    out: list[tuple[int, dict[str, str]]] = []
    current: dict[str, str] = {}
    for rec in records:
        text = dumps(dict(rec))
        size = len(text.encode())
        if index == 0 or (used and used + size > limit):
            if current:
                out.append((index, current))
            index, used, current = index + 1, 0, {}
        current[record_key(int(rec["seq"]))] = text
        used += size
    if current:
        out.append((index, current))
    return out


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
