"""kustomize-controller's build: ``kubectl kustomize`` (or a built-in subset), Flux's generated
kustomization for directories without one, targetNamespace, commonMetadata, patches and
postBuild substitution."""

from __future__ import annotations

import copy
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from gpushift import common
from gpushift.common import Obj, die_with_parent, lookup
from gpushift.flux import (
    KUSTOMIZATION_FILES,
    KustomizeBuilder,
    apply_patch,
    parse_patches,
    patch_targets,
    read_tree,
    substitute,
)
from gpushift_twin.flux import _buildcache

_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
#: fluxcd/kustomize-controller: per-object opt-out of substitution.
SUBSTITUTE = "kustomize.toolkit.fluxcd.io/substitute"


class BuildError(Exception):
    """``kustomize build`` failed; ``str()`` is the error as Flux reports it."""


def kubectl() -> str | None:
    """The ``kubectl`` binary when installed."""
    return shutil.which("kubectl")


@functools.lru_cache(maxsize=8192)
def _resolved(path: Path) -> Path:
    # Every reconcile resolves the same few hundred paths; symlinks do not move meanwhile.
    return path.resolve()


def _has_kustomization(directory: Path) -> bool:
    return any((directory / n).is_file() for n in KUSTOMIZATION_FILES)


@functools.lru_cache(maxsize=512)
def _kubectl_build(directory: str, stamp: str, root: str) -> tuple[str, str | None]:
    # ``stamp`` (the revision) keys this cache; a new revision looks in the content cache.
    del stamp
    key = _buildcache.content_key(Path(directory), root=Path(root))
    return _keyed(key, lambda: _kubectl_kustomize(directory))


def _keyed(key: str | None, run: Callable[[], tuple[str, str | None]]) -> tuple[str, str | None]:
    # The output kept under ``key`` (None: not keyable), else ``run``'s, kept if it succeeded.
    if key is None:
        return run()
    if (hit := _buildcache.lookup(key)) is not None:
        return hit, None
    with _buildcache.claim(key):
        # Whoever held the claim before may have built it meanwhile.
        if (hit := _buildcache.lookup(key)) is not None:
            return hit, None
        text, err = run()
        if err is None:
            _buildcache.store(key, text)
        return text, err


def _kubectl_kustomize(directory: str) -> tuple[str, str | None]:
    binary = kubectl()
    assert binary is not None
    out = subprocess.run(
        [binary, "kustomize", "--load-restrictor=LoadRestrictionsNone", directory],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=die_with_parent(),  # this thread waits for it; a dead twin leaves none
    )
    if out.returncode != 0:
        return "", out.stderr.strip().removeprefix("error: ")
    return out.stdout, None


@functools.lru_cache(maxsize=4)
def _tree(root: Path, revision: str) -> Any:
    # One read of the whole source per revision, shared by every Kustomization built from it.
    del revision
    return read_tree(root, [root])[0]


def _builtin(root: Path, rel: str, revision: str | None = None) -> list[Obj]:
    tree = _tree(root, revision) if revision else read_tree(root, [root])[0]
    builder = KustomizeBuilder(tree, read_text=lambda r: tree.texts.get(r))
    out: list[Obj] = []
    for item in builder.build(rel):
        obj = copy.deepcopy(item.data)
        if item.namespace and obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1":
            # kustomize's namespace transformer renames Namespace objects too.
            obj.setdefault("metadata", {})["name"] = item.namespace
        elif item.namespace and _namespaced(obj):
            obj.setdefault("metadata", {})["namespace"] = item.namespace
        out.append(obj)
    return out


