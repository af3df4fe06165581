"""The roots a cluster is synced from: where check's walk and the twin's bootstrap start.

A cluster is bootstrapped from outside its repository (``flux bootstrap``, ``kubectl apply``
of a config directory, flux-operator's FluxInstance), so nothing in the tree deploys its root.
Three layouts say which Kustomizations the cluster itself runs, in this order:

* ``bootstrap``: the ``flux-system`` Kustomization ``flux bootstrap`` writes
  (``clusters/<name>/flux-system/gotk-sync.yaml``), one set per file;
* ``self-sync``: a Kustomization whose path holds its own file and another Kustomization of
  the same source (the older cluster templates' ``kubernetes/flux/config/cluster.yaml``,
  ``cluster``, reading ``home-kubernetes``), applied once by hand and then syncing itself;
* ``flux-instance``: the Kustomizations in the directory flux-operator's FluxInstance syncs
  (``spec.sync.path``), or, without the FluxInstance in the tree, in the cluster templates'
  ``kubernetes/flux/cluster`` (``cluster-apps`` …).

A tree with none of these is partial: every Kustomization, HelmRelease or Application
nothing in it deploys is a root (``load_repo`` records them as ``Repo.taken_roots``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpushift.flux import Doc, KustomizeBuilder, Tree, norm

_FLUX_KS = "kustomize.toolkit.fluxcd.io/"
_SOURCE_KINDS = frozenset({"GitRepository", "OCIRepository", "Bucket"})
#: The source `flux bootstrap` (and the cluster templates) sync this repository from.
OWN_SOURCE = "flux-system"
#: Where the cluster templates keep the Kustomizations their FluxInstance syncs.
_TEMPLATE_DIR = "kubernetes/flux/cluster"

RootLayout = Literal["bootstrap", "self-sync", "flux-instance"]


@dataclass(frozen=True, slots=True)
class ClusterRoots:
    """One cluster's root Kustomizations (``kustomizations``, in file order), the file they
    are written in (``origin``), how they were found (``layout``), the GitRepository
    document their ``sourceRef`` names when the tree defines it (``git``), and for a
    FluxInstance the directory it syncs whole (``synced``).

    ``variables`` are the ConfigMaps and Secrets the roots' ``postBuild.substituteFrom``
    names that the tree defines: a root cannot build before they exist, so the bootstrap
    applies them by hand first (the cluster templates' ``kubernetes/flux/vars``).
    """

    kustomizations: tuple[Doc, ...]
    origin: str
    layout: RootLayout
    git: Doc | None
    synced: str | None = None
    variables: tuple[Doc, ...] = ()


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def is_flux_kustomization(data: Mapping[str, Any]) -> bool:
    """Whether ``data`` is a Flux Kustomization (not a kustomize one)."""
    return data.get("kind") == "Kustomization" and str(data.get("apiVersion", "")).startswith(
        _FLUX_KS
    )


def _source_of(data: Mapping[str, Any]) -> tuple[str, str]:
    ref = _dict(_dict(data.get("spec")).get("sourceRef"))
    return str(ref.get("kind", "GitRepository")), str(ref.get("name"))


def resolve_path(tree: Tree, path: str) -> str | None:
    """A Kustomization's ``spec.path`` (relative to the source root) as a directory of the
    tree: the checked directory may be below the source root, so leading components not in
    the tree are dropped until the rest is found. ``None``: not in the tree."""
    parts = norm(".", path).split("/")
    for i in range(len(parts)):
        cand = "/".join(parts[i:]) or "."
        if cand in tree.dirs or cand in tree.kustomizations:
            return cand
    return None


def foreign_sources(tree: Tree) -> frozenset[tuple[str, str]]:
    """(kind, name) of the Flux sources the tree defines for other repositories: every
    GitRepository, OCIRepository or Bucket but ``flux-system``, and but a source that is
    the tree's own (a Kustomization reading it holds another reading it in its path)."""
    defined = frozenset(
        (str(d.data.get("kind")), str(_dict(d.data.get("metadata")).get("name")))
        for docs in tree.docs.values()
        for d in docs
        # A kind that is not a string (a list, from hostile YAML) cannot be looked up in a set.
        if isinstance(d.data.get("kind"), str)
        and d.data["kind"] in _SOURCE_KINDS
        and str(d.data.get("apiVersion", "")).startswith("source.toolkit.fluxcd.io/")
        and _dict(d.data.get("metadata")).get("name") != OWN_SOURCE
    )
    if not defined:
        return defined
    return frozenset(s for s in defined if not _syncs_itself(tree, s))


def own_sources(tree: Tree) -> list[tuple[str, str]]:
    """``(namespace, name)`` of every GitRepository the tree's Flux Kustomizations read that
    is the tree itself: not one ``foreign_sources`` names (``flux-system``, a self-synced
    source, or one the tree does not define, as in a partial tree whose GitRepository is
    made by the bootstrap). Check builds their paths from this tree; so does the twin."""
    foreign = foreign_sources(tree)
    out: dict[tuple[str, str], None] = {}
    for _, docs in sorted(tree.docs.items()):
        for d in docs:
            if not is_flux_kustomization(d.data):
                continue
            ref = _dict(_dict(d.data.get("spec")).get("sourceRef"))
            kind, name = str(ref.get("kind", "GitRepository")), ref.get("name")
            if kind != "GitRepository" or not name or (kind, str(name)) in foreign:
                continue
            own_ns = _dict(d.data.get("metadata")).get("namespace") or "flux-system"
            out[(str(ref.get("namespace") or own_ns), str(name))] = None
    return list(out)


def _syncs_itself(tree: Tree, source: tuple[str, str]) -> bool:
    """Whether ``source`` is the tree's own repository under another name than flux-system
    (the older cluster templates' ``home-kubernetes``): a Kustomization reading it has a path
    that holds another Kustomization reading it, as a cluster root holds ``cluster-apps``.
    A fleet repository's Kustomization (``path: ./kubernetes`` of the other repository)
    holds at most itself."""
    readers: list[tuple[str, str]] = []  # (file, resolved directory)
    for docs in tree.docs.values():
        for d in docs:
            if not is_flux_kustomization(d.data) or _source_of(d.data) != source:
                continue
            directory = resolve_path(tree, str(_dict(d.data.get("spec")).get("path") or "."))
            readers.append((f"{d.rel}#{d.index}", directory or ""))
    if len(readers) < 2:
        return False
    files = sorted(f for f, _ in readers)
    for own, directory in readers:
        if not directory:
            continue
        prefix = "" if directory == "." else directory + "/"
        i = bisect.bisect_left(files, prefix)
        while i < len(files) and files[i].startswith(prefix):
            if files[i] != own:
                return True
            i += 1
    return False


def self_syncs(
    tree: Tree, builder: KustomizeBuilder, doc: Doc, *, foreign: frozenset[tuple[str, str]]
) -> bool:
    """Whether the Flux Kustomization ``doc`` syncs a directory of this tree that holds its
    own file and another Flux Kustomization: a cluster root that nothing above can include."""
    if _source_of(doc.data) in foreign:
        return False
    directory = resolve_path(tree, str(_dict(doc.data.get("spec")).get("path") or "."))
    if directory is None or directory == "." or not doc.rel.startswith(directory + "/"):
        return False
    own = (doc.rel, doc.index, doc.keys)
    return any(
        is_flux_kustomization(i.data) and (i.doc.rel, i.doc.index, i.doc.keys) != own
        for i in builder.build(directory)
    )


def _git_of(tree: Tree, kustomizations: list[Doc]) -> Doc | None:
    kind, name = _source_of(kustomizations[0].data)
    if kind != "GitRepository":
        return None
    same_file = [d for d in tree.docs.get(kustomizations[0].rel, ())]
    everywhere = [d for docs in tree.docs.values() for d in docs]
    for d in [*same_file, *everywhere]:
        if (
            d.data.get("kind") == "GitRepository"
            and str(d.data.get("apiVersion", "")).startswith("source.toolkit.fluxcd.io/")
            and _dict(d.data.get("metadata")).get("name") == name
        ):
            return d
    return None


def _variables(tree: Tree, kustomizations: list[Doc]) -> tuple[Doc, ...]:
    wanted: dict[tuple[str, str], str] = {}  # (kind, name) -> the reading root's namespace
    for k in kustomizations:
        namespace = str(_dict(k.data.get("metadata")).get("namespace") or "flux-system")
        post = _dict(_dict(k.data.get("spec")).get("postBuild"))
        for ref in post.get("substituteFrom") or []:
            if isinstance(ref, dict) and ref.get("name"):
                key = (str(ref.get("kind") or "ConfigMap"), str(ref["name"]))
                wanted.setdefault(key, namespace)
    if not wanted:
        return ()
    found: dict[tuple[str, str], Doc] = {}
    for _, docs in sorted(tree.docs.items()):
        for d in docs:
            meta = _dict(d.data.get("metadata"))
            key = (str(d.data.get("kind")), str(meta.get("name")))
            # One written in the reading root's namespace wins over one without.
            if (
                key in wanted
                and d.data.get("apiVersion") == "v1"
                and (key not in found or meta.get("namespace") == wanted[key])
            ):
                found[key] = d
    return tuple(found[k] for k in wanted if k in found)


def _roots(
    tree: Tree, docs: list[Doc], layout: RootLayout, synced: str | None = None
) -> ClusterRoots:
    return ClusterRoots(
        tuple(docs), docs[0].rel, layout, _git_of(tree, docs), synced, _variables(tree, docs)
    )


def cluster_roots(tree: Tree, *, builder: KustomizeBuilder | None = None) -> list[ClusterRoots]:
    """Every cluster's roots the tree holds, in the order of the module's layouts (the first
    layout found wins; a repository that bootstraps several clusters has one entry each).
    Empty: a partial tree, without a root of its own."""
    by_file: dict[str, list[Doc]] = {}
    for rel, docs in sorted(tree.docs.items()):
        for d in docs:
            if (
                is_flux_kustomization(d.data)
                and _dict(d.data.get("metadata")).get("name") == OWN_SOURCE
            ):
                by_file.setdefault(rel, []).append(d)
    if by_file:
        # gotk-sync.yaml: every Kustomization of the file is a root (the one flux-system).
        out = []
        for rel, found in by_file.items():
            kss = [d for d in tree.docs[rel] if is_flux_kustomization(d.data)]
            out.append(_roots(tree, kss or found, "bootstrap"))
        return out
    builder = builder or KustomizeBuilder(tree, read_text=tree.texts.get)
    foreign = foreign_sources(tree)
    selfs = [
        d
        for _, docs in sorted(tree.docs.items())
        for d in docs
        if is_flux_kustomization(d.data) and self_syncs(tree, builder, d, foreign=foreign)
    ]
    if selfs:
        return [_roots(tree, [d], "self-sync") for d in selfs]
    synced: list[str] = []
    for _, docs in sorted(tree.docs.items()):
        for d in docs:
            if d.data.get("kind") == "FluxInstance":
                path = _dict(_dict(d.data.get("spec")).get("sync")).get("path")
                directory = resolve_path(tree, str(path)) if path else None
                if directory is not None:
                    synced.append(directory)
    if not synced and _TEMPLATE_DIR in tree.dirs:
        synced.append(_TEMPLATE_DIR)
    out = []
    for directory in synced:
        kss = [i.doc for i in builder.build(directory) if is_flux_kustomization(i.data)]
        if kss:
            out.append(_roots(tree, kss, "flux-instance", directory))
    return out
