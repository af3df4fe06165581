"""What the twin's kustomize-controller applies from a repository, without a server.

``twin_applies`` runs the functions the twin runs, in its order: the roots its bootstrap
makes (``find_roots``, else the synthetic root; the sources and variables ``bootstrap``
creates beside them), then, per Kustomization, the build of its source revision
(``build``), Flux's overlay (``transform``), substitution when ``spec.postBuild`` is set
(``substitute_objects``, variables looked up among what is applied, as ``_variables`` does in
the store), the placeholder Secrets (``with_placeholders``), and the apply's refusal of an
object without a namespace (from the repository's own roots; under a synthetic root the
API server's ``default`` takes it). A Kustomization waits for its ``dependsOn`` (one the repository
does not define is passed, as the lenient twin passes it) and for its ``substituteFrom``
objects; one that fails, or reads a source the twin does not serve, applies nothing.

The result is the identity of every object applied, as ``Repo.deployed()`` writes it; the
twin's own inventions (the synthetic root, the Secrets it makes for ExternalSecrets) are
left out.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gpushift.flux import read_tree, secret_values
from gpushift.gitops import is_flux_kustomization, namespaced, own_sources
from gpushift_twin.flux._build import BuildError, build, substitute_objects, transform
from gpushift_twin.flux._placeholders import PLACEHOLDER_ANNOTATION, with_placeholders
from gpushift_twin.flux._roots import find_roots, synthetic_root

Ident = tuple[str, str, str | None, str]


def ident(obj: dict[str, Any]) -> Ident:
    meta = obj.get("metadata") or {}
    api, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    ns = meta.get("namespace") if namespaced(api, kind) else None
    return (api, kind, ns, str(meta.get("name")))


def _key(ks: dict[str, Any]) -> tuple[str, str]:
    meta = ks["metadata"]
    return (str(meta.get("namespace") or "flux-system"), str(meta["name"]))


def twin_applies(directory: Path) -> dict[Ident, dict[str, Any]]:
    """Every object the twin's kustomize-controller applies from ``directory``."""
    roots = find_roots(directory)
    synthetic = roots is None
    if roots is None:
        path = "./kubernetes/apps" if (directory / "kubernetes/apps").is_dir() else "./"
        roots = synthetic_root(directory, path=path)
    git = roots.git["metadata"]
    sources = {(git["namespace"], git["name"])}
    sources.update(own_sources(read_tree(directory, [directory])[0]))
    applied: dict[Ident, dict[str, Any]] = {}
    if not synthetic:
        applied.update((ident(k), k) for k in roots.kustomizations)
    applied.update((ident(v), v) for v in roots.variables)
    pending = [copy.deepcopy(k) for k in roots.kustomizations]
    known = {_key(k) for k in pending}
    done: dict[tuple[str, str], bool] = {}  # Kustomization -> applied
    progress = True
    while progress:
        progress = False
        waiting = []
        for ks in pending:
            key = _key(ks)
            if key in done:
                continue
            outcome = _reconcile(directory, ks, applied, sources, done, known, whole=not synthetic)
            if outcome is None:
                waiting.append(ks)
                continue
            progress = True
            done[key], objects = outcome
            for obj in objects:
                meta = obj.get("metadata") or {}
                made = str((meta.get("annotations") or {}).get(PLACEHOLDER_ANNOTATION, ""))
                if made.startswith("ExternalSecret"):
                    continue  # the twin's stand-in for external-secrets' controller
                applied[ident(obj)] = obj
                if is_flux_kustomization(obj) and _key(obj) not in known:
                    known.add(_key(obj))
                    waiting.append(obj)
        pending = waiting
    return applied


def _reconcile(
    directory: Path,
    ks: dict[str, Any],
    applied: dict[Ident, dict[str, Any]],
    sources: set[tuple[str, str]],
    done: dict[tuple[str, str], bool],
    known: set[tuple[str, str]],
    *,
    whole: bool,
) -> tuple[bool, list[dict[str, Any]]] | None:
    """Whether ``ks`` becomes Ready and the objects it applies (none when it fails), or
    ``None`` while it waits (a dependency or a substituteFrom object not there yet)."""
    namespace, _ = _key(ks)
    spec = ks.get("spec") or {}
    if spec.get("suspend") is True:
        return False, []
    ref = spec.get("sourceRef") or {}
    if ref.get("name"):
        if (ref.get("kind") or "GitRepository") != "GitRepository":
            return False, []  # no artifact without a network
        if (str(ref.get("namespace") or namespace), str(ref["name"])) not in sources:
            return True, []  # another repository: assumed healthy, nothing applied
    for dep in spec.get("dependsOn") or []:
        dep_key = (str(dep.get("namespace") or namespace), str(dep.get("name")))
        if dep_key in done:
            if not done[dep_key]:
                return None  # never Ready
        elif dep_key in known:
            return None
    variables: dict[str, str] = {}
    post = spec.get("postBuild")
    if isinstance(post, dict):
        for r in post.get("substituteFrom") or []:
            kind = str(r.get("kind") or "ConfigMap")
            found = applied.get(("v1", kind, namespace, str(r.get("name"))))
            if found is None:
                if r.get("optional") is True:
                    continue
                return None
            if kind == "Secret":
                variables.update(secret_values(found))
            else:
                variables.update({str(k): str(v) for k, v in (found.get("data") or {}).items()})
        variables.update({str(k): str(v) for k, v in (post.get("substitute") or {}).items()})
    try:
        objects = build(
            directory,
            str(spec.get("path") or "./"),
            revision="deployment-model",
            lenient=True,
            components=[c for c in spec.get("components") or [] if isinstance(c, str)],
            ignore_missing_components=spec.get("ignoreMissingComponents") is True,
        )
        objects = transform(objects, spec)
        if isinstance(post, dict):
            objects = substitute_objects(objects, variables)
        objects = with_placeholders(objects)
    except BuildError:
        return False, []
    unplaced = [
        o
        for o in objects
        if namespaced(str(o.get("apiVersion", "")), str(o.get("kind", "")))
        and not (o.get("metadata") or {}).get("namespace")
    ]
    if unplaced and whole:
        return False, []  # "<Kind>/<name> namespace not specified": the whole apply fails
    for o in unplaced:
        o.setdefault("metadata", {})["namespace"] = "default"  # a partial tree's root
    return True, objects
