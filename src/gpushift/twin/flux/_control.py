"""Driving the twin's Flux from outside through the API: switching the GitRepository (the
"merge") and waiting until every Kustomization and HelmRelease is Ready."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpushift.flux import REQUESTED_AT, ready
from gpushift.kube import Kube, ResourceRef

_GIT = ResourceRef.named("GitRepository", "source.toolkit.fluxcd.io/v1")
_KS = ResourceRef.named("Kustomization", "kustomize.toolkit.fluxcd.io/v1")
_HR = ResourceRef.named("HelmRelease", "helm.toolkit.fluxcd.io/v2")
_HEX = re.compile(r"^[0-9a-f]{7,40}$")


def git_set(
    kube: Kube, target: str, *, name: str = "flux-system", namespace: str = "flux-system"
) -> str:
    """Point the GitRepository at a directory (``url: file://…``) or at a ref of its local git
    repository (a hex commit, else a branch), and request a reconcile; returns the new spec
    as one line. Raises ``KubeError``."""
    path = Path(target)
    spec: dict[str, Any]
    if path.is_dir():
        spec = {"url": f"file://{path.resolve()}", "ref": None}
    elif _HEX.match(target):
        spec = {"ref": {"commit": target, "branch": None, "tag": None, "name": None}}
    else:
        spec = {"ref": {"branch": target, "commit": None, "tag": None, "name": None}}
    token = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    kube.patch(
        _GIT,
        name=name,
        namespace=namespace,
        patch={"metadata": {"annotations": {REQUESTED_AT: token}}, "spec": spec},
    )
    shown = spec.get("url") or next(f"{k}={v}" for k, v in (spec["ref"] or {}).items() if v)
    return f"GitRepository/{namespace}/{name} now at {shown}"


def _pending_request(obj: dict[str, Any]) -> bool:
    token = (obj["metadata"].get("annotations") or {}).get(REQUESTED_AT)
    return token is not None and token != (obj.get("status") or {}).get("lastHandledReconcileAt")


def not_ready(kube: Kube) -> list[str]:
    """What is not settled, as ``Kind/namespace/name: message``: sources, Kustomizations and
    HelmReleases that are not suspended and not Ready at their current generation, have a
    reconcile request not yet handled, or (Kustomizations) have not applied their source's
    current revision."""
    out: list[str] = []
    revisions: dict[tuple[str, str, str], str] = {}
    for ref, kind in ((_GIT, "GitRepository"), (_KS, "Kustomization"), (_HR, "HelmRelease")):
        for obj in kube.list(ref):
            meta = obj["metadata"]
            spec = obj.get("spec") or {}
            if kind == "GitRepository":
                artifact = (obj.get("status") or {}).get("artifact") or {}
                key = (kind, str(meta.get("namespace")), str(meta["name"]))
                revisions[key] = str(artifact.get("revision", ""))
            if spec.get("suspend") is True:
                continue
            ok, message = ready(obj)
            if ok and _pending_request(obj):
                ok, message = False, "reconcile requested"
            if ok and kind == "Kustomization":
                src = spec.get("sourceRef") or {}
                key = (
                    str(src.get("kind") or "GitRepository"),
                    str(src.get("namespace") or meta.get("namespace")),
                    str(src.get("name")),
                )
                want = revisions.get(key)
                have = (obj.get("status") or {}).get("lastAppliedRevision")
                if want and have != want:
                    ok, message = False, f"revision {want} not applied yet"
            if not ok:
                what = message or "not reconciled yet"
                out.append(f"{kind}/{meta.get('namespace')}/{meta['name']}: {what}")
    return out


def wait_ready(kube: Kube, *, timeout: float, poll: float = 1.0) -> list[str]:
    """Poll until :func:`not_ready` is empty (and at least one Kustomization exists) or
    ``timeout`` wall seconds pass; returns what is still not Ready."""
    deadline = time.monotonic() + timeout
    while True:
        pending = not_ready(kube)
        if not pending and kube.list(_KS):
            return []
        if time.monotonic() >= deadline:
            return pending or ["no Kustomization yet"]
        time.sleep(poll)
