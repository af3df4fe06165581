"""Workload controllers: Deployment → ReplicaSet → Pods, StatefulSet and DaemonSet.

Each ``sync_*`` function is one pass of the kube-controller-manager controller of that name
over every object of its kind, acting on the store directly.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster import _volumes
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._reuse import (
    DAEMONSET_TOLERATIONS,
    node_matches_pod,
    pin_daemon_pod,
    untolerated_taint,
)
from gpushift_twin.cluster._reuse import template_hash as _engine_template_hash


def template_hash(template: Obj) -> str:
    """The engine's pod-template hash, remembered by the template's canonical JSON: every
    pass hashes every workload's template, and the hash is a byte loop."""
    return _hash_of(json.dumps(template, sort_keys=True, separators=(",", ":")))


@functools.lru_cache(maxsize=8192)
def _hash_of(text: str) -> str:
    return _engine_template_hash(json.loads(text))


def workload_hash(ctx: Context, obj: Obj) -> str:
    """:func:`template_hash` of a workload's ``spec.template``, remembered by the object's uid
    and generation: the template is part of spec, which generation follows, so a pass over
    unchanged workloads serialises none of them."""
    meta = obj["metadata"]
    key = (str(meta.get("uid")), int(meta.get("generation") or 0))
    cache = ctx.template_hashes
    found = cache.get(key)
    if found is None:
        if len(cache) >= 65536:
            cache.clear()
        found = cache[key] = template_hash((obj.get("spec") or {}).get("template") or {})
    return found


HASH_LABEL = "pod-template-hash"
REVISION_LABEL = "controller-revision-hash"
REVISION = "deployment.kubernetes.io/revision"
TERMINAL = ("Succeeded", "Failed")


def is_active(pod: Obj) -> bool:
    """Not being deleted and not finished (controller.IsPodActive)."""
    return (
        not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in TERMINAL
    )


def is_ready(pod: Obj) -> bool:
    """The pod's Ready condition is True."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's controlling owner, if any."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def by_owner(objs: Iterable[Obj]) -> dict[str, list[Obj]]:
    """Objects grouped by their controlling owner's uid."""
    out: dict[str, list[Obj]] = defaultdict(list)
    for o in objs:
        uid = controller_uid(o)
        if uid is not None:
            out[uid].append(o)
    return out


def owner_ref(obj: Obj) -> Obj:
    """A controller ownerReference to ``obj``."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_from_template(
    template: Obj,
    *,
    namespace: str,
    owner: Obj,
    name: str | None = None,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A pod as a controller creates it from its template (with the API server's defaults)."""
    tmeta = template.get("metadata") or {}
    meta: Obj = {
        "namespace": namespace,
        "labels": {**(tmeta.get("labels") or {}), **(labels or {})},
        "ownerReferences": [owner_ref(owner)],
    }
    if name is None:
        meta["generateName"] = owner["metadata"]["name"] + "-"
    else:
        meta["name"] = name
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    spec = dict(template.get("spec") or {})
    # k8s.io/kubernetes pkg/apis/core/v1 defaults.go: SetDefaults_PodSpec.
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _create(ctx: Context, pod: Obj) -> Obj | None:
    try:
        # Read-only: the controllers only read what they created.
        return ctx.store.create(
            ctx.kinds.pod, pod, namespace=pod["metadata"]["namespace"], shared=True
        )
    except ApiError:
        return None  # the namespace is terminating or the name is taken; retried next pass


def _delete(ctx: Context, pod: Obj) -> None:
    meta = pod["metadata"]
    with contextlib.suppress(ApiError):
        ctx.store.delete(ctx.kinds.pod, name=meta["name"], namespace=meta["namespace"])


def _set_status(ctx: Context, obj: Obj, *, status: Obj) -> None:
    kind = ctx.kinds.deployment
    for k in (ctx.kinds.replicaset, ctx.kinds.statefulset, ctx.kinds.daemonset):
        if k.kind == obj["kind"]:
            kind = k
    set_status(ctx, kind, obj, status)


