"""Flux status: conditions as fluxcd/pkg runtime/conditions writes them, and kstatus health."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from gpushift._obj import Obj
from gpushift._obj import as_dict as _d


class Condition(TypedDict):
    """A metav1.Condition as Flux controllers write them."""

    type: str
    status: str
    observedGeneration: int
    lastTransitionTime: str
    reason: str
    message: str


class InventoryEntry(TypedDict):
    """kustomize-controller ``status.inventory.entries[]``: ``<ns>_<name>_<group>_<Kind>``."""

    id: str
    v: str


class Artifact(TypedDict, total=False):
    """source-controller ``status.artifact``."""

    path: str
    url: str
    revision: str
    digest: str
    lastUpdateTime: str
    metadata: dict[str, str]


#: fluxcd/pkg apis/meta: the reconcile request annotation.
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
FINALIZER = "finalizers.fluxcd.io"


def observed(obj: Obj) -> Callable[[Obj], None]:
    """A status update recording what a reconcile of ``obj`` handled, as every Flux controller
    reports it: ``observedGeneration`` and, when a reconcile was requested,
    ``lastHandledReconcileAt``. The values are read from ``obj`` now, not from the status
    being written."""
    gen = int(obj["metadata"].get("generation") or 1)
    requested = _d(obj["metadata"].get("annotations")).get(REQUESTED_AT)

    def update(status: Obj) -> None:
        status["observedGeneration"] = gen
        if requested is not None:
            status["lastHandledReconcileAt"] = requested

    return update


def set_condition(
    status: Obj,
    *,
    type_: str,
    state: str,
    reason: str,
    message: str,
    generation: int,
    now: str,
) -> None:
    """Set one condition; ``lastTransitionTime`` changes only when ``status`` flips."""
    conds: list[Obj] = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    old = next((c for c in conds if c.get("type") == type_), None)
    new: Condition = {
        "type": type_,
        "status": state,
        "observedGeneration": generation,
        "lastTransitionTime": now
        if old is None or old.get("status") != state
        else str(old.get("lastTransitionTime", now)),
        "reason": reason,
        "message": message,
    }
    conds = [c for c in conds if c.get("type") != type_]
    # Ready first, as kstatus and `flux get` read it.
    entry: Obj = dict(new)
    if type_ == "Ready":
        conds.insert(0, entry)
    else:
        conds.append(entry)
    status["conditions"] = conds


def drop_condition(status: Obj, type_: str) -> None:
    """Remove a condition if present."""
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != type_]


def ready_condition(obj: Obj) -> tuple[Obj | None, bool]:
    """The Ready condition of a Flux object (None: it has none) and whether it is for the
    current generation: its own ``observedGeneration``, else the status', equals
    ``metadata.generation``."""
    meta = obj.get("metadata") or {}
    st = _d(obj.get("status"))
    gen = int(meta.get("generation") or 1)
    for c in st.get("conditions") or []:
        if c.get("type") == "Ready":
            current = int(c.get("observedGeneration") or st.get("observedGeneration") or 0) == gen
            return dict(c), current
    return None, False


def ready(obj: Obj) -> tuple[bool, str]:
    """Whether a Flux object is Ready at its current generation, and its Ready message
    (what the controllers read; ``object_ready`` adds the flux CLI's reasons and revision)."""
    cond, current = ready_condition(obj)
    if cond is None:
        return False, ""
    return cond.get("status") == "True" and current, str(cond.get("message", ""))


def kstatus(obj: Obj) -> str:
    """``Current`` or ``InProgress`` (or ``Failed``) as sigs.k8s.io/cli-utils kstatus computes
    it for the kinds Flux health-checks."""
    kind = obj.get("kind")
    meta = obj.get("metadata") or {}
    spec = _d(obj.get("spec"))
    st = _d(obj.get("status"))
    gen = int(meta.get("generation") or 1)
    if meta.get("deletionTimestamp"):
        return "InProgress"
    if (
        kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
        and int(st.get("observedGeneration") or 0) < gen
    ):
        return "InProgress"
    if kind == "Deployment":
        want = int(spec.get("replicas", 1))
        ok = (
            int(st.get("updatedReplicas") or 0) >= want
            and int(st.get("availableReplicas") or 0) >= want
            and int(st.get("replicas") or 0) <= want
        )
        return "Current" if ok else "InProgress"
    if kind == "StatefulSet":
        want = int(spec.get("replicas", 1))
        ok = (
            int(st.get("readyReplicas") or 0) >= want
            and int(st.get("currentReplicas") or st.get("updatedReplicas") or 0) >= want
        )
        return "Current" if ok else "InProgress"
    if kind == "DaemonSet":
        want = int(st.get("desiredNumberScheduled") or 0)
        ok = (
            int(st.get("numberAvailable") or 0) >= want
            and int(st.get("updatedNumberScheduled") or 0) >= want
        )
        return "Current" if ok else "InProgress"
    if kind == "Pod":
        phase = st.get("phase")
        if phase == "Succeeded":
            return "Current"
        if phase == "Failed":
            return "Failed"
        ok = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in st.get("conditions") or []
        )
        return "Current" if ok else "InProgress"
    conds = st.get("conditions")
    if str(obj.get("apiVersion", "")).split("/")[0].endswith(".toolkit.fluxcd.io") and (
        int(st.get("observedGeneration") or 0) < gen or not isinstance(conds, list)
    ):
        # Flux objects are Current only once their controller reported on this generation.
        return "InProgress"
    if isinstance(conds, list):
        for c in conds:
            if c.get("type") == "Ready":
                current = (
                    int(c.get("observedGeneration") or st.get("observedGeneration") or gen) >= gen
                )
                if not current:
                    return "InProgress"
                if c.get("status") == "True":
                    return "Current"
                stalled = any(
                    x.get("type") == "Stalled" and x.get("status") == "True" for x in conds
                )
                return "Failed" if stalled else "InProgress"
    return "Current"


def duration(text: Any, default: float) -> float:
    """Seconds of a Go duration (``1h``, ``2m30s``, ``500ms``); ``default`` when unset."""
    if not isinstance(text, str) or not text:
        return default
    import re

    total = 0.0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"([0-9.]+)(ms|h|m|s)", text)
    if not parts:
        return default
    for num, unit in parts:
        total += float(num) * units[unit]
    return total


def go_duration(seconds: float) -> str:
    """``5m0s`` as Go's time.Duration prints it."""
    s = int(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"
