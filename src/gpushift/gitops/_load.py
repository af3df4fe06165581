"""Reading a Flux repository into the model (``load_repo``).

What is deployed: Flux Kustomizations are followed from the roots through their ``path``
and the kustomize files there. A root is a Flux Kustomization (or a kustomize directory, or a
loose manifest) that nothing in the tree includes, unless a kustomization file next to it or
in its parent directory leaves it out: that is how an app is switched off (its ``ks.yaml``
removed or commented out of the parent ``kustomization.yaml``). A tree without any Flux
Kustomization is one cluster: everything in it is deployed.

Partial trees lack whatever sets some namespaces (the cluster root's patches, a shared
``transformers`` directory). A namespaced object without one takes the namespace of the
Flux Kustomization that deploys it, when that is known; a ``transformers`` entry missing
from the tree is taken to set the namespace named after its directory (``apps/<namespace>``),
as home-ops layouts do. Otherwise the namespace stays unknown (None).
"""

from __future__ import annotations

import base64
import binascii
import gc
import os
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import yaml

from gpushift import _yaml
from gpushift._errors import InputError
from gpushift._kinds import KINDS
from gpushift.gitops import _crd_consumers, _modelpool, _pods
from gpushift.gitops._bodies import HelmReleaseSpec, KustomizationSpec
from gpushift.gitops._charts import chart_defaults, chart_identity
from gpushift.gitops._kustomize import (
    KUSTOMIZATION_FILES,
    Builder,
    Doc,
    Item,
    Tree,
    norm,
    parent,
    rename,
)
from gpushift.gitops._model import (
    ChartId,
    Claim,
    DependsOn,
    DeviceClass,
    DevicePluginConfig,
    DeviceRequest,
    FluxKustomization,
    HealthCheck,
    HelmRelease,
    KsRef,
    Obj,
    Repo,
    RuntimeClass,
    Source,
    TalosEvidence,
    TimeSlicingConfig,
    ValueLayer,
    ValuesRef,
    Workload,
    YamlError,
)
from gpushift.gitops._subst import VAR_NAME, substitute_tree
from gpushift.gitops._timeslicing import looks_like_config, parse_config

_FLUX_KS = "kustomize.toolkit.fluxcd.io/"
_HELM = "helm.toolkit.fluxcd.io/"
_KUSTOMIZE_API = "kustomize.config.k8s.io/"
_SUBSTITUTE_ANNOTATION = "kustomize.toolkit.fluxcd.io/substitute"

_CLUSTER_SCOPED = frozenset(k.kind for k in KINDS if not k.namespaced) | {
    "PersistentVolume",
    "StorageClass",
    "ClusterIssuer",
    "NodeFeatureRule",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "CSIDriver",
    "IngressClass",
    "GatewayClass",
}
_TALOS_LABEL = "extensions.talos.dev/"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _str(v: Any) -> str | None:
    return None if v is None or v == "" else str(v)


@dataclass(slots=True)
class _Unit:
    """Something deployed as one: a Flux Kustomization's path, or a root directory or file."""

    items: list[Item]
    active: bool
    ks: FluxKustomization | None
    variables: Mapping[str, str] | None  # None: no postBuild, no substitution


@dataclass(slots=True)
class _State:
    root: Path
    tree: Tree
    builder: Builder
    errors: list[YamlError]
    files: dict[str, Path]
    objects: list[Obj] = field(default_factory=list)
    seen: set[tuple[str, int, tuple[str | int, ...]]] = field(default_factory=set)
    emitted: dict[tuple[str, int, tuple[str | int, ...]], set[KsRef | None]] = field(
        default_factory=dict
    )
    kustomizations: list[FluxKustomization] = field(default_factory=list)
    talos: list[TalosEvidence] = field(default_factory=list)
    #: ConfigMaps and Secrets by name (raw, for substituteFrom and valuesFrom lookups).
    data_objects: dict[tuple[str, str], list[Item]] = field(default_factory=dict)
    #: Objects by (kind, name), filled once every object is known.
    index: dict[tuple[str, str], list[Obj]] = field(default_factory=dict)


# -- reading ------------------------------------------------------------------------------


def _root_of(paths: Sequence[str | Path]) -> Path:
    if not paths:
        raise InputError("no path given")
    resolved = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise InputError("no such file or directory", path=str(p))
        resolved.append(path.resolve())
    first = resolved[0] if resolved[0].is_dir() else resolved[0].parent
    for r in resolved[1:]:
        while first not in (r, *r.parents):
            first = first.parent
    return first


def _find_files(root: Path, paths: Sequence[str | Path]) -> Iterator[tuple[str, Path]]:
    """YAML and JSON files under ``paths`` as (path relative to ``root``, path), sorted.

    ``.git`` directories are skipped.
    """
    base = str(root)
    found: dict[str, Path] = {}
    for raw in paths:
        p = Path(raw).resolve()
        if p.is_file():
            found[p.relative_to(root).as_posix()] = p
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            rel_dir = dirpath[len(base) + 1 :].replace(os.sep, "/")
            for name in filenames:
                if name.endswith(_yaml.YAML_SUFFIXES):
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    found[rel] = Path(dirpath, name)
    for rel in sorted(found):
        yield rel, found[rel]


