"""The journal as records (pure): a record per change, replayed to the same journal from the
chunks and from the local file's JSON lines, a torn last line ignored, each chunk bounded."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift.runbook import (
    CHUNK_BYTES,
    PART_BYTES,
    Change,
    Journal,
    ObjectRef,
    chunk_plan,
    cluster_journal,
    head_journal,
    parse_lines,
    read_local,
)

DEPLOY = ObjectRef("apps/v1", "Deployment", "team-1", "app")


def _change(i: int, step: str = "suspend") -> Change:
    obj = ObjectRef("apps/v1", "Deployment", f"team-{i % 10}", f"app-{i:04d}")
    return Change(step, obj, ("spec", "replicas"), 1, 0, "scale to 0")


def _consumer(i: int) -> dict[str, Any]:
    return {"workload": {"kind": "Deployment", "name": f"app-{i}"}, "flux": [], "pods": []}


def _new(consumers: int = 3) -> Journal:
    return Journal.begin(
        run="r1",
        to="dra",
        started="2026-12-01T10:00:00.000Z",
        options={"to": "dra"},
        facts={"oldShares": 5},
        consumers=[_consumer(i) for i in range(consumers)],
    )


def dumps(doc: Any) -> str:
    """Compact JSON, keys sorted, as the journal stores its text."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _lines(journal: Journal) -> str:
    return "".join(dumps(r) + "\n" for r in journal.log)


def _chunks(journal: Journal, limit: int = CHUNK_BYTES) -> list[dict[str, str]]:
    return [
        {"run": journal.run, **keys}
        for _, keys in chunk_plan(journal.log, index=0, used=0, limit=limit)
    ]


# One operation of a run: (kind, argument).
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("plan"), st.integers(0, 30)),
        st.tuples(st.just("applied"), st.integers(0, 30)),
        st.tuples(st.just("undone"), st.integers(0, 30)),
        st.tuples(st.just("start"), st.sampled_from(["suspend", "drained", "merge"])),
        st.tuples(st.just("finish"), st.sampled_from(["suspend", "drained", "merge"])),
        st.tuples(st.just("data"), st.sampled_from(["token", "before", "healthy"])),
        st.tuples(st.just("state"), st.sampled_from(["running", "done", "aborted"])),
    ),
    max_size=60,
)


def _run(ops: list[tuple[str, Any]], consumers: int) -> Journal:
    journal = _new(consumers)
    for n, (op, arg) in enumerate(ops):
        when = f"2026-12-01T10:00:{n % 60:02d}.000Z"
        if op == "plan":
            journal.plan_change(_change(arg), when)
        elif op in ("applied", "undone"):
            journal.applied(_change(arg), when, state=op)
        elif op == "start":
            journal.start_step(arg, when)
        elif op == "finish":
            journal.finish_step(arg, "done", 1.5, when)
        elif op == "data":
            journal.set_data(arg, {"n": n})
        else:
            journal.set_state(arg)
    return journal


@settings(max_examples=60, deadline=None)
@given(OPS, st.integers(0, 130))
def test_replay_of_the_records_is_the_journal(ops: list[tuple[str, Any]], consumers: int) -> None:
    journal = _run(ops, consumers)
    assert [r["seq"] for r in journal.log] == list(range(1, journal.seq + 1))
    from_file = read_local(_lines(journal))
    assert from_file is not None and from_file.to_json() == journal.to_json()
    head = journal.head()
    from_cluster = cluster_journal(head, _chunks(journal, limit=2_000))
    assert from_cluster is not None and from_cluster.to_json() == journal.to_json()
    assert len(journal.consumers or []) == consumers


@settings(max_examples=60, deadline=None)
@given(OPS, st.data())
def test_a_torn_last_line_reads_as_the_journal_before_it(
    ops: list[tuple[str, Any]], data: st.DataObject
) -> None:
    journal = _run(ops, 2)
    text = _lines(journal)
    last = dumps(journal.log[-1]) + "\n"
    cut = data.draw(st.integers(1, len(last) - 2))  # a part of the last line, its end lost
    torn = text[: len(text) - len(last)] + last[:cut]
    before = Journal.replay(journal.log[:-1]) if journal.seq > 1 else None
    got = read_local(torn)
    if before is None:
        assert got is None
    else:
        assert got is not None and got.to_json() == before.to_json()
        # Appending after a torn line would hide every later record: the store rewrites
        # such a file; parse_lines stops at the torn line.
        assert len(parse_lines(torn + dumps({"seq": 99}) + "\n")) == journal.seq - 1


