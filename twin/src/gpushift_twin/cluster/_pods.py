"""Pod status as the kubelet writes it: admission, creating, running, crashing, rejection.

Condition types, reasons and Event wording follow k8s.io/kubernetes pkg/kubelet
(status/generate.go, kubelet_pods.go, lifecycle/predicate.go, events/event.go).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpushift.common import Obj
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster._context import Context

KUBELET = "kubelet"


@dataclass(frozen=True, slots=True)
class Crash:
    """How a container that exits at once ends: its termination message, reason and code."""

    message: str
    reason: str = "Error"
    exit_code: int = 1


def containers(pod: Obj) -> list[Obj]:
    """The pod's regular containers."""
    return list((pod.get("spec") or {}).get("containers") or [])


def _container_id(pod: Obj, name: str) -> str:
    digest = hashlib.sha256(f"{pod['metadata']['uid']}/{name}".encode()).hexdigest()
    return f"containerd://{digest}"


def _image_id(image: str) -> str:
    repo = image.split("@", 1)[0].rsplit(":", 1)[0] if "/" in image or ":" in image else image
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _conditions(now: str, *, started: bool, ready: bool, unready: list[str]) -> list[Obj]:
    def cond(kind: str, ok: bool, reason: str | None = None, message: str | None = None) -> Obj:
        c: Obj = {
            "type": kind,
            "status": "True" if ok else "False",
            "lastProbeTime": None,
            "lastTransitionTime": now,
        }
        if not ok and reason:
            c["reason"] = reason
            if message:
                c["message"] = message
        return c

    message = f"containers with unready status: [{' '.join(unready)}]"
    return [
        cond("PodReadyToStartContainers", started),
        cond("Initialized", True),
        cond("Ready", ready, "ContainersNotReady", message),
        cond("ContainersReady", ready, "ContainersNotReady", message),
        cond("PodScheduled", True),
    ]


def _update_status(ctx: Context, pod: Obj, change: Mapping[str, Any]) -> Obj | None:
    """Merge ``change`` into the pod's status; returns the stored pod (read-only) or None."""
    meta = pod["metadata"]

    def mutate(cur: Obj) -> Obj:
        return {**cur, "status": {**(cur.get("status") or {}), **change}}

    try:
        return ctx.store.update(
            ctx.kinds.pod,
            name=meta["name"],
            namespace=meta["namespace"],
            mutate=mutate,
            subresource="status",
            shared=True,
        )
    except ApiError:
        return None


def reject(ctx: Context, pod: Obj, *, reason: str, message: str, node: str) -> None:
    """Fail admission: phase Failed with the kubelet's reason and message (kubelet.rejectPod)."""
    full = f"Pod was rejected: {message}"
    updated = _update_status(
        ctx, pod, {"phase": "Failed", "reason": reason, "message": full, "startTime": ctx.stamp()}
    )
    if updated is not None:
        ctx.event(updated, reason=reason, message=full, component=KUBELET, warning=True, host=node)


def creating(ctx: Context, pod: Obj, *, host_ip: str, pod_ip: str) -> None:
    """Admitted: sandbox being created, containers waiting in ContainerCreating."""
    now = ctx.stamp()
    names = [c["name"] for c in containers(pod)]
    statuses = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "",
            "ready": False,
            "restartCount": 0,
            "started": False,
            "state": {"waiting": {"reason": "ContainerCreating"}},
            "lastState": {},
        }
        for c in containers(pod)
    ]
    _update_status(
        ctx,
        pod,
        {
            "phase": "Pending",
            "conditions": _conditions(now, started=False, ready=False, unready=names),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": now,
            "qosClass": (pod.get("status") or {}).get("qosClass", "BestEffort"),
            "containerStatuses": statuses,
        },
    )


