"""Finding a repository's own Flux roots, so the twin starts it as its cluster does.

Three layouts are recognised:

* ``flux bootstrap``: ``clusters/<name>/flux-system/gotk-sync.yaml`` holds the GitRepository
  and the root Kustomization (``flux-system``, path ``./clusters/<name>``);
* the cluster templates (onedr0p/cluster-template and the home-ops repositories built on it):
  the Kustomizations of ``kubernetes/flux/cluster/*.yaml`` (``cluster-apps`` …), with their
  ``patches``, ``postBuild`` and ``sourceRef``; the GitRepository they name is made by the
  flux-operator's FluxInstance, so the twin makes it;
* the older cluster templates: ``kubernetes/flux/config/cluster.yaml`` (the GitRepository,
  named after the repository, and the ``cluster`` Kustomization), else
  ``kubernetes/flux/apps.yaml`` (``cluster-apps`` and the GitRepository it names).

Pure: reading files and choosing; :func:`gpushift_twin.flux.bootstrap` creates the objects.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from gpushift import common
from gpushift.common import Obj, UsageError

_KS_API = "kustomize.toolkit.fluxcd.io/"
_GIT_API = "source.toolkit.fluxcd.io/"
#: The twin's bootstrap owns these objects; kustomize-controller leaves them alone when the
#: repository applies them again (gotk-sync.yaml is inside its own root's path).
RECONCILE_DISABLED = {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"}


@dataclass(frozen=True, slots=True)
class Roots:
    """What the twin bootstraps: the GitRepository and the root Kustomizations.

    ``origin`` is the repository-relative file the roots came from, or ``None`` for the
    synthetic root (one Kustomization for ``--root``).
    """

    git: Obj
    kustomizations: tuple[Obj, ...]
    origin: str | None

    @property
    def synthetic(self) -> bool:
        """Whether the twin made the root up (the repository has none of its own)."""
        return self.origin is None


def _docs(path: Path, root: Path) -> list[Obj]:
    rel = path.relative_to(root).as_posix()
    docs = common.expand_lists(common.read_file(path, display=rel))
    return [d.data for d in docs if isinstance(d.data, dict)]


def _is(obj: Obj, api: str, kind: str) -> bool:
    return str(obj.get("apiVersion", "")).startswith(api) and obj.get("kind") == kind


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


def _bootstrap_layout(directory: Path, *, root: str | None) -> Roots | None:
    found = sorted((directory / "clusters").glob("*/flux-system/gotk-sync.yaml"))
    if not found:
        return None
    if len(found) > 1:
        names = [p.parent.parent.name for p in found]
        wanted = [p for p in found if root and Path(root).name == p.parent.parent.name]
        if len(wanted) != 1:
            raise UsageError(
                f"the repository bootstraps {len(found)} clusters ({', '.join(names)}): "
                "choose one with --root ./clusters/<name>"
            )
        found = wanted
    return _sync_file(found[0], directory)


def _sync_file(path: Path, directory: Path) -> Roots | None:
    """The roots of one file holding the root Kustomizations and (maybe) the GitRepository
    the first of them reads, which the twin points at the directory."""
    docs = _docs(path, directory)
    gits = [o for o in docs if _is(o, _GIT_API, "GitRepository")]
    kss = [o for o in docs if _is(o, _KS_API, "Kustomization")]
    if not kss:
        return None
    ref = (kss[0].get("spec") or {}).get("sourceRef") or {}
    ns = str((kss[0].get("metadata") or {}).get("namespace") or "flux-system")
    name = str(ref.get("name") or "flux-system")
    base = next((g for g in gits if (g.get("metadata") or {}).get("name") == name), None)
    git_ns = str(ref.get("namespace") or ns)
    return Roots(
        git=_git(name, git_ns, directory, base),
        kustomizations=tuple(_own(k) for k in kss),
        origin=path.relative_to(directory).as_posix(),
    )


def _flux_folder_layout(directory: Path) -> Roots | None:
    """The older cluster templates: ``kubernetes/flux/config/cluster.yaml`` (the GitRepository
    of the repository's own name and the ``cluster`` Kustomization of ``./kubernetes/flux``),
    else ``kubernetes/flux/apps.yaml`` (``cluster-apps`` on a GitRepository it names)."""
    for rel in ("kubernetes/flux/config/cluster.yaml", "kubernetes/flux/apps.yaml"):
        path = directory / rel
        if path.is_file() and (roots := _sync_file(path, directory)) is not None:
            return roots
    return None


def _template_layout(directory: Path) -> Roots | None:
    folder = directory / "kubernetes" / "flux" / "cluster"
    if not folder.is_dir():
        return None
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".yaml", ".yml") or path.name.startswith("kustomization."):
            continue
        kss = [o for o in _docs(path, directory) if _is(o, _KS_API, "Kustomization")]
        if not kss:
            continue
        ref = (kss[0].get("spec") or {}).get("sourceRef") or {}
        ns = str((kss[0].get("metadata") or {}).get("namespace") or "flux-system")
        return Roots(
            git=_git(
                str(ref.get("name") or "flux-system"), str(ref.get("namespace") or ns), directory
            ),
            kustomizations=tuple(_own(k) for k in kss),
            origin=path.relative_to(directory).as_posix(),
        )
    return None


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
    :func:`synthetic_root`). ``root`` (``--root``) chooses among several bootstrapped clusters.

    Raises ``UsageError`` when several clusters are bootstrapped and ``root`` names none of
    them, ``InputError`` for a root file that is not YAML.
    """
    return (
        _bootstrap_layout(directory, root=root)
        or _template_layout(directory)
        or _flux_folder_layout(directory)
    )
