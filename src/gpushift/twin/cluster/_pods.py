"""Pod status as the kubelet writes it: admission, creating, running, crashing, rejection.

Condition types, reasons and Event wording follow k8s.io/kubernetes pkg/kubelet
(status/generate.go, kubelet_pods.go, lifecycle/predicate.go, events/event.go).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from typing import Any

from gpushift.twin import ApiError
from gpushift.twin.cluster._context import Context, Obj

KUBELET = "kubelet"


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
    meta = pod["metadata"]

    def mutate(cur: Obj) -> Obj:
        cur["status"] = {**(cur.get("status") or {}), **change}
        return cur

    try:
        return ctx.store.update(
            ctx.kinds.pod,
            name=meta["name"],
            namespace=meta["namespace"],
            mutate=mutate,
            subresource="status",
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


def running(ctx: Context, pod: Obj, *, node: str, crashed: Mapping[str, str] | None = None) -> None:
    """Containers started; ``crashed`` maps containers that exit at once to their log line."""
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
            status.update(
                {
                    "ready": False,
                    "started": False,
                    "restartCount": 1,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": f"back-off 10s restarting failed container={name} "
                            f"pod={pod['metadata']['name']}_{pod['metadata']['namespace']}"
                            f"({pod['metadata']['uid']})",
                        }
                    },
                    "lastState": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "message": crashed[name],
                            "startedAt": now,
                            "finishedAt": now,
                        }
                    },
                }
            )
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
    unready = [s["name"] for s in statuses if not s["ready"]]
    updated = _update_status(
        ctx,
        pod,
        {
            "phase": "Running",
            "conditions": _conditions(now, started=True, ready=not unready, unready=unready),
            "containerStatuses": statuses,
        },
    )
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
            ctx.event(
                updated,
                reason="BackOff",
                component=KUBELET,
                host=node,
                field_path=path,
                warning=True,
                message="Back-off restarting failed container "
                f"{name} in pod {pod['metadata']['name']}_{pod['metadata']['namespace']}"
                f"({pod['metadata']['uid']})",
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
    """Containers gone: drop the kubelet's finalizer so the API server removes the pod."""
    meta = pod["metadata"]

    def mutate(cur: Obj) -> Obj:
        cur["metadata"]["finalizers"] = [
            f for f in cur["metadata"].get("finalizers") or [] if f != finalizer
        ]
        return cur

    with contextlib.suppress(ApiError):
        ctx.store.update(
            ctx.kinds.pod, name=meta["name"], namespace=meta["namespace"], mutate=mutate
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