def set_status(ctx: Context, kind: Kind, obj: Obj, status: Obj) -> None:
    """Merge ``status`` into ``obj``'s status subresource, unless it already holds it.

    A ``None`` value removes its key (omitempty); a write that races a client's is dropped,
    and the next pass writes again.
    """
    if all((obj.get("status") or {}).get(k) == v for k, v in status.items()):
        return
    meta = obj["metadata"]

    def mutate(cur: Obj) -> Obj:
        merged = {**(cur.get("status") or {}), **status}
        cur["status"] = {k: v for k, v in merged.items() if v is not None}  # omitempty
        return cur

    with contextlib.suppress(ApiError):
        ctx.store.update(
            kind,
            name=meta["name"],
            namespace=meta["namespace"],
            mutate=mutate,
            subresource="status",
        )


def _replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def _delete_order(pod: Obj) -> tuple[int, int, int, str]:
    # pkg/controller controller_utils.go ActivePods Less: unassigned < assigned, Pending <
    # Unknown < Running, not ready < ready, then the newer pod first.
    status = pod.get("status") or {}
    phase = {"Pending": 0, "Unknown": 1, "Running": 2}.get(str(status.get("phase")), 0)
    created = str(pod["metadata"].get("creationTimestamp", ""))
    inverted = "".join(chr(0x10FFFF - ord(c)) for c in created)
    return (1 if pod["spec"].get("nodeName") else 0, phase, int(is_ready(pod)), inverted)


def _terminating(pod: Obj) -> bool:
    """Being deleted and not finished (controller.IsPodTerminating)."""
    return (
        bool(pod["metadata"].get("deletionTimestamp"))
        and (pod.get("status") or {}).get("phase") not in TERMINAL
    )


# --- ReplicaSet -------------------------------------------------------------------------------


def sync_replicasets(ctx: Context, pods: list[Obj]) -> None:
    """ReplicaSet controller: keep ``spec.replicas`` active pods per ReplicaSet; status."""
    owned = by_owner(pods)
    for rs in ctx.list(ctx.kinds.replicaset):
        meta = rs["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        mine = owned.get(meta["uid"], [])
        active = [p for p in mine if is_active(p)]
        want = _replicas(rs)
        if len(active) < want:
            template = (rs.get("spec") or {}).get("template") or {}
            for _ in range(want - len(active)):
                created = _create(
                    ctx, pod_from_template(template, namespace=meta["namespace"], owner=rs)
                )
                if created is not None:
                    active.append(created)
                    ctx.event(
                        rs,
                        reason="SuccessfulCreate",
                        message=f"Created pod: {created['metadata']['name']}",
                        component="replicaset-controller",
                    )
        elif len(active) > want:
            for pod in sorted(active, key=_delete_order)[: len(active) - want]:
                _delete(ctx, pod)
                active.remove(pod)
                ctx.event(
                    rs,
                    reason="SuccessfulDelete",
                    message=f"Deleted pod: {pod['metadata']['name']}",
                    component="replicaset-controller",
                )
        ready = sum(1 for p in active if is_ready(p))
        # replica_set_utils.go calculateStatus; every count but replicas is omitempty, and
        # terminatingReplicas (a pointer, so 0 is shown) counts pods being deleted that
        # have not finished (controller.IsPodTerminating).
        _set_status(
            ctx,
            rs,
            status={
                "replicas": len(active),
                "fullyLabeledReplicas": len(active) or None,
                "readyReplicas": ready or None,
                "availableReplicas": ready or None,
                "observedGeneration": meta.get("generation", 1),
                "terminatingReplicas": sum(1 for p in mine if _terminating(p)),
            },
        )


# --- Deployment -------------------------------------------------------------------------------


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    # k8s.io/apimachinery util/intstr GetScaledValueFromIntOrPercent.
    if isinstance(value, str) and value.endswith("%"):
        scaled = int(value[:-1]) * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)
    return int(value)