def _read_tree(
    root: Path, paths: Sequence[str | Path]
) -> tuple[Tree, list[YamlError], dict[str, Path]]:
    docs: dict[str, list[Doc]] = {}
    texts: dict[str, str] = {}
    kustomizations: dict[str, dict[str, Any]] = {}
    errors: list[YamlError] = []
    real: dict[str, Path] = {}
    dirs: set[str] = set()
    for rel, f in _find_files(root, paths):
        real[rel] = f
        up = parent(rel)
        while up not in dirs:
            dirs.add(up)
            if up == ".":
                break
            up = parent(up)
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            errors.append(YamlError(rel, None, f"cannot read file: {err}"))
            continue
        texts[rel] = text
        try:
            parsed = _yaml.parse_text(text, rel)
        except InputError as err:
            errors.append(YamlError(rel, err.line, err.message))
            continue
        if f.name in KUSTOMIZATION_FILES:
            for kdoc in parsed:
                if isinstance(kdoc.data, dict) and str(kdoc.data.get("apiVersion", "")).startswith(
                    _KUSTOMIZE_API
                ):
                    kustomizations[parent(rel)] = kdoc.data
                    break
            continue
        out: list[Doc] = []
        for pdoc in parsed:
            data = pdoc.data
            if not isinstance(data, dict):
                continue
            items = data.get("items")
            if str(data.get("kind", "")).endswith("List") and isinstance(items, list):
                out.extend(
                    Doc(rel, pdoc.index, pdoc.line, it, ("items", i))
                    for i, it in enumerate(items)
                    if isinstance(it, dict)
                )
            else:
                out.append(Doc(rel, pdoc.index, pdoc.line, data))
        docs[rel] = out
    return Tree(docs, texts, kustomizations, dirs), errors, real


def load_repo(paths: Sequence[str | Path]) -> Repo:
    """Read the Flux repository (or partial tree) under ``paths``.

    ``Source.path`` values are relative to the checked directory: the first path (its parent
    for a file), widened to hold every other path. YAML errors do not stop the read: they are
    collected in ``Repo.errors``. Objects alive when it returns are moved to the garbage
    collector's permanent generation (``gc.freeze()``; ``gc.unfreeze()`` undoes it).

    Raises InputError when a path does not exist.
    """
    # Millions of parsed objects stay alive as the model; cyclic-GC passes over them cost
    # more than the reading itself, and nothing here forms a cycle. So no collection runs
    # while building, and the result goes to the permanent generation (gc.freeze) so that
    # later collections skip it; refcounting still frees it when it is dropped.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(paths)
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _load(paths: Sequence[str | Path]) -> Repo:
    root = _root_of(paths)
    tree, errors, real = _read_tree(root, paths)

    def read_text(rel: str) -> str | None:
        if rel in tree.texts:
            return tree.texts[rel]
        p = root / rel
        try:
            return p.read_text(encoding="utf-8") if p.is_file() else None
        except (OSError, UnicodeDecodeError):
            return None

    builder = Builder(tree, read_text=read_text)
    state = _State(root, tree, builder, errors, real)
    _index_data_objects(state)
    _walk_units(state)
    state.errors[:] = _mark_unused(tree, builder, state.errors)
    objects = tuple(state.objects)
    for o in objects:
        state.index.setdefault((o.kind, o.name), []).append(o)
    releases = tuple(_helm_release(state, o) for o in objects if _is_hr(o))
    model_pools = _modelpool.model_pools(objects)
    workloads = _modelpool.mark_members(tuple(_workloads(objects, releases)), model_pools)
    time_slicing, dp_configs = _time_slicing(state, objects, releases)
    claims = tuple(_claim(o) for o in objects if o.kind in _CLAIM_KINDS)
    device_classes = tuple(_device_classes(objects, releases))
    runtime_classes = tuple(_runtime_classes(objects, releases))
    _talos_from_labels(state, objects, workloads)
    return Repo(
        root=root,
        has_flux_root=bool(state.kustomizations),
        objects=objects,
        kustomizations=tuple(state.kustomizations),
        helm_releases=releases,
        workloads=workloads,
        time_slicing=time_slicing,
        device_plugin_configs=dp_configs,
        claims=claims,
        device_classes=device_classes,
        runtime_classes=runtime_classes,
        talos=tuple(state.talos),
        errors=tuple(state.errors),
        model_pools=model_pools,
    )


# -- deciding what is deployed ------------------------------------------------------------


def _is_flux_ks(data: Mapping[str, Any]) -> bool:
    return data.get("kind") == "Kustomization" and str(data.get("apiVersion", "")).startswith(
        _FLUX_KS
    )


