"""The ``pods/log`` subresource: container logs as text, the way kube-apiserver proxies them.

The lines come from a :class:`LogSource` (the cluster twin's agents write them); without one
every container's log is empty. Options, status codes and error wording follow
k8s.io/kubernetes pkg/registry/core/pod (``LogLocation``) and the kubelet's log handler:
``container`` (required when the pod has several), ``tailLines``, ``limitBytes``,
``timestamps``, ``sinceSeconds``, ``previous`` and ``follow``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

from aiohttp import web

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver._status import ApiError, bad_request
from gpushift_twin.apiserver._store import Store

#: One log line: when it was written, and its text (without the newline).
Line = tuple[datetime, str]
_FOLLOW_POLL = 0.2


class LogSource(Protocol):
    """Where container logs come from."""

    def lines(self, *, uid: str, container: str, previous: bool) -> Sequence[Line] | None:
        """The lines of a container's current run (or the run before it with ``previous``);
        None when that run never happened."""

    def now(self) -> datetime:
        """The cluster's current time (for ``sinceSeconds``)."""


def _names(containers: list[Obj]) -> str:
    return " ".join(str(c.get("name")) for c in containers)


def _container(pod: Obj, name: str, wanted: str | None) -> str:
    # pkg/registry/core/pod/strategy.go LogLocation
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or [])
    inits = list(spec.get("initContainers") or [])
    if not wanted:
        if len(containers) == 1:
            return str(containers[0].get("name"))
        if not containers:
            raise bad_request(f"a container name must be specified for pod {name}")
        message = (
            f"a container name must be specified for pod {name}, "
            f"choose one of: [{_names(containers)}]"
        )
        if inits:
            message += f" or one of the init containers: [{_names(inits)}]"
        raise bad_request(message)
    if not any(c.get("name") == wanted for c in [*containers, *inits]):
        raise bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def _int(request: web.Request, key: str) -> int | None:
    raw = request.query.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f'{key}: Invalid value: "{raw}": must be an integer') from None
    if value < 0 or (key != "tailLines" and value == 0):
        bound = "greater than or equal to 0" if key == "tailLines" else "greater than 0"
        raise ApiError(
            422,
            "Invalid",
            f"PodLogOptions is invalid: {key}: Invalid value: {value}: must be {bound}",
        )
    return value


def _flag(request: web.Request, key: str) -> bool:
    return request.query.get(key, "false").lower() in ("true", "1")


def _status(pod: Obj, container: str) -> Obj:
    status = pod.get("status") or {}
    for s in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        if s.get("name") == container:
            return dict(s)
    return {}


def _format(lines: Sequence[Line], *, timestamps: bool) -> bytes:
    out = []
    for at, text in lines:
        stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z") + " " if timestamps else ""
        out.append(f"{stamp}{text}\n")
    return "".join(out).encode()


async def serve(
    request: web.Request,
    *,
    store: Store,
    kind: Kind,
    namespace: str | None,
    name: str,
    source: LogSource | None,
) -> web.StreamResponse:
    """Answer ``GET …/pods/NAME/log`` with ``text/plain``."""
    if request.method != "GET":
        raise ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    pod = store.get(kind, name=name, namespace=namespace)
    container = _container(pod, name, request.query.get("container"))
    tail = _int(request, "tailLines")
    limit = _int(request, "limitBytes")
    since = _int(request, "sinceSeconds")
    timestamps = _flag(request, "timestamps")
    previous = _flag(request, "previous")
    follow = _flag(request, "follow") and not previous
    if not (pod.get("spec") or {}).get("nodeName"):
        # LogLocation: a pod not assigned to a node has no log location; the body is empty.
        return web.Response(body=b"", content_type="text/plain")
    uid = str(pod["metadata"].get("uid", ""))
    lines = source.lines(uid=uid, container=container, previous=previous) if source else None
    if lines is None:
        # The kubelet's answers (pkg/kubelet/kubelet_pods.go validateContainerLogStatus).
        state = _status(pod, container).get("state") or {}
        if previous:
            raise bad_request(
                f'previous terminated container "{container}" in pod "{name}" not found'
            )
        waiting = state.get("waiting")
        if waiting is not None or not state:
            reason = (waiting or {}).get("reason") or "ContainerCreating"
            raise bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: {reason}'
            )
        lines = ()

    def select(all_lines: Sequence[Line]) -> list[Line]:
        chosen = list(all_lines)
        if since is not None and source is not None:
            cutoff = source.now() - timedelta(seconds=since)
            chosen = [ln for ln in chosen if ln[0] >= cutoff]
        if tail is not None:
            chosen = chosen[len(chosen) - tail :] if tail else []
        return chosen

    body = _format(select(lines), timestamps=timestamps)
    if limit is not None:
        body = body[:limit]
    if not follow or source is None:
        return web.Response(body=body, content_type="text/plain")
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(request)
    sent = len(lines)
    head = lines[0] if lines else None
    written = len(body)
    with contextlib.suppress(ConnectionResetError, asyncio.CancelledError):
        if body:
            await response.write(body)
        # Follow until the container's run ends (its lines stop being the current run),
        # the pod goes, or limitBytes is reached.
        while limit is None or written < limit:
            await asyncio.sleep(_FOLLOW_POLL)
            try:
                store.get(kind, name=name, namespace=namespace)
            except ApiError:
                break
            current = source.lines(uid=uid, container=container, previous=False)
            if current is None or len(current) < sent or (head and current and current[0] != head):
                break  # the run ended: the container restarted or went
            if head is None and current:
                head = current[0]
            fresh = _format(current[sent:], timestamps=timestamps)
            sent = len(current)
            if limit is not None:
                fresh = fresh[: limit - written]
            if fresh:
                written += len(fresh)
                await response.write(fresh)
        await response.write_eof()
    return response


#: :func:`serve` under a name that says what it serves, for fronts other than the twin's server.
serve_pod_log = serve
