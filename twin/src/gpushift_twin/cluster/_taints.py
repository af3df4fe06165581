"""The taint-eviction controller: pods off nodes whose NoExecute taints they do not tolerate.

Only NoExecute taints evict; NoSchedule and PreferNoSchedule ones only keep new pods off
a node. A pod that does not tolerate every NoExecute taint of its node is deleted at once,
whoever owns it. One that tolerates them all is deleted once the shortest
``tolerationSeconds`` among the tolerations that matched has passed since the controller
first saw it so, and never when none of them sets it; removing the taints cancels that.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpushift.common import Obj
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._reuse import untolerated_taint

#: The controller's name in kube-controller-manager, the source of its Events.
COMPONENT = "taint-eviction-controller"


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    # core/v1 Toleration.ToleratesTaint, through the engine's matching.
    return untolerated_taint([taint], [toleration], effects=(str(taint.get("effect")),)) is None


def matching_tolerations(
    taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]] | None:
    """For each taint, the first toleration that tolerates it; None if one has none."""
    # pkg/apis/core/v1/helper helpers.go GetMatchingTolerations.
    used: list[Mapping[str, Any]] = []
    for taint in taints:
        match = next((t for t in tolerations if _tolerates(t, taint)), None)
        if match is None:
            return None
        used.append(match)
    return used


def min_toleration_seconds(tolerations: Sequence[Mapping[str, Any]]) -> float | None:
    """How long the tolerations let a pod stay: the shortest ``tolerationSeconds`` (0 when
    one is 0 or less, or when there are none), None when none sets it (forever)."""
    # taint_eviction.go getMinTolerationTime.
    if not tolerations:
        return 0.0
    shortest: float | None = None
    for t in tolerations:
        raw = t.get("tolerationSeconds")
        if raw is None:
            continue
        seconds = float(raw)
        if seconds <= 0:
            return 0.0
        if shortest is None or seconds < shortest:
            shortest = seconds
    return shortest


@dataclass(slots=True)
class _Eviction:
    """A pod's deletion waiting for its tolerations to run out."""

    uid: str
    at: float  # virtual seconds


class TaintEviction:
    """pkg/controller/tainteviction: deletes pods from nodes with NoExecute taints.

    The real controller reacts to node and pod updates; :meth:`sync` looks at every pod of a
    NoExecute-tainted node on each pass instead, and keeps the timed evictions in between.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: Timed evictions by pod (namespace, name), as the controller's TimedWorkerQueue.
        self.scheduled: dict[tuple[str, str], _Eviction] = {}

    def sync(self, *, pods: list[Obj], nodes: list[Obj]) -> None:
        """One pass: evict, time or cancel the eviction of every pod on a tainted node."""
        tainted: dict[str, list[Obj]] = {}
        for n in nodes:
            # taint_eviction.go getNoExecuteTaints.
            taints = [
                t
                for t in (n.get("spec") or {}).get("taints") or []
                if t.get("effect") == "NoExecute"
            ]
            if taints:
                tainted[n["metadata"]["name"]] = taints
        if not tainted and not self.scheduled:
            return
        now = self.ctx.now()
        seen: set[tuple[str, str]] = set()
        for pod in pods:
            on = tainted.get(str((pod.get("spec") or {}).get("nodeName") or ""))
            if on is None:
                continue
            meta = pod["metadata"]
            key = (str(meta["namespace"]), str(meta["name"]))
            seen.add(key)
            self._process(pod, key, on, now)
        # The node lost its NoExecute taints or is gone, or the pod is gone: handleNodeUpdate
        # and handlePodUpdate cancel its eviction.
        for key in [k for k in self.scheduled if k not in seen]:
            self._cancel(key)

    def _process(self, pod: Obj, key: tuple[str, str], taints: list[Obj], now: float) -> None:
        # taint_eviction.go processPodOnNode.
        meta = pod["metadata"]
        uid = str(meta.get("uid", ""))
        pending = self.scheduled.get(key)
        if pending is not None and pending.uid != uid:
            self._cancel(key)  # the pod of that name was replaced: the old one's work goes
            pending = None
        used = matching_tolerations(taints, (pod.get("spec") or {}).get("tolerations") or [])
        if used is None:
            if pending is not None:
                self._cancel(key)
            self._evict(pod)
            return
        stay = min_toleration_seconds(used)
        if stay is None:
            if pending is not None:
                self._cancel(key)
            return
        if pending is None:
            # A scheduled eviction keeps its time when the taints or tolerations change.
            pending = self.scheduled[key] = _Eviction(uid=uid, at=now + stay)
        if now >= pending.at:
            del self.scheduled[key]
            self._evict(pod)
        else:
            self.ctx.wake_at(pending.at)

    def _cancel(self, key: tuple[str, str]) -> None:
        # taint_eviction.go cancelWorkWithEvent: only work that was scheduled is announced.
        if self.scheduled.pop(key, None) is not None:
            self._event(key, f"Cancelling deletion of Pod {key[0]}/{key[1]}")

    def _event(self, key: tuple[str, str], message: str) -> None:
        # emitPodDeletionEvent: the Event names the pod by namespace and name only.
        ref: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"namespace": key[0], "name": key[1]},
        }
        self.ctx.event(ref, reason="TaintManagerEviction", message=message, component=COMPONENT)

    def _evict(self, pod: Obj) -> None:
        """Mark the pod as a disruption target and delete it (addConditionAndDeletePod)."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return  # already going: deleted once, as the real controller does per update
        ctx = self.ctx
        key = (str(meta["namespace"]), str(meta["name"]))
        self._event(key, f"Marking for deletion Pod {key[0]}/{key[1]}")
        condition: Obj = {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": ctx.stamp(),
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
        }

        def mark(cur: Obj) -> Obj:
            # pkg/api/v1/pod util.go UpdatePodCondition: the transition time moves only
            # when the status does.
            status = dict(cur.get("status") or {})
            conditions = list(status.get("conditions") or [])
            for i, c in enumerate(conditions):
                if c.get("type") == "DisruptionTarget":
                    new = dict(condition)
                    if c.get("status") == new["status"]:
                        new["lastTransitionTime"] = c.get("lastTransitionTime")
                    conditions[i] = new
                    break
            else:
                conditions.append(condition)
            status["conditions"] = conditions
            return {**cur, "status": status}

        with contextlib.suppress(ApiError):
            ctx.store.update(
                ctx.kinds.pod,
                name=key[1],
                namespace=key[0],
                mutate=mark,
                subresource="status",
                shared=True,
            )
            ctx.store.delete(ctx.kinds.pod, name=key[1], namespace=key[0])