def _index_data_objects(state: _State) -> None:
    for docs in state.tree.docs.values():
        for d in docs:
            if d.data.get("kind") in ("ConfigMap", "Secret"):
                name = _dict(d.data.get("metadata")).get("name")
                if name:
                    key = (str(d.data["kind"]), str(name))
                    state.data_objects.setdefault(key, []).append(Item(d, d.data))


def _ks_paths(state: _State) -> dict[str, list[tuple[Doc, dict[str, Any]]]]:
    """Directories that Flux Kustomizations point at, with the Kustomization documents."""
    out: dict[str, list[tuple[Doc, dict[str, Any]]]] = {}
    for docs in state.tree.docs.values():
        for d in docs:
            if _is_flux_ks(d.data):
                path = _dict(d.data.get("spec")).get("path")
                directory = _resolve_path(state, str(path or "."))
                if directory is not None:
                    out.setdefault(directory, []).append((d, d.data))
    return out


def _resolve_path(state: _State, path: str) -> str | None:
    """``spec.path`` (relative to the source root) as a directory of the checked tree.

    The checked directory may be below the source root, so leading components that are not
    in the tree are dropped until the rest is found.
    """
    rel = norm(".", path)
    parts = rel.split("/")
    for i in range(len(parts)):
        cand = "/".join(parts[i:]) or "."
        if cand in state.tree.dirs or cand in state.tree.kustomizations:
            return cand
    return None


def _left_out(tree: Tree, rel: str, *, is_dir: bool) -> bool:
    """Whether a kustomization file that would list ``rel`` exists but does not.

    For a file: one in its own directory or the one above (``apps/ns/app/ks.yaml`` is listed
    by ``apps/ns/kustomization.yaml``). For a kustomize directory: one in its parent.
    """
    here = rel if is_dir else parent(rel)
    if not is_dir and here in tree.kustomizations:
        return True
    return here != "." and parent(here) in tree.kustomizations


def _walk_units(state: _State) -> None:
    tree, builder = state.tree, state.builder
    ks_paths = _ks_paths(state)
    has_flux = bool(ks_paths) or any(
        _is_flux_ks(d.data) for docs in tree.docs.values() for d in docs
    )
    referenced: set[str] = set()
    for directory in tree.kustomizations:
        referenced.update(builder.references(directory))
    for directory in ks_paths:
        if directory not in tree.kustomizations:
            # Flux generates a kustomization for such a path that includes these directories.
            referenced.update(builder.auto_dirs(directory))
    covered_files: set[str] = set()
    for directory in tree.kustomizations:
        covered_files.update(i.doc.rel for i in builder.build(directory))
    for directory in ks_paths:
        covered_files.update(i.doc.rel for i in builder.build(directory))

    roots: list[tuple[list[Item], bool]] = []
    for directory, k in sorted(tree.kustomizations.items()):
        if directory in referenced or directory in ks_paths:
            continue
        active = k.get("kind") != "Component" and (
            not has_flux or not _left_out(tree, directory, is_dir=True)
        )
        roots.append((builder.build(directory), active))
    for rel, docs in sorted(tree.docs.items()):
        if rel in covered_files or rel in referenced or not docs:
            continue
        active = not has_flux or not _left_out(tree, rel, is_dir=False)
        roots.append(([Item(d, d.data) for d in docs], active))

    # Bootstrap roots sit inside the tree they sync, so nothing above includes them: the
    # Kustomization that `flux bootstrap` creates (flux-system) and flux-operator's FluxInstance.
    for rel, docs in sorted(tree.docs.items()):
        covered = rel in covered_files or rel in referenced
        for d in docs:
            name = _dict(d.data.get("metadata")).get("name")
            if covered and _is_flux_ks(d.data) and name == "flux-system":
                roots.append(([Item(d, d.data)], True))
            elif d.data.get("kind") == "FluxInstance":
                path = _dict(_dict(d.data.get("spec")).get("sync")).get("path")
                synced = _resolve_path(state, str(path)) if path else None
                if synced is not None:
                    roots.append((builder.build(synced), True))
    # Active units first, so an object reached both ways is recorded as active.
    queue: deque[_Unit] = deque(_Unit(i, True, None, None) for i, active in roots if active)
    pending_inactive = [_Unit(i, False, None, None) for i, active in roots if not active]
    done_ks: set[tuple[str, int, tuple[str | int, ...], str]] = set()
    while queue or pending_inactive:
        unit = queue.popleft() if queue else pending_inactive.pop(0)
        for obj in _unit_objects(state, unit):
            if not _is_flux_ks(obj.body):
                continue
            key = (obj.source.path, obj.source.doc, obj.source.keys, obj.namespace or "")
            if key in done_ks:
                continue
            done_ks.add(key)
            ks = _flux_kustomization(state, obj)
            state.kustomizations.append(ks)
            if ks.directory is None:
                continue
            items = builder.build(ks.directory)
            if ks.components:
                for comp in ks.components:
                    items = items + builder.build(norm(ks.directory, comp))
            spec = _dict(ks.obj.body.get("spec"))
            if spec.get("patches"):
                items = builder.apply_patches(".", {"patches": spec["patches"]}, items)
            items = rename(items, prefix=spec.get("namePrefix"), suffix=spec.get("nameSuffix"))
            child = _Unit(items, obj.active and not ks.suspend, ks, _variables(state, ks))
            (queue if child.active else pending_inactive).append(child)

    # Whatever no unit reached: files listed nowhere and directories no Kustomization uses.
    for _rel, docs in sorted(tree.docs.items()):
        for d in docs:
            if (d.rel, d.index, d.keys) not in state.seen:
                state.seen.add((d.rel, d.index, d.keys))
                _talos_check(state, d)
                if _has_kind(d.data):
                    state.objects.append(
                        _make_obj(state, Item(d, d.data), ks=None, active=False, variables=None)
                    )


