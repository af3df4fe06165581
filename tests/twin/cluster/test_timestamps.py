"""Timestamps as clients see them: never ahead of wall time, also at --time-scale 100.

The cluster's clock runs 100 times faster than wall time, so it starts in the past: 99 × a
day (the horizon) before wall time. kubectl computes `describe` ages (and `get` ages with
--server-print=false) from its own clock, and prints `<invalid>` for a time in the future.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpushift_twin.apiserver import new_store, rfc3339
from gpushift_twin.cluster import VirtualClock

MANIFESTS = Path(__file__).resolve().parent / "manifests"
DEVICE_PLUGIN = (MANIFESTS / "device-plugin.yaml").read_text()
GPU_APP = (MANIFESTS / "gpu-app.yaml").read_text()

DAY = 86_400
LEAD = 99 * DAY  # (100 - 1) × a day: the lead at --time-scale 100
_UNITS = {"y": 365 * DAY, "d": DAY, "h": 3600, "m": 60, "s": 1}


def _seconds(age: str) -> int:
    """A kubectl age ("9m58s", "2d3h", "99d") in seconds."""
    parts = re.fullmatch(r"((\d+)([ydhms]))+", age)
    assert parts, f"not an age: {age!r}"
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([ydhms])", age))


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _stamps(obj: Any, path: str = "") -> list[tuple[str, str]]:
    """Every RFC 3339 timestamp in ``obj``, with where it is."""
    out: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_stamps(v, f"{path}.{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_stamps(v, f"{path}[{i}]"))
    elif isinstance(obj, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", obj):
        out.append((path, obj))
    return out


def _ages(d: Any) -> list[str]:
    rows = d.kubectl("get", "pods", "-n", "default", "--no-headers").splitlines()
    return [row.split()[-1] for row in rows]


def test_after_a_while_at_time_scale_100_no_age_is_invalid(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.apply(GPU_APP.format(name="gpu-app", replicas=3))
    d.wait_for(
        "three consumers Running",
        lambda: (
            [p["status"].get("phase") for p in d.get("pods", "-n", "default")["items"]]
            == ["Running"] * 3
        ),
    )
    # Ten minutes of cluster time by the server's AGE column (6 wall seconds at 100x): a
    # clock started at wall time would now be about 594 s ahead of it.
    d.wait_for(
        "ten cluster minutes",
        lambda: all(_seconds(a) >= 600 for a in _ages(d)),
        timeout=60,
    )
    assert not [a for a in _ages(d) if "invalid" in a]
    namespaces = d.kubectl("get", "namespaces", "--no-headers")
    # The built-in namespaces were stored before the cluster's clock took over.
    assert "<invalid>" not in namespaces and "default" in namespaces

    for what in (("pods", "-n", "default"), ("nodes",), ("events", "-A"), ("namespaces",)):
        items = d.get(*what)["items"]
        wall = datetime.now(UTC)  # after the response: every stamp was made before it
        stamps = [(p, s) for o in items for p, s in _stamps(o)]
        assert stamps, what
        ahead = [(p, s) for p, s in stamps if _parse(s) > wall]
        assert ahead == [], (what, wall)
        # And no further behind than the lead the clock started with.
        behind = [(p, s) for p, s in stamps if _parse(s) < wall - timedelta(seconds=LEAD + 60)]
        assert behind == [], what
        created = [_parse(o["metadata"]["creationTimestamp"]) for o in items]
        assert all(c <= wall for c in created)

    # A new object, stamped now: at most the lead behind wall time, never ahead.
    before = datetime.now(UTC).replace(microsecond=0)
    d.kubectl("create", "configmap", "-n", "default", "probe", "--from-literal=a=b")
    after = datetime.now(UTC)
    made = _parse(d.get("configmap", "-n", "default", "probe")["metadata"]["creationTimestamp"])
    assert before - timedelta(seconds=LEAD) <= made <= after

    # kubectl's own ages (client-side): 99 days less the cluster time that ran, so 98d or 99d.
    client = d.kubectl("get", "pods", "-n", "default", "--server-print=false", "--no-headers")
    assert {line.split()[-1] for line in client.splitlines()} <= {"98d", "99d"}
    for args in (("pods", "-n", "default"), ("nodes",)):
        described = d.kubectl("describe", *args)
        assert "Events:" in described
        assert "<invalid>" not in described
    pod_events = d.kubectl("describe", "pods", "-n", "default")
    assert re.search(r"Normal\s+Scheduled\s+\S+\s+default-scheduler", pod_events)


def test_the_clock_starts_behind_wall_time_by_its_lead() -> None:
    wall = datetime.now(UTC)
    clock = VirtualClock(time_scale=100, horizon=0.5)
    # (100 - 1) × 0.5 s: it catches up with wall time after half a wall second.
    assert clock.lead == pytest.approx(49.5)
    assert clock.horizon == 0.5
    gap = (wall - clock.at(0)).total_seconds()
    assert 49.5 <= gap <= 51.0  # the start is floored to a whole second
    assert clock.now() <= datetime.now(UTC)
    time.sleep(0.6)  # past the horizon, the clock under test has run ahead
    assert clock.now() > datetime.now(UTC)


def test_an_explicit_start_or_a_slow_clock_has_no_lead() -> None:
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert VirtualClock(time_scale=100, start=start).lead == 0.0
    assert VirtualClock(time_scale=100, start=start).at(0) == start
    assert VirtualClock(time_scale=1).lead == 0.0
    assert VirtualClock(time_scale=0.5).lead == 0.0
    assert VirtualClock(time_scale=100).lead == LEAD
    with pytest.raises(ValueError, match="horizon"):
        VirtualClock(horizon=-1)


def test_taking_a_clock_in_the_past_redates_what_is_ahead_of_it() -> None:
    store = new_store()
    ns = store.kind_for("", "v1", "namespaces")
    wall = rfc3339(datetime.now(UTC))
    assert {o["metadata"]["creationTimestamp"] for o in store.list(ns).objects} <= {
        wall,
        rfc3339(datetime.now(UTC)),
    }
    past = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    # default, kube-node-lease, kube-public and kube-system.
    assert store.set_clock(lambda: past) == 4
    assert {o["metadata"]["creationTimestamp"] for o in store.list(ns).objects} == {
        "2026-01-02T03:04:05Z"
    }
    store.create(ns, {"metadata": {"name": "later"}})
    assert store.get(ns, name="later")["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    # An object dated before the new clock's now keeps its stamp.
    assert store.set_clock(lambda: past + timedelta(days=1)) == 0


def test_a_huge_time_scale_starts_at_most_thirty_years_back() -> None:
    # (10^6 - 1) days would put the start before year 1; the lead stops at 30 years.
    clock = VirtualClock(time_scale=1e6)
    assert clock.lead == 30 * 365 * DAY
    start = clock.at(0.0)
    assert start.year >= 1970 and start < datetime.now(UTC)
    assert rfc3339(start).endswith("Z")