def _scale(ctx: Context, rs: Obj, *, replicas: int, deploy: Obj) -> None:
    old = _replicas(rs)
    if old == replicas:
        return
    meta = rs["metadata"]

    def mutate(cur: Obj) -> Obj:
        cur["spec"]["replicas"] = replicas
        return cur

    try:
        ctx.store.update(
            ctx.kinds.replicaset, name=meta["name"], namespace=meta["namespace"], mutate=mutate
        )
    except ApiError:
        return
    verb = "up" if replicas > old else "down"
    # pkg/controller/deployment sync.go scaleReplicaSet.
    ctx.event(
        deploy,
        reason="ScalingReplicaSet",
        message=f"Scaled {verb} replica set {meta['name']} from {old} to {replicas}",
        component="deployment-controller",
    )


def _new_replicaset(ctx: Context, deploy: Obj, *, hash_: str, revision: int, replicas: int) -> Obj:
    meta = deploy["metadata"]
    spec = deploy.get("spec") or {}
    template = dict(spec.get("template") or {})
    tmeta = dict(template.get("metadata") or {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), HASH_LABEL: hash_}
    template["metadata"] = tmeta
    selector = dict(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), HASH_LABEL: hash_}
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta['name']}-{hash_}",
            "namespace": meta["namespace"],
            "labels": dict(tmeta["labels"]),
            "annotations": {
                **_copied_annotations(deploy),
                REVISION: str(revision),
                "deployment.kubernetes.io/desired-replicas": str(_replicas(deploy)),
                "deployment.kubernetes.io/max-replicas": str(_replicas(deploy)),
            },
            "ownerReferences": [owner_ref(deploy)],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    }
    created = ctx.store.create(ctx.kinds.replicaset, body, namespace=meta["namespace"])
    if replicas:
        ctx.event(
            deploy,
            reason="ScalingReplicaSet",
            message=f"Scaled up replica set {created['metadata']['name']} from 0 to {replicas}",
            component="deployment-controller",
        )
    return created


REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
#: deployment_util.go annotationsToSkip: what a ReplicaSet does not take from its Deployment.
_SKIPPED_ANNOTATIONS = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        REVISION,
        REVISION_HISTORY,
        "deployment.kubernetes.io/desired-replicas",
        "deployment.kubernetes.io/max-replicas",
        "deprecated.deployment.rollback.to",
    }
)


def _copied_annotations(deploy: Obj) -> dict[str, str]:
    """The Deployment's annotations a ReplicaSet of it carries (copyDeploymentAnnotations-
    ToReplicaSet)."""
    return {
        k: v
        for k, v in (deploy["metadata"].get("annotations") or {}).items()
        if k not in _SKIPPED_ANNOTATIONS
    }


def _sync_revision(ctx: Context, deploy: Obj, *, new: Obj, olds: list[Obj]) -> None:
    """sync.go getNewReplicaSet for a new ReplicaSet that exists: it takes the revision after
    the old ones' highest (a rollback to an earlier template makes that ReplicaSet the newest
    revision, its former one appended to ``revision-history``) and the Deployment's
    annotations; the Deployment's own ``revision`` annotation follows it."""
    annotations = dict(new["metadata"].get("annotations") or {})
    wanted = {**annotations, **_copied_annotations(deploy)}
    revision = _next_revision(olds)
    before = annotations.get(REVISION, "")
    if int(before or 0) < revision:
        wanted[REVISION] = str(revision)
        if before:
            history = wanted.get(REVISION_HISTORY, "")
            wanted[REVISION_HISTORY] = f"{history},{before}" if history else before
    if wanted != annotations:
        meta = new["metadata"]

        def mutate(cur: Obj) -> Obj:
            cur["metadata"]["annotations"] = wanted
            return cur

        try:
            new = ctx.store.update(
                ctx.kinds.replicaset, name=meta["name"], namespace=meta["namespace"], mutate=mutate
            )
        except ApiError:
            return
    _set_revision(ctx, deploy, str((new["metadata"].get("annotations") or {}).get(REVISION, "")))


def _set_revision(ctx: Context, deploy: Obj, revision: str) -> None:
    """The Deployment's ``deployment.kubernetes.io/revision`` (SetDeploymentRevision)."""
    if not revision or (deploy["metadata"].get("annotations") or {}).get(REVISION) == revision:
        return
    meta = deploy["metadata"]

    def mutate(cur: Obj) -> Obj:
        cur["metadata"].setdefault("annotations", {})[REVISION] = revision
        return cur

    # Upstream writes it with the status (kube-apiserver's Deployment status strategy keeps
    # annotations); the twin's status writes keep metadata, so it goes on the object.
    with contextlib.suppress(ApiError):
        ctx.store.update(
            ctx.kinds.deployment, name=meta["name"], namespace=meta["namespace"], mutate=mutate
        )


