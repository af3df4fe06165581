"""The resourceclaim controller: claims from templates for pods, and their clean-up.

Mirrors k8s.io/kubernetes pkg/controller/resourceclaim/controller.go: a pod's
``resourceClaimTemplateName`` entries become ResourceClaims owned by the pod and named in
``pod.status.resourceClaimStatuses``; pods that are gone or finished leave ``reservedFor``;
an unreserved claim is deallocated, and a generated one deleted.
"""

from __future__ import annotations

import contextlib
from typing import Any

from gpushift.common import Obj
from gpushift.engine import pod_claim_generate_name
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._workloads import TERMINAL

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
FINALIZER = "resource.kubernetes.io/delete-protection"


def _pod_ref(pod: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod["metadata"]["name"],
        "uid": pod["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def create_claims(ctx: Context, pods: list[Obj]) -> None:
    """Create the missing claims of pods that use ResourceClaimTemplates."""
    templates: dict[tuple[str, str], Obj] | None = None
    for pod in pods:
        entries = [
            pc
            for pc in (pod.get("spec") or {}).get("resourceClaims") or []
            if pc.get("resourceClaimTemplateName")
        ]
        if not entries or pod["metadata"].get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        if status.get("phase") in TERMINAL:
            continue
        done = {s.get("name") for s in status.get("resourceClaimStatuses") or []}
        missing = [pc for pc in entries if pc.get("name") not in done]
        if not missing:
            continue
        if templates is None:
            templates = {
                (t["metadata"]["namespace"], t["metadata"]["name"]): t
                for t in ctx.list(ctx.kinds.template)
            }
        ns = pod["metadata"]["namespace"]
        added: list[Obj] = []
        for pc in missing:
            template = templates.get((ns, str(pc["resourceClaimTemplateName"])))
            if template is None:
                continue  # the scheduler reports it; created once the template exists
            tspec = template.get("spec") or {}
            tmeta = tspec.get("metadata") or {}
            meta: dict[str, Any] = {
                "generateName": pod_claim_generate_name(
                    pod=pod["metadata"]["name"], claim=str(pc["name"])
                ),
                "namespace": ns,
                "annotations": {
                    **(tmeta.get("annotations") or {}),
                    POD_CLAIM_NAME_ANNOTATION: str(pc["name"]),
                },
                "ownerReferences": [_pod_ref(pod)],
            }
            if tmeta.get("labels"):
                meta["labels"] = dict(tmeta["labels"])
            try:
                claim = ctx.store.create(
                    ctx.kinds.claim,
                    {"metadata": meta, "spec": tspec.get("spec") or {}},
                    namespace=ns,
                )
            except ApiError:
                continue
            added.append({"name": str(pc["name"]), "resourceClaimName": claim["metadata"]["name"]})
        if added:

            def mutate(cur: Obj, added: list[Obj] = added) -> Obj:
                st = cur.setdefault("status", {})
                st["resourceClaimStatuses"] = [*(st.get("resourceClaimStatuses") or []), *added]
                return cur

            with contextlib.suppress(ApiError):
                ctx.store.update(
                    ctx.kinds.pod,
                    name=pod["metadata"]["name"],
                    namespace=ns,
                    mutate=mutate,
                    subresource="status",
                )


def clean_claims(ctx: Context, pods: list[Obj]) -> None:
    """Drop gone or finished pods from ``reservedFor``; deallocate and delete as upstream.

    In syncClaim's order: when the last consumer leaves, the status goes first (no
    ``reservedFor``, no ``allocation``), then the finalizer, and a claim generated for a pod
    that is gone or finished is deleted last, so no claim is ever seen going while still
    allocated. A claim deleted while unused loses its allocation, then its finalizer. A claim
    allocated but never reserved stays allocated (upstream deallocates on the transition only).
    """
    live = {
        p["metadata"]["uid"] for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL
    }
    for claim in ctx.list(ctx.kinds.claim):
        meta = claim["metadata"]
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        keep = [r for r in reserved if r.get("uid") in live]
        owner = next(
            (
                o
                for o in meta.get("ownerReferences") or []
                if o.get("kind") == "Pod" and o.get("controller")
            ),
            None,
        )
        owner_gone = owner is not None and owner.get("uid") not in live
        deleting = bool(meta.get("deletionTimestamp"))
        guarded = FINALIZER in (meta.get("finalizers") or [])
        allocated = bool(status.get("allocation"))
        ns, name = meta["namespace"], meta["name"]
        if len(keep) < len(reserved):
            if not _write_status(ctx, name=name, namespace=ns, keep=keep):
                continue
            allocated = allocated and bool(keep)
            if guarded and not allocated:
                _release(ctx, name=name, namespace=ns)
        elif guarded and deleting and not keep:
            if allocated and not _write_status(ctx, name=name, namespace=ns, keep=[]):
                continue
            _release(ctx, name=name, namespace=ns)
        if not keep and owner_gone and not deleting:
            # A generated claim whose pod will not run again; the garbage collector would
            # too, once the pod is gone.
            with contextlib.suppress(ApiError):
                ctx.store.delete(ctx.kinds.claim, name=name, namespace=ns)


def _write_status(ctx: Context, *, name: str, namespace: str, keep: list[Obj]) -> bool:
    """``reservedFor`` down to ``keep``; without any, deallocated too. False if it failed."""

    def unreserve(cur: Obj) -> Obj:
        st = cur.setdefault("status", {})
        if keep:
            st["reservedFor"] = keep
        else:
            st.pop("reservedFor", None)
            st.pop("allocation", None)
            st.pop("devices", None)
        return cur

    try:
        ctx.store.update(
            ctx.kinds.claim, name=name, namespace=namespace, mutate=unreserve, subresource="status"
        )
    except ApiError:
        return False
    return True


def _release(ctx: Context, *, name: str, namespace: str) -> None:
    """Remove the controller's finalizer (a failed write is retried next pass)."""

    def release(cur: Obj) -> Obj:
        cur["metadata"]["finalizers"] = [
            f for f in cur["metadata"].get("finalizers") or [] if f != FINALIZER
        ]
        return cur

    with contextlib.suppress(ApiError):
        ctx.store.update(ctx.kinds.claim, name=name, namespace=namespace, mutate=release)
