"""Finding a repository's own Flux roots, so the twin starts it as its cluster does.

The roots are :func:`gpushift.gitops.cluster_roots`' (check's walk starts there too):

* ``flux bootstrap``: ``clusters/<name>/flux-system/gotk-sync.yaml`` holds the GitRepository
  and the root Kustomization (``flux-system``, path ``./clusters/<name>``);
* the older cluster templates: ``kubernetes/flux/config/cluster.yaml`` holds the
  GitRepository (``home-kubernetes``) and ``cluster``, which syncs the directory it is in;
* the cluster templates (onedr0p/cluster-template and the home-ops repositories built on it):
  the Kustomizations of ``kubernetes/flux/cluster/*.yaml`` (``cluster-apps`` …), with their
  ``patches``, ``postBuild`` and ``sourceRef``; the GitRepository they name is made by the
  flux-operator's FluxInstance, so the twin makes it.

Pure: reading files and choosing; :func:`gpushift_twin.flux.bootstrap` creates the objects.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from gpushift.common import Obj, UsageError
from gpushift.flux import read_tree
from gpushift.gitops import ClusterRoots, cluster_roots
from gpushift_twin.flux._placeholders import decrypted

#: The twin's bootstrap owns these objects; kustomize-controller leaves them alone when the
#: repository applies them again (gotk-sync.yaml is inside its own root's path).
RECONCILE_DISABLED = {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}


@dataclass(frozen=True, slots=True)
class Roots:
    """What the twin bootstraps: the GitRepository and the root Kustomizations.

    ``origin`` is the repository-relative file the roots came from, or ``None`` for the
    synthetic root (one Kustomization for ``--root``). ``variables`` are the ConfigMaps and
    Secrets the roots substitute from, applied by hand before them as the cluster's own
    bootstrap does (a SOPS Secret with placeholder values).
    """

    git: Obj
    kustomizations: tuple[Obj, ...]
    origin: str | None
    variables: tuple[Obj, ...] = ()

    @property
    def synthetic(self) -> bool:
        """Whether the twin made the root up (the repository has none of its own)."""
        return self.origin is None


def _git(name: str, namespace: str, directory: Path, base: Obj | None = None) -> Obj:
    spec = dict((base or {}).get("spec") or {})
    # A local directory stands in for the remote; credentials and the remote's ref go
    # (the twin checks out the directory's own HEAD unless git-set says otherwise).
    for key in ("secretRef", "ref", "verify", "proxySecretRef", "provider"):
        spec.pop(key, None)
    spec["url"] = f"file://{directory.resolve()}"
    spec.setdefault("interval", "1h")
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(RECONCILE_DISABLED)},
        "spec": spec,
    }


def _own(ks: Obj) -> Obj:
    out = copy.deepcopy(ks)
    meta = out.setdefault("metadata", {})
    meta.setdefault("namespace", "flux-system")
    meta["annotations"] = {**(meta.get("annotations") or {}), **RECONCILE_DISABLED}
    for key in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
        meta.pop(key, None)
    out.pop("status", None)
    return out


def synthetic_root(directory: Path, *, path: str) -> Roots:
    """The root ``flux bootstrap`` would leave for ``path``: GitRepository and Kustomization
    ``flux-system/cluster-apps``, both named as the twin has always named them."""
    ks: Obj = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "cluster-apps", "namespace": "flux-system"},
        "spec": {
            "interval": "30m",
            "path": path,
            "prune": True,
            "wait": False,
            "sourceRef": {"kind": "GitRepository", "name": "flux-system"},
        },
    }
    git = _git("flux-system", "flux-system", directory)
    git["metadata"].pop("annotations")
    return Roots(git=git, kustomizations=(ks,), origin=None)


def find_roots(directory: Path, *, root: str | None = None) -> Roots | None:
    """The repository's own roots, or ``None`` when it has none (then the caller uses
    :func:`synthetic_root`). They are the roots check starts from
    (:func:`gpushift.gitops.cluster_roots`). ``root`` (``--root``) chooses among several
    bootstrapped clusters.

    Raises ``UsageError`` when several clusters are bootstrapped and ``root`` names none of
    them.
    """
    tree = read_tree(directory, [directory])[0]
    found = cluster_roots(tree)
    if not found:
        return None
    if len(found) > 1:
        names = [_cluster_name(r) for r in found]
        wanted = [r for r in found if root and Path(root).name == _cluster_name(r)]
        if len(wanted) != 1:
            raise UsageError(
                f"the repository bootstraps {len(found)} clusters ({', '.join(names)}): "
                "choose one with --root ./clusters/<name>"
            )
        found = wanted
    chosen = found[0]
    kss = [d.data for d in chosen.kustomizations]
    ref = (kss[0].get("spec") or {}).get("sourceRef") or {}
    ns = str((kss[0].get("metadata") or {}).get("namespace") or "flux-system")
    return Roots(
        git=_git(
            str(ref.get("name") or "flux-system"),
            str(ref.get("namespace") or ns),
            directory,
            chosen.git.data if chosen.git is not None else None,
        ),
        kustomizations=tuple(_own(k) for k in kss),
        origin=chosen.origin,
        variables=tuple(_by_hand(d.data, namespace=ns) for d in chosen.variables),
    )


def _by_hand(obj: Obj, *, namespace: str) -> Obj:
    # `kubectl apply -f kubernetes/flux/vars/...` (after `sops --decrypt` for a Secret).
    out = decrypted(obj) if "sops" in obj else copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta.setdefault("namespace", namespace)
    return out


def _cluster_name(roots: ClusterRoots) -> str:
    # clusters/<name>/flux-system/gotk-sync.yaml names its cluster two directories up.
    path = Path(roots.origin)
    return path.parent.parent.name if roots.layout == "bootstrap" else roots.origin