def _mark_unused(tree: Tree, builder: Builder, errors: list[YamlError]) -> list[YamlError]:
    """``errors`` with ``unused`` set for files their directory's kustomization leaves out."""
    if not errors:
        return errors
    listed: set[str] = set()
    for directory in tree.kustomizations:
        listed.update(builder.references(directory))
    out = []
    for err in errors:
        here = parent(err.path)
        name = err.path.rsplit("/", 1)[-1]
        unused = (
            here in tree.kustomizations
            and name not in KUSTOMIZATION_FILES
            and err.path not in listed
        )
        out.append(replace(err, unused=True) if unused else err)
    return out


def _has_kind(data: Mapping[str, Any]) -> bool:
    return bool(data.get("kind")) and bool(data.get("apiVersion"))


def _unit_objects(state: _State, unit: _Unit) -> Iterator[Obj]:
    owner = unit.ks.ref if unit.ks is not None else None
    for item in unit.items:
        key = (item.doc.rel, item.doc.index, item.doc.keys)
        first = key not in state.seen
        state.seen.add(key)
        if first:
            _talos_check(state, item.doc)
        if not _has_kind(item.data):
            continue
        if not first and not unit.active and not item.generated:
            # Already recorded through an active path; an inactive duplicate adds nothing.
            continue
        owners = state.emitted.setdefault(key, set())
        if owners and (owner is None or owner in owners or None in owners):
            # Reached twice by one Kustomization (or by a root and again): deployed once.
            # Different Kustomizations sharing a component each deploy their own copy.
            continue
        owners.add(owner)
        obj = _make_obj(state, item, ks=unit.ks, active=unit.active, variables=unit.variables)
        state.objects.append(obj)
        yield obj


def _variables(state: _State, ks: FluxKustomization) -> Mapping[str, str] | None:
    if not ks.post_build:
        return None
    out: dict[str, str] = {}
    for ref in ks.substitute_from:
        for item in state.data_objects.get((ref.kind, ref.name), ()):
            out.update(_data_of(item.data))
            break
    out.update(ks.substitute)
    return out


def _data_of(body: Mapping[str, Any]) -> dict[str, str]:
    """A ConfigMap's or Secret's data as text (Secret ``data`` base64-decoded)."""
    out: dict[str, str] = {}
    if body.get("kind") == "Secret":
        for k, v in _dict(body.get("data")).items():
            try:
                out[str(k)] = base64.b64decode(str(v), validate=False).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                out[str(k)] = str(v)
        for k, v in _dict(body.get("stringData")).items():
            out[str(k)] = "" if v is None else str(v)
    else:
        for k, v in _dict(body.get("data")).items():
            out[str(k)] = "" if v is None else str(v)
    return out


def _make_obj(
    state: _State,
    item: Item,
    *,
    ks: FluxKustomization | None,
    active: bool,
    variables: Mapping[str, str] | None,
) -> Obj:
    data = item.data
    meta = _dict(data.get("metadata"))
    if variables is not None and (item.generated or "${" in state.tree.texts.get(item.doc.rel, "")):
        anns = _dict(meta.get("annotations"))
        labels = _dict(meta.get("labels"))
        if (
            anns.get(_SUBSTITUTE_ANNOTATION) != "disabled"
            and labels.get(_SUBSTITUTE_ANNOTATION) != "disabled"
        ):
            data = substitute_tree(data, variables)
            meta = _dict(data.get("metadata"))
    kind = str(data.get("kind", ""))
    namespace: str | None = None
    if kind not in _CLUSTER_SCOPED:
        namespace = (
            (ks.target_namespace if ks is not None else None)
            or item.namespace
            or _str(meta.get("namespace"))
            # Partial trees: whatever would set it (the root's patches) is often missing, so
            # the deploying Kustomization's own namespace, when known, is the best guess.
            or (ks.obj.namespace if ks is not None else None)
        )
    doc = item.doc
    file = state.files.get(doc.rel, state.root / doc.rel)
    return Obj(
        api_version=str(data.get("apiVersion", "")),
        kind=kind,
        name=str(meta.get("name", "")),
        namespace=namespace,
        body=data,
        source=Source(doc.rel, doc.line, doc.index, file, doc.keys),
        active=active,
        kustomization=ks.ref if ks is not None else None,
        generated=item.generated,
    )