def _namespaced(obj: Obj) -> bool:
    kind = lookup(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    return kind.namespaced if kind is not None else True


def _manifests(directory: Path) -> list[Path]:
    # fluxcd/pkg kustomize generator: manifests below a directory without a kustomization,
    # stopping at subdirectories that have their own (those become resources).
    files: list[Path] = []
    for p in sorted(directory.iterdir()):
        if p.name.startswith("."):
            continue
        if p.is_file() and p.suffix in (".yaml", ".yml") and p.name not in KUSTOMIZATION_FILES:
            files.append(p)
        elif p.is_dir() and not _has_kustomization(p):
            files.extend(_manifests(p))
    return files


def _sub_kustomizations(directory: Path) -> list[Path]:
    out: list[Path] = []
    for p in sorted(directory.iterdir()):
        if p.is_dir() and not p.name.startswith("."):
            out.extend([p] if _has_kustomization(p) else _sub_kustomizations(p))
    return out


def _flux_paths(root: Path, objs: list[Obj]) -> set[Path]:
    """The directories the Flux Kustomizations among ``objs`` apply.

    In a partial checkout the kustomization files that list each app's ``ks.yaml`` are
    missing, and the generated build of the root would apply the apps' directories a second
    time, outside their namespaces; their own Kustomizations apply them, so it skips them.
    """
    out: set[Path] = set()
    for obj in objs:
        if obj.get("kind") == "Kustomization" and str(obj.get("apiVersion", "")).startswith(
            "kustomize.toolkit.fluxcd.io/"
        ):
            path = (obj.get("spec") or {}).get("path")
            if isinstance(path, str):
                out.add(_resolved(root / path))
    return out


def build_path(root: Path, path: str, *, revision: str, lenient: bool) -> list[Obj]:
    """The objects of ``path`` (relative to ``root``), as kustomize-controller builds them.

    Uses ``kubectl kustomize`` when installed, else the built-in subset; with ``lenient``
    (partial repositories) a failing kubectl build falls back to the subset, which skips
    references to files that are not there. Raises ``BuildError``.
    """
    directory = _resolved(root / path)
    try:
        directory.relative_to(_resolved(root))
    except ValueError:
        raise BuildError(f"path '{path}' is outside the source") from None
    if not directory.is_dir():
        raise BuildError(
            f"kustomization path not found: stat {directory}: no such file or directory"
        )
    rel = directory.relative_to(_resolved(root)).as_posix() or "."
    if kubectl() is None:
        return _builtin(root, rel, revision)
    if not _has_kustomization(directory):
        out: list[Obj] = []
        for f in _manifests(directory):
            out += [x for x in common.load_yaml_all(f.read_text()) if isinstance(x, dict)]
        applied = _flux_paths(root, out) if lenient else set()
        for sub in _sub_kustomizations(directory):
            if sub in applied:
                continue
            out += build_path(
                root,
                sub.relative_to(_resolved(root)).as_posix(),
                revision=revision,
                lenient=lenient,
            )
        return out
    text, err = _kubectl_build(str(directory), revision, str(_resolved(root)))
    if err is not None:
        if lenient:
            return _builtin(root, rel, revision)
        raise BuildError(f"kustomize build failed: {err}")
    # Freshly parsed, so the caller's own (a copy would keep shared aliases shared anyway).
    return [x for x in common.load_yaml_all(text) if isinstance(x, dict)]


def build(
    root: Path,
    path: str,
    *,
    revision: str,
    lenient: bool,
    components: list[str] | None = None,
    ignore_missing_components: bool = False,
) -> list[Obj]:
    """:func:`build_path` with a Kustomization's ``spec.components`` (paths relative to
    ``path``), added through an overlay as kustomize-controller adds them.

    Missing components are dropped with ``ignore_missing_components`` (or ``lenient``);
    otherwise kustomize reports them. Raises ``BuildError``.
    """
    directory = _resolved(root / path)
    wanted = [c for c in components or [] if isinstance(c, str)]
    if not wanted or not directory.is_dir() or not _has_kustomization(directory):
        return build_path(root, path, revision=revision, lenient=lenient)
    dirs = [_resolved(directory / c) for c in wanted]
    if ignore_missing_components or lenient:
        dirs = [c for c in dirs if c.is_dir()]
    if not dirs:
        return build_path(root, path, revision=revision, lenient=lenient)
    if kubectl() is None:
        out = build_path(root, path, revision=revision, lenient=lenient)
        for c in dirs:
            out += _builtin(root, c.relative_to(_resolved(root)).as_posix(), revision)
        return out
    text, err = _overlay_build(
        str(directory), tuple(str(c) for c in dirs), revision, str(_resolved(root))
    )
    if err is not None:
        if lenient:
            return build_path(root, path, revision=revision, lenient=lenient)
        raise BuildError(f"kustomize build failed: {err}")
    return [x for x in common.load_yaml_all(text) if isinstance(x, dict)]


@functools.lru_cache(maxsize=512)
def _overlay_build(
    directory: str, components: tuple[str, ...], stamp: str, root: str
) -> tuple[str, str | None]:
    # Keyed by what is built, not by the temporary overlay's name, so a retry is not a rebuild.
    del stamp
    key = _buildcache.content_key(
        Path(directory), root=Path(root), components=[Path(c) for c in components]
    )
    return _keyed(key, lambda: _overlay_kustomize(directory, components))


def _overlay_kustomize(directory: str, components: tuple[str, ...]) -> tuple[str, str | None]:
    with tempfile.TemporaryDirectory(prefix="gpushift-flux-overlay-") as tmp:
        # kustomize refuses absolute roots; the overlay names everything relative to itself.
        overlay = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(directory, tmp)],
            "components": [os.path.relpath(c, tmp) for c in components],
        }
        Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump(overlay))
        return _kubectl_kustomize(tmp)


