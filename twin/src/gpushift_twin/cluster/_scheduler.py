"""kube-scheduler against live objects: the engine's scheduler loop, written back to the store.

Each pass hands the engine every node, slice, class and claim, the pods already bound (as
running where they are) and the pending pods not yet tried since the cluster last changed in
a way that could help them. The engine binds in kube-scheduler order; this module writes what
kube-scheduler writes: claim allocations and ``reservedFor``, generated extended-resource
claims (KEP-5004), the binding, the PodScheduled condition and the Scheduled or
FailedScheduling Events.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import orjson

from gpushift.common import InputError, Obj
from gpushift.engine import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    Inputs,
    PodInfo,
    pod_requests,
    schedule,
)
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster._claims import FINALIZER
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._workloads import TERMINAL, is_active

SCHEDULER = "default-scheduler"
#: The kubelet's hold on a bound pod, so that deleting it passes through Terminating.
KUBELET_FINALIZER = "twin.gpushift.io/kubelet"


def _loads(raw: bytes) -> Obj:
    try:
        out: Obj = orjson.loads(raw)
    except orjson.JSONDecodeError:  # integers beyond 64 bits
        out = json.loads(raw)
    return out


def _copies(ctx: Context, kind: Any) -> list[Obj]:
    # Private copies for the engine, which writes into what it is given.
    return [_loads(raw) for raw in ctx.store.list(kind).raw]


def _strip_delegated(pod: Obj) -> None:
    # A bound pod's extended resources served by its generated claim are not node requests.
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    mapped = {
        (m.get("containerName"), m.get("resourceName")) for m in status.get("requestMappings") or []
    }
    if not mapped:
        return
    spec = pod.get("spec") or {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            for key in list(res.get(part) or {}):
                if (c.get("name"), key) in mapped:
                    del res[part][key]


def _resolve_claim_refs(pod: Obj, templates: set[tuple[str, str]]) -> bool:
    """Point template entries at the generated claims; False while one is still missing."""
    ns = pod["metadata"]["namespace"]
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    ready = True
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        tname = pc.get("resourceClaimTemplateName")
        if not tname:
            continue
        claim = statuses.get(pc.get("name"))
        if claim:
            pc.pop("resourceClaimTemplateName")
            pc["resourceClaimName"] = claim
        elif (ns, str(tname)) in templates:
            ready = False  # the resourceclaim controller has not created it yet
    return ready


class Scheduler:
    """The default scheduler of the twin. Call :meth:`sync` once per pass."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: Bumped by the controller loop when something that frees capacity changes.
        self.epoch = 0
        self._tried: dict[str, int] = {}
        #: Pods whose requests parsed, by uid, with the resourceVersion that was checked.
        self._checked: dict[str, str] = {}

    def sync(self) -> int:
        """Schedule what can be; returns the number of pods bound."""
        ctx = self.ctx
        page = ctx.store.list(ctx.kinds.pod)
        pods = page.objects
        # Each pod's JSON, read (and so encoded) only for the pods the engine is given.
        encoded = {id(o): e for o, e in zip(page.objects, page.encoded, strict=True)}
        templates = {
            (t["metadata"]["namespace"], t["metadata"]["name"])
            for t in ctx.list(ctx.kinds.template)
        }
        pending: list[Obj] = []
        bound: list[Obj] = []
        terminating: set[str] = set()
        for p in pods:
            spec = p.get("spec") or {}
            if spec.get("nodeName"):
                if (p.get("status") or {}).get("phase") not in TERMINAL:
                    bound.append(p)
                    if p["metadata"].get("deletionTimestamp"):
                        terminating.add(str(spec["nodeName"]))
            elif (
                is_active(p)
                and spec.get("schedulerName", SCHEDULER) == SCHEDULER
                # The SchedulingGates PreEnqueue plugin: a gated pod is not tried at all.
                and not spec.get("schedulingGates")
                and self._tried.get(p["metadata"]["uid"]) != self.epoch
                # pkg/scheduler/framework/preemption PodEligibleToPreemptOthers: a pod whose
                # nominated node still has victims terminating waits for them to go.
                and (p.get("status") or {}).get("nominatedNodeName") not in terminating
            ):
                pending.append(p)
        if not pending:
            return 0
        if len(self._checked) > 2 * len(pods):
            live = {p["metadata"]["uid"] for p in pods}
            self._checked = {u: rv for u, rv in self._checked.items() if u in live}
        todo: list[Obj] = []
        for p in pending:
            copy = _loads(encoded[id(p)].raw)
            if not self._valid(copy):
                continue
            if _resolve_claim_refs(copy, templates):
                todo.append(copy)
        if not todo:
            return 0
        prebound = []
        for p in bound:
            copy = _loads(encoded[id(p)].raw)
            if not self._valid(copy):
                continue
            _resolve_claim_refs(copy, templates)
            _strip_delegated(copy)
            prebound.append(copy)
        inputs = Inputs(
            nodes=_copies(ctx, ctx.kinds.node),
            pods=[*prebound, *todo],
            slices=_copies(ctx, ctx.kinds.slice),
            classes=_copies(ctx, ctx.kinds.device_class),
            claims=_copies(ctx, ctx.kinds.claim),
            templates=_copies(ctx, ctx.kinds.template),
            priority_classes=_copies(ctx, ctx.kinds.priority_class),
        )
        outcome = schedule(inputs)
        live_claims = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): c
            for c in ctx.list(ctx.kinds.claim)
        }
        # The engine preempts in its own model; here the victims must really go first. The
        # preemptor is nominated and binds in a later pass, once they are gone, as upstream.
        nominated: dict[str, str] = {}
        by_key = {p.key: p for p in outcome.pods[len(prebound) :]}
        for victim in outcome.pods[: len(prebound)]:
            if victim.preempted_by is None:
                continue
            preemptor_key, node = victim.preempted_by
            preemptor = by_key.get(preemptor_key)
            if preemptor is None:
                continue
            nominated[preemptor_key] = node
            self._evict(victim, preemptor=preemptor, node=node)
        freeing = set(nominated.values())
        count = 0
        for info in outcome.pods[len(prebound) :]:
            uid = str(info.obj["metadata"]["uid"])
            if info.key in nominated:
                self._nominate(info, nominated[info.key])
                continue
            if info.node is not None and info.node.name in freeing:
                continue  # placed into room the victims still hold: retried next pass
            if info.node is None:
                self._tried[uid] = self.epoch
                self._unschedulable(info)
                continue
            self._tried.pop(uid, None)
            if self._bind(info, live_claims):
                count += 1
        return count

    def _valid(self, pod: Obj) -> bool:
        # kube-apiserver rejects unparsable quantities at admission; the twin's store may
        # hold one, which must not stop every other pod from being scheduled.
        uid = str(pod["metadata"].get("uid"))
        rv = str(pod["metadata"].get("resourceVersion"))
        if self._checked.get(uid) == rv:
            return True  # every pass hands the engine every bound pod: parse each once
        try:
            pod_requests(pod.get("spec") or {})
        except (InputError, ValueError, TypeError) as err:
            if self._tried.get(uid) != -1:
                self._tried[uid] = -1
                self.ctx.event(
                    pod,
                    reason="FailedScheduling",
                    message=str(err),
                    component=SCHEDULER,
                    warning=True,
                )
            return False
        self._checked[uid] = rv
        return True

    # -- writes --

    def _evict(self, victim: PodInfo, *, preemptor: PodInfo, node: str) -> None:
        """Delete a preemption victim, with the event kube-scheduler records on it."""
        ctx = self.ctx
        try:
            live = ctx.store.get(ctx.kinds.pod, name=victim.name, namespace=victim.namespace)
        except ApiError:
            return
        if live["metadata"].get("deletionTimestamp"):
            return
        # pkg/scheduler/framework/preemption prepareCandidate: the victim's event.
        preemptor_uid = preemptor.obj["metadata"].get("uid")
        ctx.event(
            live,
            reason="Preempted",
            message=f"Preempted by pod {preemptor_uid} on node {node}",
            component=SCHEDULER,
        )
        with contextlib.suppress(ApiError):
            ctx.store.delete(ctx.kinds.pod, name=victim.name, namespace=victim.namespace)

    def _nominate(self, info: PodInfo, node: str) -> None:
        """Record ``status.nominatedNodeName`` on a preemptor that waits for its victims."""
        ctx = self.ctx

        def mutate(cur: Obj) -> Obj:
            cur.setdefault("status", {})["nominatedNodeName"] = node
            return cur

        with contextlib.suppress(ApiError):
            ctx.store.update(
                ctx.kinds.pod,
                name=info.name,
                namespace=info.namespace,
                mutate=mutate,
                subresource="status",
            )

    def _unschedulable(self, info: PodInfo) -> None:
        ctx = self.ctx
        message = info.message or ""
        conds = (info.obj.get("status") or {}).get("conditions") or []
        current = next((c for c in conds if c.get("type") == "PodScheduled"), None)
        if current and current.get("status") == "False" and current.get("message") == message:
            return
        now = ctx.stamp()

        def mutate(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            st["phase"] = "Pending"
            st["conditions"] = [
                *(c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"),
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": now,
                    "reason": "Unschedulable",
                    "message": message,
                },
            ]
            return cur

        try:
            pod = ctx.store.update(
                ctx.kinds.pod,
                name=info.name,
                namespace=info.namespace,
                mutate=mutate,
                subresource="status",
            )
        except ApiError:
            return
        ctx.event(
            pod, reason="FailedScheduling", message=message, component=SCHEDULER, warning=True
        )

    def _write_claim(self, claim: Obj, *, live: Obj | None, pod_uid: str) -> bool:
        ctx = self.ctx
        meta = claim["metadata"]
        ns, name = meta["namespace"], meta["name"]
        status = claim.get("status") or {}
        if live is None:
            body = {k: v for k, v in claim.items() if k != "status"}
            body["metadata"] = {
                k: v
                for k, v in meta.items()
                if k not in ("uid", "resourceVersion", "creationTimestamp")
            }
            try:
                live = ctx.store.create(ctx.kinds.claim, body, namespace=ns)
            except ApiError:
                return False
        if FINALIZER not in (live["metadata"].get("finalizers") or []):

            def protect(cur: Obj) -> Obj:
                cur["metadata"]["finalizers"] = [
                    *(cur["metadata"].get("finalizers") or []),
                    FINALIZER,
                ]
                return cur

            try:
                live = ctx.store.update(ctx.kinds.claim, name=name, namespace=ns, mutate=protect)
            except ApiError:
                return False
        entry = next((r for r in status.get("reservedFor") or [] if r.get("uid") == pod_uid), None)

        def reserve(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            if not st.get("allocation") and status.get("allocation"):
                st["allocation"] = status["allocation"]
            reserved = st.setdefault("reservedFor", [])
            if entry is not None and all(r.get("uid") != pod_uid for r in reserved):
                reserved.append(entry)
            return cur

        try:
            ctx.store.update(
                ctx.kinds.claim, name=name, namespace=ns, mutate=reserve, subresource="status"
            )
        except ApiError:
            return False
        return True

    def _bind(self, info: PodInfo, live_claims: dict[tuple[str, str], Obj]) -> bool:
        ctx = self.ctx
        assert info.node is not None
        node = info.node.name
        uid = str(info.obj["metadata"]["uid"])
        for _, claim in info.claims:
            c: Any = claim
            key = (c["metadata"]["namespace"], c["metadata"]["name"])
            if not self._write_claim(c, live=live_claims.get(key), pod_uid=uid):
                return False
        ext_status = None
        if info.bridge is not None:
            bridge: Obj = info.bridge.claim
            bridge["metadata"].setdefault("annotations", {})[EXTENDED_RESOURCE_CLAIM_ANNOTATION] = (
                "true"
            )
            key = (bridge["metadata"]["namespace"], bridge["metadata"]["name"])
            if not self._write_claim(bridge, live=live_claims.get(key), pod_uid=uid):
                return False
            ext_status = (info.obj.get("status") or {}).get("extendedResourceClaimStatus")

        # Both writes build their bodies around the stored pod (``shared``): no copies.
        def assign(cur: Obj) -> Obj:
            fins = cur["metadata"].get("finalizers") or []
            if KUBELET_FINALIZER not in fins:
                fins = [*fins, KUBELET_FINALIZER]
            return {
                **cur,
                "metadata": {**cur["metadata"], "finalizers": fins},
                "spec": {**cur["spec"], "nodeName": node},
            }

        now = ctx.stamp()

        def scheduled(cur: Obj) -> Obj:
            st = dict(cur.get("status") or {})
            st.setdefault("phase", "Pending")
            st["conditions"] = [
                *(c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"),
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": now,
                },
            ]
            if ext_status is not None:
                st["extendedResourceClaimStatus"] = ext_status
            return {**cur, "status": st}

        try:
            ctx.store.update(
                ctx.kinds.pod,
                name=info.name,
                namespace=info.namespace,
                mutate=assign,
                shared=True,
            )
            pod = ctx.store.update(
                ctx.kinds.pod,
                name=info.name,
                namespace=info.namespace,
                mutate=scheduled,
                subresource="status",
                shared=True,
            )
        except ApiError:
            return False
        # pkg/scheduler schedule_one.go handleBindingCycleError/finishBinding: the event.
        ctx.event(
            pod,
            reason="Scheduled",
            message=f"Successfully assigned {info.namespace}/{info.name} to {node}",
            component=SCHEDULER,
        )
        return True
