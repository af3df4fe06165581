"""What the flux CLI does over the API: suspend, resume and reconcile-and-wait.

Mirrors fluxcd/flux2 ``cmd/flux`` (suspend.go, resume.go, reconcile.go, readiness.go): a JSON
merge patch ``{"spec": {"suspend": true}}`` to suspend and ``{"spec": {"suspend": null}}`` to
resume (``suspend`` is ``omitempty``); a reconcile is the ``reconcile.fluxcd.io/requestedAt``
annotation set to a fresh RFC 3339 token, handled once ``status.lastHandledReconcileAt``
equals it; ready means the Ready condition is True for the current generation.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gpushift._obj import Obj
from gpushift.flux._status import REQUESTED_AT, ready, ready_condition
from gpushift.kube import Kube, KubeError, ResourceRef

#: fluxcd/pkg apis/meta ReconcileRequestAnnotation.
GITREPOSITORY = ResourceRef.named("GitRepository", "source.toolkit.fluxcd.io/v1")
KUSTOMIZATION = ResourceRef.named("Kustomization", "kustomize.toolkit.fluxcd.io/v1")
HELMRELEASE = ResourceRef.named("HelmRelease", "helm.toolkit.fluxcd.io/v2")


def suspend(kube: Kube, ref: ResourceRef, *, name: str, namespace: str) -> Obj:
    """``flux suspend``: merge-patch ``spec.suspend: true``; returns the object."""
    return kube.patch(ref, name=name, namespace=namespace, patch={"spec": {"suspend": True}})


def resume(kube: Kube, ref: ResourceRef, *, name: str, namespace: str) -> Obj:
    """``flux resume`` without its wait: merge-patch ``spec.suspend: null`` (the field is
    ``omitempty``, so false is its removal); returns the object."""
    return kube.patch(ref, name=name, namespace=namespace, patch={"spec": {"suspend": None}})


def new_token() -> str:
    """A reconcile request token: the time now as RFC 3339 with nanoseconds (Go's
    ``time.RFC3339Nano`` drops trailing zeros; any change of value is a new request)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def request_reconcile(
    kube: Kube, ref: ResourceRef, *, name: str, namespace: str, token: str | None = None
) -> str:
    """Annotate ``reconcile.fluxcd.io/requestedAt`` (a merge patch on metadata, as
    ``flux reconcile`` does); returns the token to wait for."""
    token = token or new_token()
    kube.patch(
        ref,
        name=name,
        namespace=namespace,
        patch={"metadata": {"annotations": {REQUESTED_AT: token}}},
    )
    return token


def revision(obj: Obj) -> str:
    """The revision an object is at: a source's ``status.artifact.revision``, a
    Kustomization's ``status.lastAppliedRevision``, a HelmRelease's
    ``status.lastAttemptedRevision``; empty when it has none yet."""
    status = obj.get("status") or {}
    artifact = status.get("artifact") or {}
    return str(
        artifact.get("revision")
        or status.get("lastAppliedRevision")
        or status.get("lastAttemptedRevision")
        or ""
    )


def object_ready(obj: Obj, *, at_revision: str | None = None) -> tuple[bool, str]:
    """``isObjectReady`` of flux2 readiness.go, plus an optional revision: :func:`ready`
    once the controller has reconciled the object at all, at ``at_revision`` when given.
    Returns (ready, why not or the Ready message)."""
    if int((obj.get("status") or {}).get("observedGeneration") or 0) < 1:
        return False, "not reconciled yet"
    cond, current = ready_condition(obj)
    if cond is None:
        return False, "no Ready condition"
    if not current:
        generation = int((obj.get("metadata") or {}).get("generation") or 1)
        return False, f"generation {generation} not observed yet"
    ok, message = ready(obj)
    if not ok:
        return False, f"Ready={cond.get('status')}: {message or cond.get('reason')}"
    if at_revision is not None and revision(obj) != at_revision:
        return False, f"at {revision(obj) or 'no revision'}, not {at_revision}"
    return True, message or "Ready"


def handled(obj: Obj, token: str, *, at_revision: str | None = None) -> tuple[bool, str]:
    """Whether a reconcile request ``token`` is done as ``flux reconcile`` waits for it:
    ``status.lastHandledReconcileAt == token``, then :func:`ready` (at ``at_revision``)."""
    last = (obj.get("status") or {}).get("lastHandledReconcileAt")
    if last != token:
        return False, f"reconcile requested at {token} not handled yet"
    return object_ready(obj, at_revision=at_revision)


def reconcile_and_wait(
    kube: Kube,
    ref: ResourceRef,
    *,
    name: str,
    namespace: str,
    token: str | None = None,
    at_revision: str | None = None,
    timeout: float = 300.0,
    poll: float = 2.0,
) -> Obj:
    """``flux reconcile``: request a reconcile (unless ``token`` names one already made), then
    read the object every ``poll`` seconds (the CLI's 2 s) until :func:`handled`; returns it.

    Raises:
        KubeError: NotFound; reason ``Suspended`` (as the CLI refuses); ``Timeout`` after
            ``timeout`` seconds; ``Failed`` when the request was handled at the current
            generation but Ready is False.
    """
    if token is None:
        current = kube.get(ref, name=name, namespace=namespace)
        if (current.get("spec") or {}).get("suspend") is True:
            # reconcile.go refuses a suspended object.
            raise KubeError(
                f"{ref.describe(name, namespace)}: resource is suspended", reason="Suspended"
            )
        token = request_reconcile(kube, ref, name=name, namespace=namespace)

    def done(obj: Obj) -> bool:
        ok, why = handled(obj, token, at_revision=at_revision)
        status = obj.get("status") or {}
        current = int(status.get("observedGeneration") or 0) == int(
            obj["metadata"].get("generation") or 0
        )
        handled_now = status.get("lastHandledReconcileAt") == token and current
        cond, _ = ready_condition(obj)
        if not ok and handled_now and (cond or {}).get("status") == "False":
            raise KubeError(
                f"{ref.describe(name, namespace)}: reconciliation failed: {why}", reason="Failed"
            )
        return ok

    return kube.wait(ref, name=name, namespace=namespace, until=done, timeout=timeout, poll=poll)
