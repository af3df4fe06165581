"""Driving the twin's Flux from outside through the API: switching the GitRepository (the
"merge") and waiting until every Kustomization and HelmRelease is Ready."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from gpushift.common import InputError
from gpushift.flux import REQUESTED_AT, ready
from gpushift.kube import Kube, ResourceRef
from gpushift_twin.flux._sources import local_path

_GIT = ResourceRef.named("GitRepository", "source.toolkit.fluxcd.io/v1")
_KS = ResourceRef.named("Kustomization", "kustomize.toolkit.fluxcd.io/v1")
_HR = ResourceRef.named("HelmRelease", "helm.toolkit.fluxcd.io/v2")
_HEX = re.compile(r"^[0-9a-f]{7,40}$")


def _flux_tree(root: Path, *, limit: int = 2000) -> bool:
    """Whether a directory holds a Flux tree: a kustomization.yaml or a toolkit.fluxcd.io
    object in one of its first ``limit`` YAML files (``.git`` skipped)."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(n for n in dirnames if n != ".git")
        for name in sorted(filenames):
            if name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
                return True
            if not name.endswith((".yaml", ".yml")):
                continue
            seen += 1
            if seen > limit:
                return False
            try:
                text = Path(dirpath, name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if "toolkit.fluxcd.io/" in text:
                return True
    return False


def git_set(
    kube: Kube, target: str, *, name: str = "flux-system", namespace: str = "flux-system"
) -> str:
    """Point the GitRepository at a directory (``url: file://…``) or at a ref of its local git
    repository (a hex commit, else a branch), and request a reconcile; returns the new spec
    as one line.

    The target is validated before anything changes: a directory must hold a Flux tree, and a
    ref must resolve to a commit in the repository the GitRepository's ``spec.url`` names.

    Raises:
        InputError: no such directory, not a Flux tree, or a ref that does not exist (exit 2).
        KubeError: the GitRepository cannot be read or patched.
    """
    path = Path(target).expanduser()
    spec: dict[str, Any]
    if path.is_dir():
        if not _flux_tree(path):
            raise InputError(
                "not a Flux tree: no kustomization.yaml and no toolkit.fluxcd.io object",
                path=str(path),
            )
        spec = {"url": f"file://{path.resolve()}", "ref": None}
    elif path.exists() or target.startswith((".", "~", "/")):
        raise InputError("no such directory", path=target)
    else:
        current = kube.get(_GIT, name=name, namespace=namespace)
        root = local_path(str((current.get("spec") or {}).get("url") or ""))
        if not (root / ".git").exists():
            raise InputError(
                f"GitRepository/{namespace}/{name} serves {root}, which is not a git "
                f"repository: {target!r} is neither a directory nor a ref there"
            )
        found = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{target}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if found.returncode != 0:
            raise InputError(f"no commit or branch {target!r} in {root}")
        if _HEX.match(target):
            spec = {"ref": {"commit": target, "branch": None, "tag": None, "name": None}}
        else:
            spec = {"ref": {"branch": target, "commit": None, "tag": None, "name": None}}
    token = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    moved = [(namespace, name), *_aliases(kube, name=name, namespace=namespace)]
    for ns, alias in moved:
        kube.patch(
            _GIT,
            name=alias,
            namespace=ns,
            patch={"metadata": {"annotations": {REQUESTED_AT: token}}, "spec": spec},
        )
    shown = spec.get("url") or next(f"{k}={v}" for k, v in (spec["ref"] or {}).items() if v)
    also = "".join(f", GitRepository/{ns}/{alias}" for ns, alias in moved[1:])
    return f"GitRepository/{namespace}/{name}{also} now at {shown}"


def _aliases(kube: Kube, *, name: str, namespace: str) -> list[tuple[str, str]]:
    """The other GitRepositories that serve the same checkout as ``namespace/name`` (the same
    ``spec.url`` and ``spec.ref``): the twin points every source a repository calls itself
    (``flux-system`` and, say, ``home-kubernetes``) at one directory, so a merge moves them
    together, as pushing to the one remote would."""
    current = kube.get(_GIT, name=name, namespace=namespace)
    spec = current.get("spec") or {}
    out = []
    for other in kube.list(_GIT):
        meta, theirs = other["metadata"], other.get("spec") or {}
        if (meta.get("namespace"), meta["name"]) == (namespace, name):
            continue
        if theirs.get("url") == spec.get("url") and theirs.get("ref") == spec.get("ref"):
            out.append((str(meta.get("namespace")), str(meta["name"])))
    return sorted(out)


def _pending_request(obj: dict[str, Any]) -> bool:
    token = (obj["metadata"].get("annotations") or {}).get(REQUESTED_AT)
    return token is not None and token != (obj.get("status") or {}).get("lastHandledReconcileAt")


class NotReady(NamedTuple):
    """One Flux object that has not settled, and what its Ready condition says it waits for."""

    kind: str
    namespace: str
    name: str
    message: str

    def line(self) -> str:
        """``Kind/namespace/name: message``, as :func:`not_ready` lists it."""
        return f"{self.kind}/{self.namespace}/{self.name}: {self.message}"


def not_ready_objects(kube: Kube) -> list[NotReady]:
    """What is not settled: sources, Kustomizations and HelmReleases that are not suspended
    and not Ready at their current generation, have a reconcile request not yet handled, or
    (Kustomizations) have not applied their source's current revision; each with its Ready
    condition's message (``not reconciled yet`` before it has one)."""
    out: list[NotReady] = []
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
                out.append(NotReady(kind, str(meta.get("namespace")), str(meta["name"]), what))
    return out


def not_ready(kube: Kube) -> list[str]:
    """What is not settled (:func:`not_ready_objects`), as ``Kind/namespace/name: message``."""
    return [n.line() for n in not_ready_objects(kube)]


def wait_for_kubeconfig(
    paths: list[Path],
    *,
    deadline: float,
    on_pending: Callable[[list[str]], None] | None = None,
) -> bool:
    """Wait until one of ``paths`` exists (a ``twin serve`` started in the background writes
    its kubeconfig once it listens), until the monotonic ``deadline``; False when it passed.
    ``on_pending`` is told what is missing at each check."""
    while not any(p.exists() for p in paths):
        if time.monotonic() >= deadline:
            return False
        if on_pending is not None:
            on_pending([f"no kubeconfig yet at {', '.join(map(str, paths))}"])
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0.0)))
    return True


def wait_ready(
    kube: Kube,
    *,
    timeout: float,
    poll: float = 1.0,
    on_pending: Callable[[list[str]], None] | None = None,
) -> list[str]:
    """Poll until :func:`not_ready` is empty (and at least one Kustomization exists) or
    ``timeout`` wall seconds pass; returns what is still not Ready.

    ``on_pending`` is called with what is not Ready after every poll that finds something,
    so a caller can show progress. Never sleeps past the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        pending = not_ready(kube)
        if not pending and kube.list(_KS):
            return []
        pending = pending or ["no Kustomization yet"]
        if on_pending is not None:
            on_pending(pending)
        left = deadline - time.monotonic()
        if left <= 0:
            return pending
        time.sleep(min(poll, left))