def _flux_kustomization(state: _State, obj: Obj) -> FluxKustomization:
    spec = cast(KustomizationSpec, _dict(obj.body.get("spec")))
    namespace = obj.namespace or "flux-system"
    post = spec.get("postBuild")
    post_build = isinstance(post, dict)
    pb = _dict(post)
    substitute = {
        str(k): "" if v is None else _scalar(v)
        for k, v in _dict(pb.get("substitute")).items()
        if VAR_NAME.match(str(k))
    }
    subst_from = tuple(
        ValuesRef(
            kind=str(r.get("kind", "ConfigMap")),
            name=str(r.get("name", "")),
            values_key="",
            target_path=None,
            optional=bool(r.get("optional", False)),
            found=(str(r.get("kind", "ConfigMap")), str(r.get("name", ""))) in state.data_objects,
            source=obj.source.child(("spec", "postBuild", "substituteFrom", i)),
        )
        for i, r in enumerate(pb.get("substituteFrom") or [])
        if isinstance(r, dict)
    )
    path = str(spec.get("path") or "./")
    return FluxKustomization(
        name=obj.name,
        namespace=namespace,
        path=path,
        directory=_resolve_path(state, path),
        depends_on=tuple(
            DependsOn(str(d["name"]), str(d.get("namespace") or namespace))
            for d in spec.get("dependsOn") or []
            if isinstance(d, dict) and d.get("name")
        ),
        health_checks=tuple(
            HealthCheck(
                _str(h.get("apiVersion")),
                str(h.get("kind", "")),
                str(h.get("name", "")),
                _str(h.get("namespace")),
            )
            for h in spec.get("healthChecks") or []
            if isinstance(h, dict)
        ),
        force=spec.get("force") is True,
        prune=spec.get("prune") is True,
        suspend=spec.get("suspend") is True,
        wait=spec.get("wait") is True,
        target_namespace=_str(spec.get("targetNamespace")),
        post_build=post_build,
        substitute=substitute,
        substitute_from=subst_from,
        components=tuple(str(c) for c in spec.get("components") or [] if isinstance(c, str)),
        obj=obj,
    )


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


# -- Talos --------------------------------------------------------------------------------


def _talos_check(state: _State, doc: Doc) -> None:
    data = doc.data
    file = state.files.get(doc.rel, state.root / doc.rel)
    src = Source(doc.rel, doc.line, doc.index, file, doc.keys)
    if "machine" in data and ("cluster" in data or data.get("version") == "v1alpha1"):
        state.talos.append(TalosEvidence("Talos machine config", src))
    elif set(data) <= {"machine", "cluster"} and data and "apiVersion" not in data:
        state.talos.append(TalosEvidence("Talos machine config patch", src))
    elif "customization" in data and "systemExtensions" in _dict(data.get("customization")):
        state.talos.append(TalosEvidence("Talos image factory schematic", src))


