"""source-controller in the twin: a GitRepository backed by a local directory (or a git ref of
a local repository), and OCIRepository/HelmRepository that are Ready without network."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpushift.common import GitError, Obj, by_kind, git, tree_digest, unpack_revision
from gpushift.common import as_dict as d
from gpushift.flux import REQUESTED_AT, Artifact, duration, observed, set_condition
from gpushift_twin.apiserver import ApiError, Store


class SourceError(Exception):
    """The source's directory or ref cannot be read; ``str()`` is the status message."""


def local_path(url: str) -> Path:
    """The directory of a ``file://`` URL (or a plain path)."""
    return Path(url[len("file://") :] if url.startswith("file://") else url)


def _git(root: Path, *args: str) -> str:
    try:
        return git(*args, cwd=root).decode().strip()
    except GitError as err:
        raise SourceError(str(err)) from None


def is_remote(spec: Obj) -> bool:
    """Whether a GitRepository spec points at a remote repository (not ``file://``)."""
    url = str(spec.get("url") or "")
    return not url.startswith("file://") and not url.startswith("/") and bool(url)


@dataclass(slots=True)
class Sources:
    """Artifacts of the GitRepositories: where each revision's files are."""

    store: Store
    #: Virtual seconds now, and now as RFC 3339.
    now: Callable[[], float]
    stamp: Callable[[], str]
    artifacts: dict[tuple[str, str], Path] = field(default_factory=dict)
    #: A GitRepository on a remote url (the twin has no network) is Ready without an
    #: artifact, "assumed healthy", instead of failing (whole repositories, lenient runs).
    assume_remote: bool = False
    _due: dict[str, float] = field(default_factory=dict)
    _checkouts: dict[str, Path] = field(default_factory=dict)
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        """Remove checked-out revisions."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _checkout(self, root: Path, *, commit: str) -> Path:
        if commit in self._checkouts:
            return self._checkouts[commit]
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gpushift-twin-git-")
        dest = Path(self._tmp.name, commit)
        dest.mkdir(parents=True, exist_ok=True)
        try:
            unpack_revision(dest, repo=root, rev=commit)
        except GitError as err:
            raise SourceError(err.stderr) from None
        self._checkouts[commit] = dest
        return dest

    def resolve(self, spec: Obj) -> tuple[str, Path]:
        """The revision (``<ref>@sha1:<hex>``) and directory a GitRepository spec points at."""
        root = local_path(str(spec.get("url") or ""))
        if not root.is_dir():
            raise SourceError(
                f"failed to checkout and determine revision: {root}: no such directory"
            )
        ref = d(spec.get("ref"))
        is_git = (root / ".git").exists()
        if not is_git:
            if ref.get("commit") or ref.get("tag") or ref.get("name"):
                raise SourceError(
                    f"failed to checkout and determine revision: {root} is not a git repository"
                )
            return f"{ref.get('branch') or 'main'}@sha1:{tree_digest(root)}", root
        if ref.get("commit"):
            commit = _git(root, "rev-parse", "--verify", f"{ref['commit']}^{{commit}}")
            label = f"{ref['branch']}@" if ref.get("branch") else ""
        elif ref.get("tag"):
            commit = _git(root, "rev-parse", "--verify", f"{ref['tag']}^{{commit}}")
            label = f"{ref['tag']}@"
        elif ref.get("name"):
            commit = _git(root, "rev-parse", "--verify", f"{ref['name']}^{{commit}}")
            label = f"{ref['name']}@"
        else:
            branch = str(ref.get("branch") or _git(root, "rev-parse", "--abbrev-ref", "HEAD"))
            commit = _git(root, "rev-parse", "--verify", f"{branch}^{{commit}}")
            label = f"{branch}@"
        return f"{label}sha1:{commit}", self._checkout(root, commit=commit)

    def sync(self) -> float | None:
        """Reconcile every source that is due; returns the next due time."""
        due: float | None = None
        now = self.now()
        for plural in ("gitrepositories", "ocirepositories", "helmrepositories"):
            try:
                kind = self.store.kind_for("source.toolkit.fluxcd.io", "v1", plural)
            except ApiError:
                continue
            for obj in self.store.list(kind).objects:
                meta = obj["metadata"]
                key = f"{plural}/{meta.get('namespace')}/{meta['name']}"
                st = d(obj.get("status"))
                spec = d(obj.get("spec"))
                requested = d(meta.get("annotations")).get(REQUESTED_AT)
                fresh = (
                    int(st.get("observedGeneration") or 0) != int(meta.get("generation") or 1)
                    or (requested is not None and requested != st.get("lastHandledReconcileAt"))
                    or now >= self._due.get(key, 0.0)
                )
                if spec.get("suspend") is True or meta.get("deletionTimestamp"):
                    continue
                if fresh:
                    ok = self._reconcile(kind.kind, obj)
                    interval = duration(spec.get("interval"), 600.0)
                    self._due[key] = now + interval
                    if not ok:
                        self._due[key] = now + min(interval, 60.0)
                nxt = self._due[key]
                due = nxt if due is None else min(due, nxt)
        return due

    def _reconcile(self, kind: str, obj: Obj) -> bool:
        meta = obj["metadata"]
        spec = d(obj.get("spec"))
        ns = str(meta.get("namespace") or "default")
        gen = int(meta.get("generation") or 1)
        stamp = self.stamp()
        ok = True
        artifact: Artifact | None = None
        if kind == "GitRepository" and self.assume_remote and is_remote(spec):
            message, reason = (
                f"assumed healthy: GitRepository {spec.get('url')} is not modelled "
                "(the twin has no network): no artifact",
                "Succeeded",
            )
        elif kind == "GitRepository":
            try:
                revision, path = self.resolve(spec)
            except SourceError as err:
                ok, message, reason = False, str(err), "GitOperationFailed"
            else:
                self.artifacts[(ns, meta["name"])] = path
                digest = hashlib.sha256(revision.encode()).hexdigest()
                artifact = {
                    "path": f"gitrepository/{ns}/{meta['name']}/{digest[:40]}.tar.gz",
                    "url": f"http://source-controller.flux-system.svc.cluster.local./gitrepository/{ns}/{meta['name']}/{digest[:40]}.tar.gz",
                    "revision": revision,
                    "digest": f"sha256:{digest}",
                    "lastUpdateTime": stamp,
                }
                message, reason = f"stored artifact for revision '{revision}'", "Succeeded"
        elif kind == "OCIRepository":
            url = str(spec.get("url") or "")
            ref = d(spec.get("ref"))
            tag = str(ref.get("tag") or ref.get("semver") or "latest")
            digest = str(
                ref.get("digest") or "sha256:" + hashlib.sha256(f"{url}:{tag}".encode()).hexdigest()
            )
            revision = f"{tag}@{digest}"
            artifact = {
                "path": f"ocirepository/{ns}/{meta['name']}/{digest.split(':')[-1][:40]}.tar.gz",
                "url": f"http://source-controller.flux-system.svc.cluster.local./ocirepository/{ns}/{meta['name']}/{digest.split(':')[-1][:40]}.tar.gz",
                "revision": revision,
                "digest": digest,
                "lastUpdateTime": stamp,
                "metadata": {"org.opencontainers.image.source": url},
            }
            message, reason = f"stored artifact for digest '{revision}'", "Succeeded"
        else:
            digest = "sha256:" + hashlib.sha256(str(spec.get("url") or "").encode()).hexdigest()
            if spec.get("type") == "oci":
                artifact = None
                message, reason = "Helm repository is Ready", "Succeeded"
            else:
                artifact = {
                    "path": f"helmrepository/{ns}/{meta['name']}/index-{digest[7:47]}.yaml",
                    "url": f"http://source-controller.flux-system.svc.cluster.local./helmrepository/{ns}/{meta['name']}/index-{digest[7:47]}.yaml",
                    "revision": digest,
                    "digest": digest,
                    "lastUpdateTime": stamp,
                }
                message, reason = f"stored artifact: revision '{digest}'", "Succeeded"
        record = observed(obj)

        def put(cur: Obj) -> Obj:
            st = d(cur.get("status"))
            record(st)
            if artifact is not None:
                old = d(st.get("artifact"))
                if old.get("revision") == artifact["revision"]:
                    artifact["lastUpdateTime"] = old.get("lastUpdateTime", stamp)
                st["artifact"] = artifact
            set_condition(
                st,
                type_="Ready",
                state="True" if ok else "False",
                reason=reason,
                message=message,
                generation=gen,
                now=stamp,
            )
            if kind != "HelmRepository" or artifact is not None:
                set_condition(
                    st,
                    type_="ArtifactInStorage",
                    state="True" if artifact is not None else "False",
                    reason="Succeeded" if artifact is not None else reason,
                    message=message,
                    generation=gen,
                    now=stamp,
                )
            cur["status"] = st
            return cur

        self.store.update(
            by_kind(kind),
            name=meta["name"],
            namespace=ns,
            mutate=put,
            subresource="status",
            manager="source-controller",
        )
        return ok