def _crash_status(
    pod: Obj, name: str, crash: Crash, *, restarts: int, backoff: int, now: str
) -> Obj:
    meta = pod["metadata"]
    return {
        "ready": False,
        "started": False,
        "restartCount": restarts,
        "state": {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {backoff}s restarting failed container={name} "
                f"pod={meta['name']}_{meta['namespace']}({meta['uid']})",
            }
        },
        "lastState": {
            "terminated": {
                "exitCode": crash.exit_code,
                "reason": crash.reason,
                "message": crash.message,
                "startedAt": now,
                "finishedAt": now,
            }
        },
    }


def running(
    ctx: Context, pod: Obj, *, node: str, crashed: Mapping[str, Crash] | None = None
) -> None:
    """Containers started; ``crashed`` maps containers that exit at once to how they end."""
    crashed = crashed or {}
    now = ctx.stamp()
    statuses = []
    for c in containers(pod):
        name = c["name"]
        image = c.get("image", "")
        status: Obj = {
            "name": name,
            "image": image,
            "imageID": _image_id(image),
            "containerID": _container_id(pod, name),
            "restartCount": 0,
        }
        if name in crashed:
            status.update(_crash_status(pod, name, crashed[name], restarts=1, backoff=10, now=now))
        else:
            status.update(
                {
                    "ready": True,
                    "started": True,
                    "lastState": {},
                    "state": {"running": {"startedAt": now}},
                }
            )
        statuses.append(status)
    init_statuses = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": _image_id(c.get("image", "")),
            "containerID": _container_id(pod, c["name"]),
            "ready": True,
            "started": False,
            "restartCount": 0,
            "state": {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "startedAt": now,
                    "finishedAt": now,
                }
            },
            "lastState": {},
        }
        for c in (pod.get("spec") or {}).get("initContainers") or []
    ]
    unready = [s["name"] for s in statuses if not s["ready"]]
    change: Obj = {
        "phase": "Running",
        "conditions": _conditions(now, started=True, ready=not unready, unready=unready),
        "containerStatuses": statuses,
    }
    if init_statuses:
        change["initContainerStatuses"] = init_statuses
    updated = _update_status(ctx, pod, change)
    if updated is None:
        return
    for c in containers(pod):
        name = c["name"]
        path = f"spec.containers{{{name}}}"
        ctx.event(
            updated,
            reason="Pulled",
            component=KUBELET,
            host=node,
            field_path=path,
            message=f'Container image "{c.get("image", "")}" already present on machine',
        )
        ctx.event(
            updated,
            reason="Created",
            component=KUBELET,
            host=node,
            field_path=path,
            message=f"Created container: {name}",
        )
        ctx.event(
            updated,
            reason="Started",
            component=KUBELET,
            host=node,
            field_path=path,
            message=f"Started container {name}",
        )
        if name in crashed:
            _back_off(ctx, updated, name, node=node)


def _back_off(ctx: Context, pod: Obj, name: str, *, node: str) -> None:
    meta = pod["metadata"]
    ctx.event(
        pod,
        reason="BackOff",
        component=KUBELET,
        host=node,
        field_path=f"spec.containers{{{name}}}",
        warning=True,
        message="Back-off restarting failed container "
        f"{name} in pod {meta['name']}_{meta['namespace']}({meta['uid']})",
    )


def restarted(
    ctx: Context, pod: Obj, *, node: str, container: str, crash: Crash, restarts: int, backoff: int
) -> None:
    """A crash-looping container ran once more and exited again: ``restartCount`` grows and
    the back-off doubles (the kubelet's 10 s up to 5 min)."""
    now = ctx.stamp()
    statuses = []
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        if s.get("name") == container:
            s = {
                **s,
                **_crash_status(pod, container, crash, restarts=restarts, backoff=backoff, now=now),
            }
        statuses.append(s)
    updated = _update_status(ctx, pod, {"containerStatuses": statuses})
    if updated is not None:
        _back_off(ctx, updated, container, node=node)