def transform(objects: list[Obj], spec: Mapping[str, Any]) -> list[Obj]:
    """Flux's overlay on the build: ``patches``, ``targetNamespace``, ``commonMetadata``."""
    for p in spec.get("patches") or []:
        if not isinstance(p, Mapping) or not isinstance(p.get("patch"), str):
            continue
        for patch in parse_patches(p["patch"]):
            target = p.get("target")
            if isinstance(target, Mapping) and isinstance(patch, dict):
                # With a target, the patch's own name and namespace select nothing and are
                # not applied (kustomize patchesStrategicMerge with target).
                meta = {
                    k: v
                    for k, v in (patch.get("metadata") or {}).items()
                    if k not in ("name", "namespace")
                }
                patch = (
                    {**patch, "metadata": meta}
                    if meta
                    else {k: v for k, v in patch.items() if k != "metadata"}
                )
            objects = [
                apply_patch(o, patch)
                if patch_targets(
                    o, patch=patch, target=target if isinstance(target, dict) else None
                )
                else o
                for o in objects
            ]
    target_ns = spec.get("targetNamespace")
    common = spec.get("commonMetadata") or {}
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        if target_ns and _namespaced(obj):
            meta["namespace"] = target_ns
        if isinstance(common, Mapping):
            for key in ("labels", "annotations"):
                if isinstance(common.get(key), Mapping):
                    meta[key] = {**(meta.get(key) or {}), **common[key]}
    return objects


def _placeholders(value: Any) -> bool:
    """Whether any key or string in ``value`` holds ``${``."""
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_placeholders(k) or _placeholders(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_placeholders(v) for v in value)
    return False


def substitute_objects(objects: list[Obj], variables: Mapping[str, str]) -> list[Obj]:
    """``postBuild`` substitution per object on its YAML text, as kustomize-controller does
    (unset variables without a default become empty; objects labelled or annotated
    ``kustomize.toolkit.fluxcd.io/substitute: disabled`` are left alone)."""
    out: list[Obj] = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        off = (meta.get("annotations") or {}).get(SUBSTITUTE) == "disabled" or (
            meta.get("labels") or {}
        ).get(SUBSTITUTE) == "disabled"
        if off:
            out.append(obj)
            continue
        if not _placeholders(obj):
            # Nothing to substitute: the YAML text of the object would not hold "${" either.
            out.append(obj)
            continue
        text = yaml.dump(obj, Dumper=_DUMPER, sort_keys=False, width=1 << 30)
        new = common.load_yaml(substitute(text, variables))
        out.append(new if isinstance(new, dict) else obj)
    return out
