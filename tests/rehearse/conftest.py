"""Shared inputs for the rehearse tests: hand-written ``gpushift cutover -o json`` streams
(``streams/*.jsonl``), written line by line from the cutover's event contract
(docs/runbook.md), so the timeline, JSON and report are tested without a cutover.

- ``to-dra.jsonl``: the move to DRA, every step done; the first event at 15:00:01.000.
- ``killed-in-drained.jsonl``: its first 12 lines: kill -9 during ``drained``'s second wait.
- ``resumed.jsonl``: the ``--resume`` after that kill; done steps come back ``skipped``.
- ``rollback-timeout.jsonl``: the way back, timing out in ``new-allocator-up`` (exit 5).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpushift_twin.rehearse import Attempt, parse_stream

STREAMS = Path(__file__).parent / "streams"


@pytest.fixture
def origin() -> datetime:
    """The instant the hand-written streams' offsets count from."""
    return datetime(2026, 12, 1, 15, 0, 0, tzinfo=UTC)


@pytest.fixture
def stream():  # type: ignore[no-untyped-def]
    """``stream(name, exit_code, killed=False)``: an Attempt read from ``streams/NAME.jsonl``."""

    def make(name: str, code: int | None, *, killed: bool = False) -> Attempt:
        lines = (STREAMS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
        return Attempt(tuple(parse_stream(lines)), code, killed=killed)

    return make