def _label_keys(value: Any) -> Iterator[str]:
    """Label keys a nodeSelector or affinity selects on (nodeSelector keys, matchExpressions)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "key" and isinstance(v, str):
                yield v
            elif isinstance(v, (dict, list)):
                yield from _label_keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _label_keys(v)


def _talos_from_labels(
    state: _State, objects: Iterable[Obj], workloads: Iterable[Workload]
) -> None:
    for w in workloads:
        if not w.active:
            continue
        selector = w.pod.options.get("nodeSelector")
        keys = list(selector) if isinstance(selector, dict) else []
        keys.extend(_label_keys(w.pod.options.get("affinity")))
        if any(str(k).startswith(_TALOS_LABEL) for k in keys):
            opt = (
                "nodeSelector"
                if any(str(k).startswith(_TALOS_LABEL) for k in (selector or ()))
                else "affinity"
            )
            state.talos.append(
                TalosEvidence(f"Talos extension label in {opt}", w.pod.option_source(opt))
            )
            return
    for o in objects:
        if o.active and o.kind == "HelmRelease" and _is_gpu_stack(o):
            values = _dict(o.body.get("spec")).get("values")
            if any(str(k).startswith(_TALOS_LABEL) for k in _label_keys(values)):
                state.talos.append(
                    TalosEvidence("Talos extension label", o.source.child(("spec", "values")))
                )
                return


def _is_gpu_stack(o: Obj) -> bool:
    return chart_identity(o.name) in (
        "gpu-operator",
        "nvidia-device-plugin",
        "dra-driver-nvidia-gpu",
    )


# -- HelmReleases -------------------------------------------------------------------------


def _is_hr(o: Obj) -> bool:
    return o.kind == "HelmRelease" and o.api_version.startswith(_HELM)


def _chart(state: _State, obj: Obj) -> tuple[str, str | None]:
    spec = cast(HelmReleaseSpec, _dict(obj.body.get("spec")))
    chart = _dict(_dict(spec.get("chart")).get("spec"))
    if chart.get("chart"):
        return str(chart["chart"]), _str(chart.get("version"))
    ref = _dict(spec.get("chartRef"))
    name = str(ref.get("name", ""))
    kind = str(ref.get("kind", "OCIRepository"))
    best = _pick(state, kind=kind, name=name, namespace=obj.namespace)
    if best is None:
        return name, None
    ospec = _dict(best.body.get("spec"))
    if kind == "HelmChart":
        return str(ospec.get("chart", name)), _str(ospec.get("version"))
    url = str(ospec.get("url", name))
    r = _dict(ospec.get("ref"))
    version = _str(r.get("tag")) or _str(r.get("semver")) or _str(r.get("digest"))
    return url.rstrip("/").rsplit("/", 1)[-1], version


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalesce for user values: maps merge, anything else replaces, null deletes."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _set_path(target_path: str, value: Any) -> dict[str, Any]:
    # helm-controller targetPath: dotted path (strvals syntax); the value lands at the leaf.
    keys = [k for k in target_path.replace("\\.", "\0").split(".") if k]
    out: Any = value
    for k in reversed(keys):
        out = {k.replace("\0", "."): out}
    return out if isinstance(out, dict) else {}


def _helm_release(state: _State, obj: Obj) -> HelmRelease:
    spec = cast(HelmReleaseSpec, _dict(obj.body.get("spec")))
    chart_name, version = _chart(state, obj)
    # Identified by name and source only: values that look like a chart's are no evidence.
    chart = chart_identity(chart_name)
    if chart == "other" and version is None and spec.get("chartRef"):
        chart = _schema_chart(state, obj)
    layers: list[ValueLayer] = []
    refs: list[ValuesRef] = []
    values_from = spec.get("valuesFrom")
    for i, ref in enumerate(values_from if isinstance(values_from, list) else []):
        if not isinstance(ref, dict):
            continue
        kind, name = str(ref.get("kind", "ConfigMap")), str(ref.get("name", ""))
        key = str(ref.get("valuesKey") or "values.yaml")
        target = _str(ref.get("targetPath"))
        found = _pick(state, kind=kind, name=name, namespace=obj.namespace)
        refs.append(
            ValuesRef(
                kind=kind,
                name=name,
                values_key=key,
                target_path=target,
                optional=bool(ref.get("optional", False)),
                found=found is not None,
                source=obj.source.child(("spec", "valuesFrom", i)),
            )
        )
        if found is None:
            continue
        text = _data_of(found.body).get(key)
        if text is None:
            continue
        field_name = "data" if key in _dict(found.body.get("data")) else "stringData"
        src = found.source.child((field_name, key))
        if target is not None:
            layers.append(ValueLayer(_set_path(target, text), src, False))
            continue
        try:
            parsed = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError:
            continue
        if isinstance(parsed, dict):
            layers.append(ValueLayer(parsed, src, False))
    inline = spec.get("values")
    if isinstance(inline, dict):
        # helm-controller merges spec.values last, over every valuesFrom.
        layers.append(ValueLayer(inline, obj.source.child(("spec", "values")), True))
    if len(layers) == 1:
        user: Mapping[str, Any] = layers[0].values
    else:
        acc: dict[str, Any] = {}
        for layer in layers:
            acc = _merge(acc, layer.values)
        user = acc
    defaults = chart_defaults(chart)
    values = _merge(_plain(defaults), user) if defaults else user
    target_ns = _str(spec.get("targetNamespace")) or obj.namespace
    return HelmRelease(
        name=obj.name,
        namespace=obj.namespace,
        target_namespace=target_ns,
        release_name=_str(spec.get("releaseName")) or obj.name,
        chart=chart,
        chart_name=chart_name,
        chart_version=version,
        values=values,
        user_values=user,
        values_from=tuple(refs),
        suspend=spec.get("suspend") is True,
        obj=obj,
        layers=tuple(layers),
    )


_MODELINE = re.compile(r"#\s*yaml-language-server:\s*\$schema=(\S+)")
#: Charts that publish a HelmRelease schema for editors; bjw-s-labs/helm-charts
#: charts/other/app-template/schemas/helmrelease-helm-v2.schema.json.
_SCHEMA_CHARTS: tuple[tuple[str, ChartId], ...] = (("/app-template/schemas/", "app-template"),)


def _schema_chart(state: _State, obj: Obj) -> ChartId:
    """The chart a HelmRelease's file declares through its yaml-language-server modeline.

    Used only when the chartRef's source is not in the tree: the author's modeline names the
    chart's own published schema, which is a statement of the chart, not a guess from values.
    """
    text = state.tree.texts.get(obj.source.path, "")
    if "yaml-language-server" not in text:
        return "other"
    start = obj.source.line_of(("apiVersion",))
    found: ChartId = "other"
    for n, line in enumerate(text.splitlines(), start=1):
        if n >= start:
            break
        m = _MODELINE.search(line)
        if m is not None:
            found = next((c for key, c in _SCHEMA_CHARTS if key in m.group(1)), "other")
    return found


def _plain(m: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(v) if isinstance(v, Mapping) else v for k, v in m.items()}


def _pick(state: _State, *, kind: str, name: str, namespace: str | None) -> Obj | None:
    best: Obj | None = None
    for o in state.index.get((kind, name), ()):
        if o.kind == kind and o.name == name:
            if o.namespace == namespace and o.active:
                return o
            if best is None or (o.namespace == namespace and best.namespace != namespace):
                best = o
    return best


# -- workloads ----------------------------------------------------------------------------


def _workloads(objects: Sequence[Obj], releases: Sequence[HelmRelease]) -> Iterator[Workload]:
    for o in objects:
        w = _pods.manifest_workload(o)
        if w is not None:
            yield w
    yield from _crd_consumers.crd_workloads(objects)
    for hr in releases:
        if hr.chart == "app-template":
            yield from _pods.app_template_workloads(hr)
        elif hr.chart == "dcgm-exporter":
            yield _pods.dcgm_exporter_workload(hr)
    models: dict[tuple[str | None, str], Obj] = {}
    for o in objects:
        if o.kind == "Model" and o.api_version.startswith("inference.llmkube.dev/"):
            key = (o.namespace, o.name)
            if key not in models or o.active:
                models[key] = o
    for o in objects:
        if o.kind == "InferenceService" and o.api_version.startswith("inference.llmkube.dev/"):
            ref = _dict(o.body.get("spec")).get("modelRef")
            model = models.get((o.namespace, str(ref))) if ref else None
            yield _pods.llmkube_workload(o, model)


# -- claims and classes -------------------------------------------------------------------

_CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


def _claim(o: Obj) -> Claim:
    template = o.kind == "ResourceClaimTemplate"
    spec = _dict(o.body.get("spec"))
    if template:
        spec = _dict(spec.get("spec"))
    devices = _dict(spec.get("devices"))
    requests: list[DeviceRequest] = []
    for r in devices.get("requests") or []:
        if not isinstance(r, dict):
            continue
        # resource.k8s.io/v1 nests the request under "exactly"; v1beta1 puts it on the request.
        subs = [_dict(r.get("exactly")) or r]
        subs += [_dict(s) for s in r.get("firstAvailable") or []]
        for s in subs:
            if not s.get("deviceClassName"):
                continue
            count = s.get("count")
            requests.append(
                DeviceRequest(
                    name=str(r.get("name", "")),
                    device_class=str(s["deviceClassName"]),
                    allocation_mode=str(s.get("allocationMode") or "ExactCount"),
                    count=count if isinstance(count, int) else None,
                    capacity=_dict(_dict(s.get("capacity")).get("requests")),
                    selectors=tuple(
                        str(_dict(sel.get("cel")).get("expression", ""))
                        for sel in s.get("selectors") or []
                        if isinstance(sel, dict)
                    ),
                )
            )
    return Claim(
        name=o.name,
        namespace=o.namespace,
        template=template,
        requests=tuple(requests),
        config=tuple(c for c in devices.get("config") or [] if isinstance(c, dict)),
        obj=o,
    )


# kubernetes-sigs/dra-driver-nvidia-gpu templates/deviceclass-{gpu,mig,vfio-gpu}.yaml
_DRA_CLASSES = (
    ("gpu.nvidia.com", "gpu"),
    ("mig.nvidia.com", "mig"),
    ("vfio.gpu.nvidia.com", "vfio"),
)


def _selector(driver: str, type_: str) -> str:
    return f"device.driver == '{driver}' && device.attributes['{driver}'].type == '{type_}'"


def _device_classes(
    objects: Sequence[Obj], releases: Sequence[HelmRelease]
) -> Iterator[DeviceClass]:
    for o in objects:
        if o.kind != "DeviceClass":
            continue
        spec = _dict(o.body.get("spec"))
        yield DeviceClass(
            name=o.name,
            extended_resource_name=_str(spec.get("extendedResourceName")),
            selectors=tuple(
                str(_dict(s.get("cel")).get("expression", ""))
                for s in spec.get("selectors") or []
                if isinstance(s, dict)
            ),
            source=o.source,
            active=o.active,
        )
    for hr in releases:
        if hr.chart == "gpu-operator" and hr.value("gpuCluster", "deployCR") is True:
            # The GPUCluster stack's gpu.nvidia.com class has no extendedResourceName.
            yield DeviceClass(
                name="gpu.nvidia.com",
                extended_resource_name=None,
                selectors=(_selector("gpu.nvidia.com", "gpu"),),
                source=hr.source,
                active=hr.active,
                rendered_by=hr,
            )
            continue
        if hr.chart != "dra-driver-nvidia-gpu":
            continue
        enabled = hr.value("resources", "gpus", "enabled")
        if enabled is False or str(enabled).lower() == "false":
            continue
        api = str(hr.value("resourceApiVersion") or "")
        for name, type_ in _DRA_CLASSES:
            # The chart adds extendedResourceName only when it renders resource.k8s.io/v1;
            # with auto-detection that is any cluster serving v1 (Kubernetes >= 1.34).
            ext = "nvidia.com/gpu" if type_ == "gpu" and api in ("", "v1") else None
            yield DeviceClass(
                name=name,
                extended_resource_name=ext,
                selectors=(_selector("gpu.nvidia.com", type_),),
                source=hr.source,
                active=hr.active,
                rendered_by=hr,
            )


def _runtime_classes(
    objects: Sequence[Obj], releases: Sequence[HelmRelease]
) -> Iterator[RuntimeClass]:
    for o in objects:
        if o.kind == "RuntimeClass":
            yield RuntimeClass(o.name, _str(o.body.get("handler")), o.source, o.active)
    for hr in releases:
        if hr.chart == "gpu-operator":
            # The operator creates its RuntimeClass (operator.runtimeClass, default nvidia).
            name = str(hr.value("operator", "runtimeClass") or "nvidia")
            yield RuntimeClass(name, "nvidia", hr.source, hr.active, rendered_by=hr)


# -- time-slicing -------------------------------------------------------------------------


def _time_slicing(
    state: _State, objects: Sequence[Obj], releases: Sequence[HelmRelease]
) -> tuple[tuple[TimeSlicingConfig, ...], tuple[DevicePluginConfig, ...]]:
    configs: list[TimeSlicingConfig] = []
    for o in objects:
        if o.kind != "ConfigMap":
            continue
        for key, text in _dict(o.body.get("data")).items():
            if looks_like_config(text):
                configs.append(_config_map_config(o, key=key, text=text))
    pointers: list[DevicePluginConfig] = []
    for hr in releases:
        if hr.chart == "gpu-operator":
            block = _dict(hr.value("devicePlugin", "config"))
            inline_data = block.get("data") if block.get("create") else None
            keys: tuple[str, ...] = ("devicePlugin", "config")
        elif hr.chart == "nvidia-device-plugin":
            block = _dict(hr.value("config"))
            inline_data = block.get("map") or None
            keys = ("config",)
        else:
            continue
        name = _str(block.get("name"))
        default = _str(block.get("default"))
        inline = isinstance(inline_data, dict) and bool(inline_data)
        mine: list[TimeSlicingConfig] = []
        if inline and isinstance(inline_data, dict):
            data_key = "data" if hr.chart == "gpu-operator" else "map"
            for key, text in inline_data.items():
                cfg = parse_config(
                    text,
                    config_map=name or f"{hr.release_name}-configs",
                    key=str(key),
                    namespace=hr.target_namespace,
                    form="inline",
                    active=hr.active,
                    source=hr.source.child(("spec", "values", *keys, data_key, key)),
                )
                configs.append(cfg)
                mine.append(cfg)
        elif name:
            mine = [
                c
                for c in configs
                if c.config_map == name
                and c.form != "inline"
                and (c.namespace in (None, hr.target_namespace))
            ]
            if not mine:
                mine = _all_keys(objects, name=name, namespace=hr.target_namespace, configs=configs)
        if not name and not inline:
            continue
        missing: Any = None
        if not inline and not _configmap_exists(objects, name=name, namespace=hr.target_namespace):
            missing = "configmap"
        elif default and not any(c.key == default for c in mine):
            missing = "default-key"
        pointers.append(
            DevicePluginConfig(
                owner=hr,
                config_map=name,
                default=default,
                inline=inline,
                configs=tuple(mine),
                missing=missing,
                source=hr.source.child(("spec", "values", *keys)),
            )
        )
    return tuple(configs), tuple(pointers)


def _configmap_exists(objects: Sequence[Obj], *, name: str | None, namespace: str | None) -> bool:
    return any(
        o.kind == "ConfigMap"
        and o.name == name
        and o.active
        and (o.namespace is None or namespace is None or o.namespace == namespace)
        for o in objects
    )


def _config_map_config(o: Obj, *, key: Any, text: Any) -> TimeSlicingConfig:
    """The time-slicing config in ConfigMap ``o`` under ``key``; a generated ConfigMap's
    source is its generator, a written one's the key in its ``data``."""
    return parse_config(
        text,
        config_map=o.name,
        key=str(key),
        namespace=o.namespace,
        form="generator" if o.generated else "configmap",
        active=o.active,
        source=o.source if o.generated else o.source.child(("data", key)),
    )


def _all_keys(
    objects: Sequence[Obj],
    *,
    name: str,
    namespace: str | None,
    configs: list[TimeSlicingConfig],
) -> list[TimeSlicingConfig]:
    # A named ConfigMap whose keys do not look like configs still counts: the plugin parses
    # whatever the selected key holds.
    out: list[TimeSlicingConfig] = []
    for o in objects:
        if o.kind == "ConfigMap" and o.name == name and o.namespace in (None, namespace):
            for key, text in _dict(o.body.get("data")).items():
                cfg = _config_map_config(o, key=key, text=text)
                configs.append(cfg)
                out.append(cfg)
    return out
