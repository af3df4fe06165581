"""CronJobs make Jobs on the virtual clock; Jobs run their pods to completion (kubectl)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.twin.cluster.conftest import THREE_ONE_CARD_NODES, Driver, serve

from gpushift_twin.cluster._cronjobs import job_name, parse_schedule, schedule_times


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    yield from serve(THREE_ONE_CARD_NODES, tmp_path_factory.mktemp("cronjobs"))


CRONJOB = """\
apiVersion: batch/v1
kind: CronJob
metadata: {{name: {name}, namespace: default}}
spec:
  schedule: "{schedule}"
  suspend: {suspend}
  successfulJobsHistoryLimit: 1
  jobTemplate:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{{name: run, image: busybox}}]
"""


def _jobs(d: Driver, app: str) -> list[dict[str, Any]]:
    return list(d.get("jobs", "-n", "default", "-l", f"app={app}")["items"])


def test_a_cronjob_runs_jobs_on_the_virtual_clock_and_keeps_its_history(d: Driver) -> None:
    # Every minute of cluster time is 0.6 s at time-scale 100.
    d.apply(CRONJOB.format(name="tick", schedule="* * * * *", suspend="false"))
    done = d.wait_for(
        "a Job to complete",
        lambda: [
            j
            for j in _jobs(d, "tick")
            if any(c["type"] == "Complete" for c in j.get("status", {}).get("conditions") or [])
        ],
        timeout=30,
    )
    job = done[0]
    stamp = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    scheduled = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert scheduled.second == 0  # on a minute boundary
    assert job["metadata"]["name"] == f"tick-{int(scheduled.timestamp()) // 60}"
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job["status"]["succeeded"] == 1
    pods = d.get("pods", "-n", "default", "-l", f"job-name={job['metadata']['name']}")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"]
    terminated = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    row = d.kubectl("get", "cronjob", "tick", "-n", "default").splitlines()[1].split()
    assert row[:4] == ["tick", "*", "*", "*"] and row[6:8] == ["<none>", "False"]
    jobs = d.kubectl("get", "jobs", "-n", "default", "-l", "app=tick").splitlines()
    assert jobs[0].split()[:4] == ["NAME", "STATUS", "COMPLETIONS", "DURATION"]
    rows = [line.split() for line in jobs[1:]]
    assert rows and all(r[2] == ("1/1" if r[1] == "Complete" else "0/1") for r in rows)
    cj = d.get("cronjob", "tick", "-n", "default")
    assert cj["status"]["lastScheduleTime"]
    # successfulJobsHistoryLimit 1: once a later run completes, only one finished Job is left.
    d.wait_for(
        "a later run to replace the first",
        lambda: job["metadata"]["name"] not in {j["metadata"]["name"] for j in _jobs(d, "tick")},
        timeout=30,
    )
    finished = [
        j
        for j in _jobs(d, "tick")
        if any(c["type"] == "Complete" for c in j.get("status", {}).get("conditions") or [])
    ]
    assert len(finished) <= 1


def test_a_suspended_cronjob_creates_no_jobs_until_resumed(d: Driver) -> None:
    # Two CronJobs on the same schedule: by the time the running one has made a Job, the
    # suspended one has let the same schedule time pass.
    d.apply(
        CRONJOB.format(name="held", schedule="* * * * *", suspend="true")
        + "---\n"
        + CRONJOB.format(name="probe", schedule="* * * * *", suspend="false")
    )
    d.wait_for("the running CronJob to make a Job", lambda: _jobs(d, "probe"), timeout=30)
    assert _jobs(d, "held") == []
    assert "lastScheduleTime" not in (d.get("cronjob", "held", "-n", "default").get("status") or {})
    d.kubectl(
        "patch",
        "cronjob",
        "held",
        "-n",
        "default",
        "--type=merge",
        "-p",
        '{"spec":{"suspend":false}}',
    )
    d.wait_for("the resumed CronJob to run", lambda: _jobs(d, "held"), timeout=30)


def test_schedule_times_are_the_missed_ones_then_the_next() -> None:
    after = datetime(2026, 7, 1, 10, 15, tzinfo=UTC)
    until = datetime(2026, 7, 1, 12, 30, tzinfo=UTC)
    times, nxt = schedule_times("0 * * * *", time_zone=None, after=after, until=until)
    assert times == [datetime(2026, 7, 1, 11, tzinfo=UTC), datetime(2026, 7, 1, 12, tzinfo=UTC)]
    assert nxt == datetime(2026, 7, 1, 13, tzinfo=UTC)
    # 09:00 in London in July is 08:00 UTC; spec.timeZone and a CRON_TZ= prefix agree.
    day = datetime(2026, 7, 1, tzinfo=UTC)
    for schedule, zone in (
        ("0 9 * * *", "Europe/London"),
        ("CRON_TZ=Europe/London 0 9 * * *", None),
    ):
        times, _ = schedule_times(schedule, time_zone=zone, after=day, until=day.replace(hour=12))
        assert times == [datetime(2026, 7, 1, 8, tzinfo=UTC)]
    assert job_name("backup", datetime(1970, 1, 1, 1, 0, tzinfo=UTC)) == "backup-60"
    with pytest.raises(ValueError, match="unparseable schedule"):
        parse_schedule("every day", None)
    with pytest.raises(ValueError, match="unknown time zone Mars/Base"):
        parse_schedule("0 * * * *", "Mars/Base")
