"""Flux semantics gpushift needs outside the twin.

The client-side operations, as the flux CLI performs them over the API: suspend, resume,
request a reconcile, and the checks its waits use (the reconcile handshake and Ready at a
generation and revision)::

    token = request_reconcile(kube, KUSTOMIZATION, name="apps", namespace="flux-system")
    reconcile_and_wait(kube, KUSTOMIZATION, name="apps", namespace="flux-system", token=token)
"""

from __future__ import annotations

from gpushift.flux._client import (
    GITREPOSITORY,
    HELMRELEASE,
    KUSTOMIZATION,
    REQUESTED_AT,
    handled,
    new_token,
    ready,
    reconcile_and_wait,
    request_reconcile,
    resume,
    revision,
    suspend,
)

__all__ = [
    "GITREPOSITORY",
    "HELMRELEASE",
    "KUSTOMIZATION",
    "REQUESTED_AT",
    "handled",
    "new_token",
    "ready",
    "reconcile_and_wait",
    "request_reconcile",
    "resume",
    "revision",
    "suspend",
]
