"""The Job and CronJob controllers on the virtual clock.

Job (k8s.io/kubernetes pkg/controller/job): pods up to ``parallelism`` until ``completions``
succeed, ``backoffLimit`` failures fail it, ``suspend`` holds it, ``ttlSecondsAfterFinished``
deletes it. A Job pod's containers exit 0 after the kubelet's ``job_run`` delay.

CronJob (pkg/controller/cronjob, ``cronjob_controllerv2.go``): the most recent schedule time
not yet run creates Job ``<name>-<minutes since the epoch>``; ``suspend``,
``concurrencyPolicy``, ``startingDeadlineSeconds``, ``timeZone`` (or a ``CRON_TZ=`` prefix) and
the history limits are honoured. Schedules are robfig/cron's standard five fields and
``@hourly``-style descriptors, evaluated by croniter.
"""

from __future__ import annotations

import contextlib
import functools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, croniter

from gpushift.common import Obj, by_kind
from gpushift_twin.apiserver import ApiError, rfc3339
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._workloads import TERMINAL, by_owner, pod_from_template, set_status

JOB = by_kind("Job")
CRONJOB = by_kind("CronJob")
SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"
#: cronjob_controllerv2.go: more missed start times than this is reported, not run.
_MAX_MISSED = 100


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _condition(obj: Obj, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def finished(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` once the Job has finished, else ``None``."""
    for type_ in ("Complete", "Failed"):
        if _condition(job, type_):
            return type_
    return None


# --- Job --------------------------------------------------------------------------------------


def _job_pod(job: Obj) -> Obj:
    meta = job["metadata"]
    labels = {
        "batch.kubernetes.io/controller-uid": meta["uid"],
        "batch.kubernetes.io/job-name": meta["name"],
        "controller-uid": meta["uid"],
        "job-name": meta["name"],
    }
    template = (job.get("spec") or {}).get("template") or {}
    pod = pod_from_template(template, namespace=meta["namespace"], owner=job, labels=labels)
    # A Job's template must say Never or OnFailure (validation); the API has no default.
    pod["spec"]["restartPolicy"] = (template.get("spec") or {}).get("restartPolicy") or "Never"
    return pod


def _finish(ctx: Context, job: Obj, *, type_: str, reason: str, message: str, base: Obj) -> None:
    now = ctx.stamp()

    def cond(kind: str) -> Obj:
        return {
            "type": kind,
            "status": "True",
            "reason": reason,
            "message": message,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }

    kinds = ["SuccessCriteriaMet", "Complete"] if type_ == "Complete" else ["FailureTarget", type_]
    change = {**base, "active": 0, "conditions": [cond(k) for k in kinds]}
    if type_ == "Complete":
        change["completionTime"] = now
    set_status(ctx, JOB, job, change)
    ctx.event(
        job,
        reason="Completed" if type_ == "Complete" else reason,
        message="Job completed" if type_ == "Complete" else message,
        warning=type_ != "Complete",
        component="job-controller",
    )


def sync_jobs(ctx: Context, pods: list[Obj]) -> None:
    """One pass of the Job controller over every Job."""
    owned = by_owner(pods)
    now = ctx.now()
    for job in ctx.list(JOB):
        meta = job["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        spec = job.get("spec") or {}
        st = job.get("status") or {}
        done = finished(job)
        if done is not None:
            ttl = spec.get("ttlSecondsAfterFinished")
            end = _time(st.get("completionTime")) or _time(
                next(
                    (
                        c.get("lastTransitionTime")
                        for c in st.get("conditions") or []
                        if c.get("type") == done
                    ),
                    None,
                )
            )
            if ttl is not None and end is not None:
                due = (end - ctx.clock.at(0)).total_seconds() + float(ttl)
                if now >= due:
                    with contextlib.suppress(ApiError):
                        ctx.store.delete(
                            JOB,
                            name=meta["name"],
                            namespace=meta["namespace"],
                            propagation="Background",
                        )
                else:
                    ctx.wake_at(due)
            continue
        mine = owned.get(meta["uid"], [])
        succeeded = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Succeeded")
        failed = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Failed")
        active = [
            p
            for p in mine
            if (p.get("status") or {}).get("phase") not in TERMINAL
            and not p["metadata"].get("deletionTimestamp")
        ]
        completions = spec.get("completions")
        want = int(completions) if completions is not None else 1
        parallelism = int(spec.get("parallelism", 1))
        base: Obj = {
            "startTime": st.get("startTime") or ctx.stamp(),
            "succeeded": succeeded,
            "failed": failed,
            "ready": sum(1 for p in active if (p.get("status") or {}).get("phase") == "Running"),
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
        if succeeded >= want:
            _finish(ctx, job, type_="Complete", reason="CompletionsReached", message="", base=base)
            continue
        if failed > int(spec.get("backoffLimit", 6)):
            _finish(
                ctx,
                job,
                type_="Failed",
                reason="BackoffLimitExceeded",
                message="Job has reached the specified backoff limit",
                base=base,
            )
            continue
        if spec.get("suspend") is True:
            for pod in active:
                with contextlib.suppress(ApiError):
                    ctx.store.delete(
                        ctx.kinds.pod, name=pod["metadata"]["name"], namespace=meta["namespace"]
                    )
            set_status(ctx, JOB, job, {**base, "active": 0})
            continue
        for _ in range(max(min(parallelism, want - succeeded) - len(active), 0)):
            try:
                created = ctx.store.create(
                    ctx.kinds.pod, _job_pod(job), namespace=meta["namespace"]
                )
            except ApiError:
                break
            active.append(created)
            ctx.event(
                job,
                reason="SuccessfulCreate",
                message=f"Created pod: {created['metadata']['name']}",
                component="job-controller",
            )
        set_status(ctx, JOB, job, {**base, "active": len(active)})


# --- CronJob ----------------------------------------------------------------------------------


def parse_schedule(schedule: str, time_zone: str | None) -> tuple[str, ZoneInfo | None]:
    """The cron expression and its zone: ``spec.timeZone``, else a ``CRON_TZ=``/``TZ=``
    prefix, else the controller's (UTC). Raises ``ValueError`` with the controller's words."""
    expr = schedule.strip()
    zone = time_zone
    for prefix in ("CRON_TZ=", "TZ="):
        if expr.startswith(prefix):
            zone_text, _, expr = expr[len(prefix) :].partition(" ")
            zone = zone or zone_text
            expr = expr.strip()
    try:
        tz = ZoneInfo(zone) if zone else None
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {zone}") from None
    if not croniter.is_valid(expr):
        raise ValueError(f"unparseable schedule: {schedule!r}")
    return expr, tz


def schedule_times(
    schedule: str, *, time_zone: str | None, after: datetime, until: datetime
) -> tuple[list[datetime], datetime]:
    """Schedule times in ``(after, until]`` (at most ``_MAX_MISSED + 1``) and the next one
    after ``until``, all in UTC."""
    # A timeZone that is not a string (the body is the client's) cannot key the cache.
    if time_zone is None or isinstance(time_zone, str):
        first = _first_after(schedule, time_zone, after)
        if first > until:
            return [], first  # the common case, every pass until the next run is due
    it = _times(schedule, time_zone, after)
    times: list[datetime] = []
    nxt: datetime = it.get_next(datetime)
    while nxt <= until:
        if len(times) <= _MAX_MISSED:
            times.append(nxt.astimezone(UTC))
        else:
            # Far behind: skip ahead rather than iterate through every missed time.
            nxt = _times(schedule, time_zone, until).get_next(datetime)
            break
        nxt = it.get_next(datetime)
    return times, nxt.astimezone(UTC)


def _times(schedule: str, time_zone: str | None, after: datetime) -> croniter:
    """The schedule's times after ``after``, in its zone (ValueError with the controller's
    words)."""
    expr, tz = parse_schedule(schedule, time_zone)
    start = after.astimezone(tz) if tz is not None else after.astimezone(UTC)
    try:
        return croniter(expr, start)
    except CroniterBadCronError as err:
        raise ValueError(f"unparseable schedule: {schedule!r}: {err}") from None


@functools.lru_cache(maxsize=4096)
def _first_after(schedule: str, time_zone: str | None, after: datetime) -> datetime:
    """The first schedule time after ``after``, in UTC (ValueError as schedule_times)."""
    nxt: datetime = _times(schedule, time_zone, after).get_next(datetime)
    return nxt.astimezone(UTC)


def job_name(cronjob: str, scheduled: datetime) -> str:
    """``<cronjob>-<minutes since the epoch>`` (cronjob utils.go getJobName)."""
    return f"{cronjob}-{int(scheduled.timestamp()) // 60}"


def job_from_cronjob(cj: Obj, scheduled: datetime) -> Obj:
    """The Job a CronJob creates for ``scheduled`` (pure; utils.go getJobFromTemplate2)."""
    meta = cj["metadata"]
    template = (cj.get("spec") or {}).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(meta["name"], scheduled),
            "namespace": meta["namespace"],
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": {**(tmeta.get("annotations") or {}), SCHEDULED: rfc3339(scheduled)},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": dict(template.get("spec") or {}),
    }


def _ref(job: Obj) -> Obj:
    meta = job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta["uid"],
        "resourceVersion": meta.get("resourceVersion", ""),
    }


def _history(ctx: Context, spec: Obj, jobs: list[Obj]) -> None:
    # cronjob_controllerv2.go cleanupFinishedJobs: the oldest finished Jobs beyond the limits.
    for type_, key, default in (
        ("Complete", "successfulJobsHistoryLimit", 3),
        ("Failed", "failedJobsHistoryLimit", 1),
    ):
        done = sorted(
            (j for j in jobs if finished(j) == type_),
            key=lambda j: str((j.get("status") or {}).get("startTime") or ""),
        )
        limit = int(spec.get(key, default))
        for job in done[: max(len(done) - limit, 0)]:
            with contextlib.suppress(ApiError):
                ctx.store.delete(
                    JOB,
                    name=job["metadata"]["name"],
                    namespace=job["metadata"]["namespace"],
                    propagation="Background",
                )


def sync_cronjobs(ctx: Context) -> None:
    """One pass of the CronJob controller; wakes the cluster at the next schedule time."""
    cronjobs = ctx.list(CRONJOB)
    if not cronjobs:
        return
    jobs = by_owner(ctx.list(JOB))
    now = ctx.clock.now()
    for cj in cronjobs:
        meta = cj["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        spec = cj.get("spec") or {}
        st = cj.get("status") or {}
        mine = jobs.get(meta["uid"], [])
        running = [
            j for j in mine if finished(j) is None and not j["metadata"].get("deletionTimestamp")
        ]
        succeeded = [
            _time((j.get("status") or {}).get("completionTime"))
            for j in mine
            if finished(j) == "Complete"
        ]
        change: Obj = {"active": [_ref(j) for j in running] or None}
        last_ok = max((t for t in succeeded if t is not None), default=None)
        if last_ok is not None:
            change["lastSuccessfulTime"] = rfc3339(last_ok)
        _history(ctx, spec, mine)
        if spec.get("suspend") is True:
            set_status(ctx, CRONJOB, cj, change)
            continue
        after = _time(st.get("lastScheduleTime")) or _time(meta.get("creationTimestamp")) or now
        try:
            times, nxt = schedule_times(
                str(spec.get("schedule") or ""),
                time_zone=spec.get("timeZone"),
                after=after,
                until=now,
            )
        except ValueError as err:
            ctx.event(
                cj,
                reason="UnparseableSchedule" if "schedule" in str(err) else "UnknownTimeZone",
                message=str(err),
                warning=True,
                component="cronjob-controller",
            )
            continue
        ctx.wake_at((nxt - ctx.clock.at(0)).total_seconds())
        if not times:
            set_status(ctx, CRONJOB, cj, change)
            continue
        if len(times) > _MAX_MISSED:
            ctx.event(
                cj,
                reason="TooManyMissedTimes",
                message="too many missed start times. Set or decrease "
                ".spec.startingDeadlineSeconds or check clock skew",
                warning=True,
                component="cronjob-controller",
            )
        scheduled = times[-1]
        deadline = spec.get("startingDeadlineSeconds")
        too_late = deadline is not None and scheduled < now - timedelta(seconds=float(deadline))
        policy = spec.get("concurrencyPolicy") or "Allow"
        if too_late or (policy == "Forbid" and running):
            if too_late:
                ctx.event(
                    cj,
                    reason="MissSchedule",
                    message=f"Missed scheduled time to start a job: {rfc3339(scheduled)}",
                    warning=True,
                    component="cronjob-controller",
                )
                change["lastScheduleTime"] = rfc3339(scheduled)
            set_status(ctx, CRONJOB, cj, change)
            continue
        if policy == "Replace":
            for job in running:
                with contextlib.suppress(ApiError):
                    ctx.store.delete(
                        JOB,
                        name=job["metadata"]["name"],
                        namespace=meta["namespace"],
                        propagation="Background",
                    )
                ctx.event(
                    cj,
                    reason="SuccessfulDelete",
                    message=f"Deleted job {job['metadata']['name']}",
                    component="cronjob-controller",
                )
            running = []
        body = job_from_cronjob(cj, scheduled)
        try:
            created = ctx.store.create(JOB, body, namespace=meta["namespace"])
        except ApiError as err:
            if err.code != 409:
                continue
            created = ctx.store.get(JOB, name=body["metadata"]["name"], namespace=meta["namespace"])
        else:
            ctx.event(
                cj,
                reason="SuccessfulCreate",
                message=f"Created job {created['metadata']['name']}",
                component="cronjob-controller",
            )
        running.append(created)
        change["active"] = [_ref(j) for j in running]
        change["lastScheduleTime"] = rfc3339(scheduled)
        set_status(ctx, CRONJOB, cj, change)