def sync_deployments(ctx: Context, pods: list[Obj]) -> None:
    """Deployment controller: the new ReplicaSet, rollouts (RollingUpdate, Recreate), status."""
    owned_rs = by_owner(ctx.list(ctx.kinds.replicaset))
    pods_by_rs = by_owner(pods)
    for deploy in ctx.list(ctx.kinds.deployment):
        meta = deploy["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        spec = deploy.get("spec") or {}
        want = _replicas(deploy)
        hash_ = workload_hash(ctx, deploy)
        rss = [
            r for r in owned_rs.get(meta["uid"], []) if not r["metadata"].get("deletionTimestamp")
        ]
        new = next(
            (r for r in rss if (r["metadata"].get("labels") or {}).get(HASH_LABEL) == hash_), None
        )
        olds = [r for r in rss if r is not new]
        strategy = (spec.get("strategy") or {}).get("type") or "RollingUpdate"
        if spec.get("paused"):
            continue
        if new is not None:
            _sync_revision(ctx, deploy, new=new, olds=olds)
        if strategy == "Recreate":
            # pkg/controller/deployment recreate.go: scale old down, wait for their pods to be
            # gone (terminating ones included), only then scale the new one up: the gap.
            for r in olds:
                _scale(ctx, r, replicas=0, deploy=deploy)
            # recreate.go oldPodsRunning: terminating pods count, finished ones do not.
            old_pods = [
                p
                for r in olds
                for p in pods_by_rs.get(r["metadata"]["uid"], [])
                if (p.get("status") or {}).get("phase") not in TERMINAL
            ]
            if any(_replicas(r) for r in olds) or old_pods:
                _deploy_status(ctx, deploy, new=new, olds=olds)
                continue
            if new is None:
                new = _new_replicaset(
                    ctx, deploy, hash_=hash_, revision=_next_revision(rss), replicas=want
                )
                _set_revision(ctx, deploy, str(new["metadata"]["annotations"][REVISION]))
            else:
                _scale(ctx, new, replicas=want, deploy=deploy)
        else:
            ru = (spec.get("strategy") or {}).get("rollingUpdate") or {}
            surge = _int_or_percent(ru.get("maxSurge", "25%"), want, round_up=True)
            unavailable = _int_or_percent(ru.get("maxUnavailable", "25%"), want, round_up=False)
            if surge == 0 and unavailable == 0:
                unavailable = 1
            total = sum(_replicas(r) for r in rss)
            if new is None:
                first = want if not olds else max(min(want + surge - total, want), 0)
                new = _new_replicaset(
                    ctx, deploy, hash_=hash_, revision=_next_revision(rss), replicas=first
                )
                _set_revision(ctx, deploy, str(new["metadata"]["annotations"][REVISION]))
            elif _replicas(new) > want:
                _scale(ctx, new, replicas=want, deploy=deploy)
            elif _replicas(new) < want:
                # rolling.go NewRSNewReplicas
                up = min(want + surge - total, want - _replicas(new))
                if up > 0:
                    _scale(ctx, new, replicas=_replicas(new) + up, deploy=deploy)
            old_total = sum(_replicas(r) for r in olds)
            if old_total:
                # rolling.go reconcileOldReplicaSets: keep minAvailable pods available.
                all_pods = sum(_replicas(r) for r in rss)
                new_unavailable = _replicas(new) - int(
                    (new.get("status") or {}).get("availableReplicas") or 0
                )
                room = all_pods - (want - unavailable) - new_unavailable
                for r in sorted(olds, key=lambda r: str(r["metadata"].get("creationTimestamp"))):
                    if room <= 0:
                        break
                    cut = min(_replicas(r), room)
                    if cut:
                        _scale(ctx, r, replicas=_replicas(r) - cut, deploy=deploy)
                        room -= cut
        _deploy_status(ctx, deploy, new=new, olds=olds)


def _next_revision(rss: list[Obj]) -> int:
    revs = [int((r["metadata"].get("annotations") or {}).get(REVISION, "0") or 0) for r in rss]
    return max(revs, default=0) + 1


def _deploy_status(ctx: Context, deploy: Obj, *, new: Obj | None, olds: list[Obj]) -> None:
    want = _replicas(deploy)
    rss = [*olds, *([new] if new is not None else [])]

    def total(key: str, items: list[Obj]) -> int:
        return sum(int((r.get("status") or {}).get(key) or 0) for r in items)

    available = total("availableReplicas", rss)
    updated = total("replicas", [new]) if new is not None else 0
    now = ctx.stamp()
    old_conds = {c["type"]: c for c in (deploy.get("status") or {}).get("conditions") or []}

    def cond(kind: str, status: str, reason: str, message: str) -> Obj:
        prev = old_conds.get(kind)
        if prev and prev.get("status") == status and prev.get("reason") == reason:
            return dict(prev)
        return {
            "type": kind,
            "status": status,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }

    ru = ((deploy.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    max_unavailable = _int_or_percent(ru.get("maxUnavailable", "25%"), want, round_up=False)
    if (((deploy.get("spec") or {}).get("strategy") or {}).get("type")) == "Recreate":
        max_unavailable = 0
    # pkg/controller/deployment/util deployment_util.go: condition reasons and messages.
    if available >= want - max_unavailable:
        avail = cond(
            "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."
        )
    else:
        avail = cond(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    name = new["metadata"]["name"] if new is not None else ""
    done = (
        new is not None
        and updated == want
        and available >= want
        and not any(_replicas(r) for r in olds)
    )
    if done:
        prog = cond(
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            f'ReplicaSet "{name}" has successfully progressed.',
        )
    else:
        prog = cond(
            "Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{name}" is progressing.'
        )
    # Every count is omitempty in apps/v1 DeploymentStatus but terminatingReplicas, a
    # pointer: the ReplicaSets' sum (GetTerminatingReplicaCountForReplicaSets).
    _set_status(
        ctx,
        deploy,
        status={
            "observedGeneration": deploy["metadata"].get("generation", 1),
            "replicas": total("replicas", rss) or None,
            "updatedReplicas": updated or None,
            "readyReplicas": total("readyReplicas", rss) or None,
            "availableReplicas": available or None,
            "unavailableReplicas": max(want - available, 0) or None,
            "terminatingReplicas": total("terminatingReplicas", rss),
            "conditions": [avail, prog],
        },
    )


# --- StatefulSet ------------------------------------------------------------------------------


def sync_statefulsets(ctx: Context, pods: list[Obj]) -> None:
    """StatefulSet controller: pods ``<name>-<ordinal>``, OrderedReady or Parallel."""
    owned = by_owner(pods)
    for sts in ctx.list(ctx.kinds.statefulset):
        meta = sts["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        spec = sts.get("spec") or {}
        want = _replicas(sts)
        ordered = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        mine = {p["metadata"]["name"]: p for p in owned.get(meta["uid"], [])}
        name = meta["name"]
        revision = f"{name}-{workload_hash(ctx, sts)}"
        deleted = False
        for i in range(want):
            pod_name = f"{name}-{i}"
            existing = mine.get(pod_name)
            if existing is not None:
                if ordered and not (is_active(existing) and is_ready(existing)):
                    break
                continue
            pod = pod_from_template(
                spec.get("template") or {},
                namespace=meta["namespace"],
                owner=sts,
                name=pod_name,
                labels={
                    "statefulset.kubernetes.io/pod-name": pod_name,
                    "apps.kubernetes.io/pod-index": str(i),
                    REVISION_LABEL: revision,
                },
            )
            pod["spec"]["hostname"] = pod_name
            if spec.get("serviceName"):
                pod["spec"]["subdomain"] = spec["serviceName"]
            _volumes.mount_statefulset_claims(ctx, sts, pod, i)
            created = _create(ctx, pod)
            if created is not None:
                # pkg/controller/statefulset stateful_pod_control.go recordPodEvent.
                ctx.event(
                    sts,
                    reason="SuccessfulCreate",
                    message=f"create Pod {pod_name} in StatefulSet {name} successful",
                    component="statefulset-controller",
                )
            if ordered:
                break
        extra = sorted(
            (p for n, p in mine.items() if _ordinal(n, name) >= want and is_active(p)),
            key=lambda p: -_ordinal(p["metadata"]["name"], name),
        )
        for pod in extra[:1] if ordered else extra:
            deleted = True
            _delete(ctx, pod)
            ctx.event(
                sts,
                reason="SuccessfulDelete",
                message=f"delete Pod {pod['metadata']['name']} in StatefulSet {name} successful",
                component="statefulset-controller",
            )
        members = [mine.get(f"{name}-{i}") for i in range(want)]
        strategy = spec.get("updateStrategy") or {}
        if (
            not deleted
            and (strategy.get("type") or "RollingUpdate") == "RollingUpdate"
            and all(p is not None and is_active(p) and is_ready(p) for p in members)
        ):
            # stateful_set_control.go updateStatefulSet: replace the highest outdated ordinal
            # at or above the partition, one at a time, once every pod is Running and Ready.
            partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
            for i in reversed(range(partition, want)):
                member = members[i]
                assert member is not None
                if (member["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision:
                    _delete(ctx, member)
                    ctx.event(
                        sts,
                        reason="SuccessfulDelete",
                        message=f"delete Pod {member['metadata']['name']} in StatefulSet "
                        f"{name} successful",
                        component="statefulset-controller",
                    )
                    break
        active = [p for p in mine.values() if is_active(p)]
        ready = sum(1 for p in active if is_ready(p))
        updated = sum(
            1 for p in active if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision
        )
        _set_status(
            ctx,
            sts,
            status={
                "observedGeneration": meta.get("generation", 1),
                "replicas": len(active),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "currentReplicas": len(active) - updated,
                "updatedReplicas": updated,
                "updateRevision": revision,
            },
        )


def _ordinal(pod_name: str, sts_name: str) -> int:
    tail = pod_name[len(sts_name) + 1 :]
    return int(tail) if tail.isdigit() else -1


# --- DaemonSet --------------------------------------------------------------------------------


def daemon_placement(spec: Obj, node: Obj) -> tuple[bool, bool]:
    """Whether a DaemonSet with pod ``spec`` should run a pod on ``node``, and whether a
    daemon pod already there should continue running.

    A node whose name, selector or affinity does not fit gets neither. An untolerated
    NoSchedule or NoExecute taint keeps new pods off the node, but a pod already there is
    deleted only for an untolerated NoExecute taint.
    """
    # pkg/controller/daemon daemon_controller.go NodeShouldRunDaemonPod and predicates.
    meta = node["metadata"]
    if spec.get("nodeName") and spec["nodeName"] != meta["name"]:
        return False, False
    if not node_matches_pod(spec, node_name=meta["name"], labels=meta.get("labels") or {}):
        return False, False
    tolerations = [*(spec.get("tolerations") or []), *DAEMONSET_TOLERATIONS]
    taints = (node.get("spec") or {}).get("taints") or []
    if untolerated_taint(taints, tolerations) is None:
        return True, True
    return False, untolerated_taint(taints, tolerations, effects=("NoExecute",)) is None


def _daemon_pod(ctx: Context, ds: Obj, *, node: str, generation: int) -> Obj:
    meta = ds["metadata"]
    template = (ds.get("spec") or {}).get("template") or {}
    pod = pod_from_template(
        template,
        namespace=meta["namespace"],
        owner=ds,
        labels={
            "pod-template-generation": str(generation),
            "controller-revision-hash": workload_hash(ctx, ds),
        },
    )
    pin_daemon_pod(pod["spec"], node=node)
    return pod


def _daemon_node(pod: Obj) -> str | None:
    if pod["spec"].get("nodeName"):
        return str(pod["spec"]["nodeName"])
    terms = (
        ((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return None


def _by_creation(pod: Obj) -> tuple[int, str, str]:
    # podByCreationTimestampAndPhase: a scheduled pod first, then the older, then by name.
    meta = pod["metadata"]
    return (
        0 if pod["spec"].get("nodeName") else 1,
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("name") or ""),
    )


def _template_generation(pod: Obj) -> str | None:
    return (pod["metadata"].get("labels") or {}).get("pod-template-generation")


def _available(ctx: Context, pod: Obj, *, min_ready: int) -> bool:
    """podutil.IsPodAvailable: Ready for at least ``min_ready`` seconds; when it will be,
    another pass is asked for then."""
    if not is_ready(pod):
        return False
    if min_ready <= 0:
        return True
    ready = next(
        c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"
    )
    since = str(ready.get("lastTransitionTime") or "")
    if not since:
        return True
    left = (
        datetime.fromisoformat(since.replace("Z", "+00:00")).timestamp()
        + min_ready
        - ctx.clock.now().timestamp()
    )
    if left <= 0:
        return True
    ctx.wake_at(ctx.now() + left)
    return False


def _rolling_deletes(
    ctx: Context,
    *,
    ds: Obj,
    on_node: dict[str, list[Obj]],
    wanted: set[str],
    generation: int,
) -> list[Obj]:
    """The outdated pods one RollingUpdate pass deletes (update.go rollingUpdate, without
    surge): every node with a daemon pod, and every node that should run one, counts; a node
    whose only pods are terminating, or that has none yet, or whose updated pod is not
    available, is unavailable. Outdated pods that are not available go at once; available
    ones only while fewer than maxUnavailable nodes are unavailable. A pod already deleted
    does not count once it is gone, so a rollout under an untolerated NoSchedule taint
    deletes the outdated pods one at a time, each after the one before it has gone, and
    replaces none (nothing may start there) until the taint goes."""
    spec = ds.get("spec") or {}
    rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
    # kube-apiserver defaults maxUnavailable to 1; a percentage is of the nodes that should
    # run a pod, rounded up, and 0 of none (updatedDesiredNodeCounts).
    limit = _int_or_percent(rolling.get("maxUnavailable", 1), len(wanted), round_up=True)
    surge = _int_or_percent(rolling.get("maxSurge", 0), len(wanted), round_up=True)
    if wanted and limit == 0 and surge == 0:
        limit = 1
    min_ready = int(spec.get("minReadySeconds") or 0)
    nodes: dict[str, list[Obj]] = {
        node: [
            p
            for p in items
            # getNodesToDaemonPods: a finished pod being deleted is the kubelet's business.
            if not (
                p["metadata"].get("deletionTimestamp")
                and (p.get("status") or {}).get("phase") in TERMINAL
            )
        ]
        for node, items in on_node.items()
    }
    for node in wanted:
        nodes.setdefault(node, [])
    unavailable = 0
    replace: list[Obj] = []
    candidates: list[Obj] = []
    for node in sorted(nodes):
        live = [p for p in nodes[node] if not p["metadata"].get("deletionTimestamp")]
        new = [p for p in live if _template_generation(p) == str(generation)]
        old = [p for p in live if _template_generation(p) != str(generation)]
        if len(new) > 1 or len(old) > 1 or bool(new) == bool(old):
            # Excess pods (the manage pass prunes them), or nothing live on the node.
            unavailable += 1
        elif new:
            unavailable += 0 if _available(ctx, new[0], min_ready=min_ready) else 1
        elif not _available(ctx, old[0], min_ready=min_ready):
            replace.append(old[0])
            unavailable += 1
        elif unavailable < limit:
            candidates.append(old[0])
    room = min(max(limit - unavailable, 0), len(candidates))
    return [*replace, *candidates[:room]]


def sync_daemonsets(ctx: Context, *, pods: list[Obj], nodes: list[Obj]) -> None:
    """DaemonSet controller: one pod per matching node; RollingUpdate of outdated pods.

    As kube-controller-manager's: a pass that created or deleted pods for placement leaves
    the rollout to the next pass (its expectations are not yet met), and the rollout is
    :func:`_rolling_deletes`; new pods come from the placement of a later pass.
    """
    owned = by_owner(pods)
    for ds in ctx.list(ctx.kinds.daemonset):
        meta = ds["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        generation = int(meta.get("generation", 1))
        tspec = template.get("spec") or {}
        placement = {n["metadata"]["name"]: daemon_placement(tspec, n) for n in nodes}
        # Nodes that should run a pod, and nodes whose pod may stay (a tolerated NoExecute
        # taint, or only an untolerated NoSchedule one).
        wanted = {name for name, (run, _) in placement.items() if run}
        kept = {name for name, (_, stay) in placement.items() if stay}
        on_node: dict[str, list[Obj]] = defaultdict(list)
        for p in owned.get(meta["uid"], []):
            node = _daemon_node(p)
            if node is not None:
                on_node[node].append(p)
        acted = False
        # daemon_controller.go podsShouldBeOnNode: create only where the pod should run,
        # delete only where it should not continue running.
        for node in sorted(kept):
            active = [p for p in on_node.get(node, []) if is_active(p)]
            if (
                node in wanted
                and not active
                and not any(
                    not is_active(p) and p["metadata"].get("deletionTimestamp")
                    for p in on_node.get(node, [])
                )
            ):
                created = _create(ctx, _daemon_pod(ctx, ds, node=node, generation=generation))
                acted = True
                if created is not None:
                    on_node[node].append(created)
                    ctx.event(
                        ds,
                        reason="SuccessfulCreate",
                        message=f"Created pod: {created['metadata']['name']}",
                        component="daemonset-controller",
                    )
            for extra in active[1:]:
                _delete(ctx, extra)
                acted = True
        for node, items in on_node.items():
            if node in kept:
                continue
            for p in items:
                if is_active(p):
                    _delete(ctx, p)
                    acted = True
                    ctx.event(
                        ds,
                        reason="SuccessfulDelete",
                        message=f"Deleted pod: {p['metadata']['name']}",
                        component="daemonset-controller",
                    )
        # daemon_controller.go updateDaemonSetStatus: a node that has a pod but should not
        # run one is misscheduled, whether its pod stays or is being deleted.
        misscheduled = sum(
            1
            for node in placement
            if node not in wanted
            and any(
                not (
                    p["metadata"].get("deletionTimestamp")
                    and (p.get("status") or {}).get("phase") in TERMINAL
                )
                for p in on_node.get(node, [])
            )
        )
        strategy = spec.get("updateStrategy") or {}
        if not acted and (strategy.get("type") or "RollingUpdate") == "RollingUpdate":
            for p in _rolling_deletes(
                ctx, ds=ds, on_node=on_node, wanted=wanted, generation=generation
            ):
                _delete(ctx, p)
                ctx.event(
                    ds,
                    reason="SuccessfulDelete",
                    message=f"Deleted pod: {p['metadata']['name']}",
                    component="daemonset-controller",
                )
        # daemon_controller.go updateDaemonSetStatus: on each node that should run a pod,
        # its oldest pod (scheduled first, then by creation), one being deleted included,
        # gives ready, available and updated; a finished pod being deleted does not count.
        min_ready = int(spec.get("minReadySeconds") or 0)
        firsts = [
            min(counted, key=_by_creation)
            for n in wanted
            if (
                counted := [
                    p
                    for p in on_node.get(n, [])
                    if not (
                        p["metadata"].get("deletionTimestamp")
                        and (p.get("status") or {}).get("phase") in TERMINAL
                    )
                ]
            )
        ]
        ready = sum(1 for p in firsts if is_ready(p))
        available = sum(1 for p in firsts if _available(ctx, p, min_ready=min_ready))
        updated = sum(1 for p in firsts if _template_generation(p) == str(generation))
        _set_status(
            ctx,
            ds,
            status={
                "observedGeneration": generation,
                "desiredNumberScheduled": len(wanted),
                "currentNumberScheduled": len(firsts),
                "numberMisscheduled": misscheduled,
                "numberReady": ready,
                # omitempty in apps/v1 DaemonSetStatus: a zero is left out.
                "numberAvailable": available or None,
                "numberUnavailable": max(len(wanted) - available, 0) or None,
                "updatedNumberScheduled": updated or None,
            },
        )