def initializing(ctx: Context, pod: Obj, *, init: str) -> None:
    """An init container that does not finish: the pod stays Pending (``Init:0/N``)."""
    now = ctx.stamp()
    spec = pod.get("spec") or {}
    inits = []
    for c in spec.get("initContainers") or []:
        name = c["name"]
        running = name == init
        inits.append(
            {
                "name": name,
                "image": c.get("image", ""),
                "imageID": _image_id(c.get("image", "")) if running else "",
                **({"containerID": _container_id(pod, name)} if running else {}),
                "ready": False,
                "started": running,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}}
                if running
                else {"waiting": {"reason": "PodInitializing"}},
                "lastState": {},
            }
        )
    names = [c["name"] for c in containers(pod)]
    conditions = _conditions(now, started=True, ready=False, unready=names)
    for cond in conditions:
        if cond["type"] == "Initialized":
            cond.update(
                {
                    "status": "False",
                    "reason": "ContainersNotInitialized",
                    "message": f"containers with incomplete status: [{init}]",
                }
            )
    _update_status(
        ctx,
        pod,
        {
            "phase": "Pending",
            "conditions": conditions,
            "initContainerStatuses": inits,
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"waiting": {"reason": "PodInitializing"}},
                    "lastState": {},
                }
                for c in containers(pod)
            ],
        },
    )


def killing(ctx: Context, pod: Obj, *, node: str) -> None:
    """The kubelet starts stopping the containers of a deleted pod (Killing Events)."""
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        if "running" in (s.get("state") or {}):
            ctx.event(
                pod,
                reason="Killing",
                component=KUBELET,
                host=node,
                field_path=f"spec.containers{{{s['name']}}}",
                message=f"Stopping container {s['name']}",
            )


def release(ctx: Context, pod: Obj, *, finalizer: str) -> None:
    """Containers gone: drop the kubelet's finalizer so the API server removes the pod.

    A pod the twin's scheduler did not bind has no such finalizer (a real API server keeps a
    deleted pod for its grace period instead): it is deleted with a grace period of 0, as a
    kubelet does once the containers have stopped.
    """
    meta = pod["metadata"]
    if finalizer not in (meta.get("finalizers") or ()):
        if meta.get("deletionTimestamp"):
            with contextlib.suppress(ApiError):
                ctx.store.delete(
                    ctx.kinds.pod,
                    name=meta["name"],
                    namespace=meta["namespace"],
                    uid=meta.get("uid"),
                    grace_period_seconds=0,
                )
        return

    def mutate(cur: Obj) -> Obj:
        fins = [f for f in cur["metadata"].get("finalizers") or [] if f != finalizer]
        return {**cur, "metadata": {**cur["metadata"], "finalizers": fins}}

    with contextlib.suppress(ApiError):
        ctx.store.update(
            ctx.kinds.pod,
            name=meta["name"],
            namespace=meta["namespace"],
            mutate=mutate,
            shared=True,
        )


def completed(ctx: Context, pod: Obj) -> None:
    """Every container exited 0: phase Succeeded, containers terminated ``Completed``, the
    pod not Ready with reason ``PodCompleted`` (kubelet status/generate.go)."""
    now = ctx.stamp()
    statuses = []
    for s in (pod.get("status") or {}).get("containerStatuses") or []:
        started = ((s.get("state") or {}).get("running") or {}).get("startedAt", now)
        statuses.append(
            {
                **s,
                "ready": False,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": started,
                        "finishedAt": now,
                        "containerID": s.get("containerID", ""),
                    }
                },
            }
        )
    conditions = []
    for c in _conditions(now, started=False, ready=False, unready=[]):
        if c["type"] in ("Ready", "ContainersReady"):
            c["reason"] = "PodCompleted"
            c.pop("message", None)
        conditions.append(c)
    _update_status(
        ctx, pod, {"phase": "Succeeded", "conditions": conditions, "containerStatuses": statuses}
    )