def test_each_change_is_one_bounded_record_and_chunks_stay_under_the_limit() -> None:
    journal = _new(1000)
    sizes = []
    for i in range(2000):
        before = journal.seq
        journal.plan_change(_change(i), "2026-12-01T10:00:00.000Z")
        journal.applied(_change(i), "2026-12-01T10:00:01.000Z")
        assert journal.seq == before + 2
        sizes += [len(dumps(r)) for r in journal.log[before:]]
    # Compact JSON, one line each: a change's records are a few hundred bytes.
    assert max(sizes) < 600
    assert "\n" not in dumps(journal.log[-1]) and ", " not in dumps(journal.log[-1])
    placed = chunk_plan(journal.log, index=0, used=0)
    assert [i for i, _ in placed] == list(range(1, len(placed) + 1))
    assert all(sum(len(v) for v in keys.values()) <= CHUNK_BYTES for _, keys in placed)
    total = sum(len(dumps(r)) for r in journal.log)
    # The old format held all of it in one ConfigMap: here more than 1 MiB.
    assert total > 1024 * 1024 and len(placed) >= total // CHUNK_BYTES
    # The head stays small whatever the number of consumers and changes.
    assert sum(len(v) for v in journal.head().values()) < 2_000


def test_chunk_plan_fills_the_last_chunk_first() -> None:
    journal = _new(0)
    for i in range(10):
        journal.plan_change(_change(i), "t")
    size = len(dumps(journal.log[1]))
    placed = chunk_plan(journal.log[1:], index=3, used=1_000 - size, limit=1_000)
    assert placed[0][0] == 3 and list(placed[0][1]) == ["00000002"]
    assert placed[1][0] == 4
    # A record larger than the limit takes a chunk of its own.
    big = [
        {"seq": 1, "op": "data", "key": "k", "value": "x" * 3_000},
        {"seq": 2, "op": "state", "state": "done"},
    ]
    assert [i for i, _ in chunk_plan(big, index=0, used=0, limit=1_000)] == [1, 2]


def test_a_large_value_is_split_over_bounded_records() -> None:
    journal = _new(0)
    snapshot = {
        "pods": [{"pod": f"team-{i % 10}/app-{i:05d}", "phase": "Running"} for i in range(5000)]
    }
    assert len(dumps(snapshot)) > 5 * PART_BYTES
    journal.set_data("before", snapshot)
    parts = [r for r in journal.log if r["op"] == "data-part"]
    assert len(parts) == -(-len(dumps(snapshot)) // PART_BYTES)
    # Each part's text is escaped in its record: at most twice as long, well under a chunk.
    assert max(len(dumps(r)) for r in journal.log) < 2 * PART_BYTES + 200 < CHUNK_BYTES
    assert journal.data["before"] == snapshot
    assert Journal.replay(journal.log).data["before"] == snapshot
    # Until its last part is read the value is not there.
    assert "before" not in Journal.replay(journal.log[:-1]).data


def test_consumer_records_not_all_stored_read_as_not_recorded() -> None:
    journal = _new(120)  # begin + three consumer records of at most 50
    assert [r["op"] for r in journal.log] == ["begin", "consumers", "consumers", "consumers"]
    partial = Journal.replay(journal.log[:3])
    assert partial.consumers is None and partial.recorded_consumers() is None
    assert len(Journal.replay(journal.log).consumers or []) == 120
    none = Journal.begin(run="r", to="dra", started="t", options={}, facts={}, consumers=[])
    assert Journal.replay(none.log).consumers == []


def test_replay_stops_at_a_gap_and_needs_a_begin() -> None:
    journal = _run([("start", "suspend"), ("plan", 1), ("applied", 1)], 0)
    gap = [r for r in journal.log if r["seq"] != 3]
    assert Journal.replay(gap).seq == 2
    try:
        Journal.replay(journal.log[1:])
    except ValueError as err:
        assert "no begin record" in str(err)
    else:
        raise AssertionError("replayed without a begin record")


def test_chunks_of_another_run_are_not_read() -> None:
    journal = _run([("plan", 1), ("applied", 1)], 1)
    chunks = _chunks(journal)
    other = [{**c, "run": "r0"} for c in chunks]
    found = cluster_journal(journal.head(), other)
    # Only what the head holds: the run, its steps and state; no changes, consumers unknown.
    assert found is not None and found.run == "r1" and found.changes == []
    assert found.consumers is None


def test_the_format_before_records_is_still_read() -> None:
    old = {
        "kind": "CutoverJournal",
        "version": 1,
        "run": "r0",
        "to": "dra",
        "state": "done",
        "seq": 41,
        "started": "2026-11-30T10:00:00.000Z",
        "current": "verdict",
        "options": {"to": "dra"},
        "facts": {"oldShares": 5},
        "consumers": [_consumer(1)],
        "steps": [{"name": "suspend", "result": "done"}, {"name": "verdict", "result": "done"}],
        "changes": [
            {**_change(1).to_json(), "key": _change(1).key, "state": "applied", "applied": "t"}
        ],
        "data": {"healthy": True},
    }
    got = head_journal({"journal.json": json.dumps(old, indent=1)})
    assert got is not None and got.finished and got.to == "dra" and got.current == "verdict"
    assert got.recorded() == {_change(1).key: _change(1)}
    assert {k: v for k, v in got.to_json().items() if k != "seq"} == {
        **{k: v for k, v in old.items() if k != "seq"},
        "version": 2,
    }
    local = read_local(json.dumps(old, indent=1))
    assert local is not None and local.to_json() == got.to_json()
