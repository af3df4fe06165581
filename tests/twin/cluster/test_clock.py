"""The virtual clock: scaled time, jumps, and the wall delay of a cluster interval."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from gpushift_twin.apiserver import rfc3339
from gpushift_twin.cluster import VirtualClock


def test_scaled_time_and_wall_delays() -> None:
    start = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC)
    clock = VirtualClock(time_scale=100, start=start)
    # The start drops sub-second digits, as object timestamps have none.
    assert rfc3339(clock.at(0)) == "2026-01-02T03:04:05Z"
    # The kubelet's 5-minute grace is 3 wall seconds at 100x.
    assert clock.wall_delay(300) == pytest.approx(3.0)
    assert clock.wall_delay(-1) == 0.0
    before = clock.seconds()
    time.sleep(0.05)
    assert clock.seconds() - before >= 5.0  # 50 ms of wall time, 100 times over


def test_advance_and_a_frozen_clock() -> None:
    clock = VirtualClock(time_scale=0)
    assert clock.wall_delay(1) == float("inf")
    clock.advance(300)
    assert clock.seconds() == 300
    assert rfc3339(clock.now()) == rfc3339(clock.at(300))
    with pytest.raises(ValueError):
        VirtualClock(time_scale=-1)
