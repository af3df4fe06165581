"""Following kustomize files the way ``kustomize build`` (and Flux's generator) would.

Only what changes which objects exist, their names and namespaces, and the fields gpushift
reads: resources (files and directories), components, configMapGenerator/secretGenerator,
namespace (also from a ``transformers`` directory), and patches (strategic merge as a deep
merge, JSON 6902). Remote resources and missing files are skipped: fixture and partial trees
often list files they do not contain.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import yaml

from gpushift import _yaml

#: A path of keys and indexes into a document.
Keys = tuple[str | int, ...]

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


@dataclass(frozen=True, slots=True)
class Doc:
    """A parsed object document: ``rel`` file path, document ``index``, start ``line``."""

    rel: str
    index: int
    line: int
    data: dict[str, Any]
    keys: Keys = ()


@dataclass(frozen=True, slots=True)
class Item:
    """An object a build emits. ``namespace`` is set by a kustomize namespace transform."""

    doc: Doc
    data: dict[str, Any]
    namespace: str | None = None
    generated: bool = False


@dataclass(slots=True)
class Tree:
    """The parsed files of the checked tree, addressed by POSIX paths relative to its root."""

    docs: dict[str, list[Doc]]
    texts: dict[str, str]
    kustomizations: dict[str, dict[str, Any]]  # directory -> kustomization document
    dirs: set[str] = field(default_factory=set)
    #: Files and directories some kustomization refers to.
    referenced: set[str] = field(default_factory=set)

    def is_dir(self, rel: str) -> bool:
        return rel in self.dirs

    def is_file(self, rel: str) -> bool:
        return rel in self.texts


@functools.lru_cache(maxsize=65536)
def norm(base: str, ref: str) -> str:
    """``ref`` resolved against directory ``base`` (both relative to the root), normalised.

    Returns a path starting with ``..`` when it leaves the root.
    """
    parts: list[str] = [] if base in ("", ".") or ref.startswith("/") else base.split("/")
    for p in ref.split("/"):
        if p in (".", ""):
            continue
        if p == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            else:
                parts.append("..")
        else:
            parts.append(p)
    return "/".join(parts) if parts else "."


def parent(rel: str) -> str:
    """The directory of ``rel`` ("." at the root)."""
    return rel.rsplit("/", 1)[0] if "/" in rel else "."


def _kustomize_encode(hexdigest: str) -> str:
    # sigs.k8s.io/kustomize/api/hasher: first 10 hex chars with 0,1,3,a,e swapped out
    table = str.maketrans({"0": "g", "1": "h", "3": "k", "a": "m", "e": "t"})
    return hexdigest[:10].translate(table)


def _go_json(obj: Any) -> str:
    # encoding/json: sorted map keys, no spaces, HTML-escaped <, >, &.
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def name_hash(kind: str, data: dict[str, Any]) -> str:
    """kustomize's content hash suffix for a generated ConfigMap or Secret."""
    # sigs.k8s.io/kustomize/api/hasher: encodeConfigMap / encodeSecret. The generator hashes
    # before it names the object, so "name" is empty (matches kubectl kustomize v5.5).
    body: dict[str, Any] = {"kind": kind, "name": ""}
    if kind == "Secret":
        body["type"] = data.get("type", "Opaque")
        body["data"] = data.get("data", {})
    else:
        body["data"] = data.get("data", {})
        if data.get("binaryData"):
            body["binaryData"] = data["binaryData"]
    return _kustomize_encode(hashlib.sha256(_go_json(body).encode()).hexdigest())


def _entries(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _merge(base: Any, patch: Any) -> Any:
    """Deep merge of ``patch`` into ``base`` (new dicts along changed paths only)."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    out = dict(base)
    for k, v in patch.items():
        if k == "$patch":
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and isinstance(out.get(k), list):
            out[k] = _merge_list(out[k], v)
        else:
            out[k] = _merge(out.get(k), v) if isinstance(v, dict) else v
    return out


def _merge_list(base: list[Any], patch: list[Any]) -> list[Any]:
    # Strategic merge keys most Kubernetes lists (containers, env, volumes) by name.
    if not all(isinstance(x, dict) and "name" in x for x in [*base, *patch]):
        return patch
    out = list(base)
    index = {x["name"]: i for i, x in enumerate(out)}
    for p in patch:
        if p.get("$patch") == "delete":
            if p["name"] in index:
                out[index[p["name"]]] = None
            continue
        if p["name"] in index:
            out[index[p["name"]]] = _merge(out[index[p["name"]]], p)
        else:
            out.append(p)
    return [x for x in out if x is not None]


class KustomizeBuilder:
    """Builds kustomize directories of one tree, memoised per directory."""

    def __init__(self, tree: Tree, *, read_text: Callable[[str], str | None]) -> None:
        self.tree = tree
        self._read_text = read_text
        self._memo: dict[str, list[Item]] = {}
        self._stack: set[str] = set()

    # -- references (for deciding what is included where) -------------------------------
    def references(self, directory: str) -> Iterator[str]:
        """Every file or directory the kustomization in ``directory`` refers to."""
        yield from self.manifest_references(directory)
        yield from self.data_references(directory)

    def manifest_references(self, directory: str) -> Iterator[str]:
        """The files and directories the kustomization in ``directory`` reads as manifests."""
        k = self.tree.kustomizations.get(directory)
        if k is None:
            return
        for key in ("resources", "components", "bases", "transformers", "generators"):
            for ref in _entries(k.get(key)):
                if isinstance(ref, str) and "://" not in ref:
                    yield norm(directory, ref)
        for key in ("patchesStrategicMerge",):
            for ref in _entries(k.get(key)):
                if isinstance(ref, str) and "\n" not in ref:
                    yield norm(directory, ref)
        for key in ("patches", "patchesJson6902"):
            for p in _entries(k.get(key)):
                if isinstance(p, dict) and isinstance(p.get("path"), str):
                    yield norm(directory, p["path"])

    def data_references(self, directory: str) -> Iterator[str]:
        """The files the kustomization in ``directory`` reads as generator data.

        A configMapGenerator or secretGenerator copies ``files`` and ``envs`` as text: kustomize
        never parses them as manifests, so they need not be YAML at all.
        """
        k = self.tree.kustomizations.get(directory)
        if k is None:
            return
        for key in ("configMapGenerator", "secretGenerator"):
            for gen in _entries(k.get(key)):
                if not isinstance(gen, dict):
                    continue
                for f in _entries(gen.get("files")):
                    if isinstance(f, str):
                        yield norm(directory, f.split("=", 1)[-1])
                for f in [*_entries(gen.get("envs")), gen.get("env")]:
                    if isinstance(f, str):
                        yield norm(directory, f)

    # -- building ------------------------------------------------------------------------
    def build(self, directory: str) -> list[Item]:
        """Objects ``kustomize build directory`` emits (Flux's generated kustomization when
        the directory has no kustomization file)."""
        if directory in self._memo:
            return self._memo[directory]
        if directory in self._stack:
            return []
        self._stack.add(directory)
        try:
            if directory in self.tree.kustomizations:
                items = self._build_kustomization(directory, self.tree.kustomizations[directory])
            else:
                items = self._build_generated(directory)
        finally:
            self._stack.discard(directory)
        self._memo[directory] = items
        return items

    def auto_files(self, directory: str) -> Iterator[str]:
        """Files Flux's generator includes for a directory without a kustomization file:
        every manifest below it, stopping at directories that have their own."""
        prefix = "" if directory == "." else directory + "/"
        for rel in self.tree.docs:
            if rel.startswith(prefix) and not self._claimed(parent(rel), below=directory):
                yield rel

    def auto_dirs(self, directory: str) -> Iterator[str]:
        """Top-most directories with a kustomization file below ``directory``."""
        prefix = "" if directory == "." else directory + "/"
        for d in self.tree.kustomizations:
            if d == directory or not d.startswith(prefix):
                continue
            if not self._claimed(parent(d), below=directory):
                yield d

    def _claimed(self, start: str, *, below: str) -> bool:
        """Whether ``start`` or a directory between it and ``below`` (exclusive) has a
        kustomization file, which then owns what lies under it."""
        prefix = "" if below == "." else below + "/"
        d = start
        while d != below and d != "." and d.startswith(prefix.rstrip("/")):
            if d in self.tree.kustomizations:
                return True
            d = parent(d)
        return False

    def _build_generated(self, directory: str) -> list[Item]:
        items: list[Item] = []
        for rel in sorted(self.auto_files(directory)):
            items.extend(Item(d, d.data) for d in self.tree.docs.get(rel, ()))
        for d in sorted(self.auto_dirs(directory)):
            items.extend(self.build(d))
        return items

    def _resource(self, ref: str) -> list[Item]:
        if self.tree.is_dir(ref) or ref in self.tree.kustomizations:
            return self.build(ref)
        return [Item(d, d.data) for d in self.tree.docs.get(ref, ())]

    def _build_kustomization(self, directory: str, k: dict[str, Any]) -> list[Item]:
        items: list[Item] = []
        for key in ("resources", "bases"):
            for ref in _entries(k.get(key)):
                if isinstance(ref, str) and "://" not in ref:
                    items.extend(self._resource(norm(directory, ref)))
        for ref in _entries(k.get("components")):
            if isinstance(ref, str) and "://" not in ref:
                items.extend(self.build(norm(directory, ref)))
        items.extend(self._generate(directory, k))
        items = self.apply_patches(directory, k, items)
        items = rename(items, prefix=k.get("namePrefix"), suffix=k.get("nameSuffix"))
        namespace = k.get("namespace")
        for ref in _entries(k.get("transformers")):
            if not isinstance(ref, str) or "://" in ref:
                continue
            target = norm(directory, ref)
            sub = self.tree.kustomizations.get(target)
            if sub is not None and isinstance(sub.get("namespace"), str):
                namespace = sub["namespace"]
            elif sub is None and not self.tree.is_file(target) and directory != ".":
                # A transformers directory missing from a partial tree: home-ops layouts use
                # it to set the namespace named after the directory (apps/<namespace>/).
                namespace = directory.rsplit("/", 1)[-1]
        if isinstance(namespace, str) and namespace:
            items = [Item(i.doc, i.data, namespace, i.generated) for i in items]
        return items

    def _generate(self, directory: str, k: dict[str, Any]) -> list[Item]:
        out: list[Item] = []
        options = k.get("generatorOptions") if isinstance(k.get("generatorOptions"), dict) else {}
        assert isinstance(options, dict)
        for key, kind in (("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")):
            for i, gen in enumerate(_entries(k.get(key))):
                if not isinstance(gen, dict) or not gen.get("name"):
                    continue
                out.append(
                    self._generated(
                        directory, kind=kind, key=key, index=i, gen=gen, options=options
                    )
                )
        return out

    def _generated(
        self,
        directory: str,
        *,
        kind: str,
        key: str,
        index: int,
        gen: dict[str, Any],
        options: dict[str, Any],
    ) -> Item:
        data: dict[str, str] = {}
        for f in _entries(gen.get("files")):
            if not isinstance(f, str):
                continue
            name, _, path = f.partition("=") if "=" in f else (f.rsplit("/", 1)[-1], "", f)
            text = self._read_text(norm(directory, path))
            if text is not None:
                data[name] = text
        for env in [*_entries(gen.get("envs")), gen.get("env")]:
            if isinstance(env, str):
                text = self._read_text(norm(directory, env)) or ""
                for line in text.splitlines():
                    line = line.strip()
                    if line and not line.startswith("#") and "=" in line:
                        n, _, v = line.partition("=")
                        data[n.strip()] = v
        for lit in _entries(gen.get("literals")):
            if isinstance(lit, str) and "=" in lit:
                n, _, v = lit.partition("=")
                data[n.strip()] = v.strip('"') if v.startswith('"') else v
        own = gen.get("options") if isinstance(gen.get("options"), dict) else {}
        assert isinstance(own, dict)
        meta: dict[str, Any] = {"name": str(gen["name"])}
        labels = {**(options.get("labels") or {}), **(own.get("labels") or {})}
        annotations = {**(options.get("annotations") or {}), **(own.get("annotations") or {})}
        if labels:
            meta["labels"] = labels
        if annotations:
            meta["annotations"] = annotations
        if gen.get("namespace"):
            meta["namespace"] = str(gen["namespace"])
        body: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": meta}
        if kind == "Secret":
            body["type"] = str(gen.get("type") or "Opaque")
            body["data"] = {n: base64.b64encode(v.encode()).decode() for n, v in data.items()}
        else:
            body["data"] = data
        disable = own.get("disableNameSuffixHash", options.get("disableNameSuffixHash", False))
        if not disable:
            meta["name"] = f"{gen['name']}-{name_hash(kind, body)}"
        kfile = self._kustomization_file(directory)
        doc = Doc(kfile, 0, 1, body, (key, index))
        return Item(doc, body, generated=True)

    def _kustomization_file(self, directory: str) -> str:
        prefix = "" if directory == "." else directory + "/"
        for name in KUSTOMIZATION_FILES:
            if prefix + name in self.tree.docs or prefix + name in self.tree.texts:
                return prefix + name
        return prefix + KUSTOMIZATION_FILES[0]

    # -- patches -------------------------------------------------------------------------
    def apply_patches(self, directory: str, k: dict[str, Any], items: list[Item]) -> list[Item]:
        """``items`` with the kustomization's (or Flux Kustomization's) patches applied."""
        patches: list[tuple[Any, dict[str, Any] | None]] = []
        for p in _entries(k.get("patches")) + _entries(k.get("patchesJson6902")):
            if not isinstance(p, dict):
                continue
            body = p.get("patch")
            if body is None and isinstance(p.get("path"), str):
                body = self._read_text(norm(directory, p["path"]))
            target = p.get("target") if isinstance(p.get("target"), dict) else None
            patches.extend((doc, target) for doc in parse_patches(body))
        for p in _entries(k.get("patchesStrategicMerge")):
            body = p if isinstance(p, str) and "\n" in p else None
            if body is None and isinstance(p, str):
                body = self._read_text(norm(directory, p))
            patches.extend((doc, None) for doc in parse_patches(body))
        if not patches:
            return items
        out = list(items)
        for patch, target in patches:
            for n, item in enumerate(out):
                if patch_targets(item.data, patch=patch, target=target):
                    out[n] = Item(
                        item.doc, apply_patch(item.data, patch), item.namespace, item.generated
                    )
        return out


def rename(items: list[Item], *, prefix: Any, suffix: Any) -> list[Item]:
    """``items`` with kustomize's ``namePrefix``/``nameSuffix`` applied (not to Namespaces)."""
    pre = prefix if isinstance(prefix, str) else ""
    suf = suffix if isinstance(suffix, str) else ""
    if not pre and not suf:
        return items
    out: list[Item] = []
    for i in items:
        meta = i.data.get("metadata")
        if i.data.get("kind") == "Namespace" or not isinstance(meta, dict) or "name" not in meta:
            out.append(i)
            continue
        data = {**i.data, "metadata": {**meta, "name": f"{pre}{meta['name']}{suf}"}}
        out.append(Item(i.doc, data, i.namespace, i.generated))
    return out


def parse_patches(body: Any) -> list[Any]:
    """The patch documents of a kustomize ``patches[].patch`` (an object, a JSON 6902 list or
    YAML text of either); unparsable text gives none, as the build skips it."""
    if isinstance(body, (dict, list)):
        return [body]
    if not isinstance(body, str):
        return []
    try:
        docs = _yaml.load_all(body)
    except yaml.YAMLError:
        return []
    return [d for d in docs if isinstance(d, (dict, list))]


def patch_targets(obj: dict[str, Any], *, patch: Any, target: dict[str, Any] | None) -> bool:
    """Whether a patch applies to ``obj``: by ``target`` (kind, name, namespace, group, version
    as anchored regular expressions, and label and annotation selectors) or, without one, by
    the strategic-merge patch's own kind, name and namespace."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    if target is not None:
        api = str(obj.get("apiVersion", ""))
        group, _, version = api.rpartition("/")
        checks = (
            ("kind", obj.get("kind")),
            ("name", meta.get("name")),
            ("namespace", meta.get("namespace")),
            ("group", group),
            ("version", version),
        )
        for key, have in checks:
            want = target.get(key)
            if want is not None and not _match(str(want), str(have or "")):
                return False
        for key, field_name in (("labelSelector", "labels"), ("annotationSelector", "annotations")):
            sel = target.get(key)
            if isinstance(sel, str) and sel.strip():
                have_map = meta.get(field_name)
                if not selector_matches(sel, have_map if isinstance(have_map, dict) else {}):
                    return False
        return True
    if not isinstance(patch, dict):
        return False
    pmeta = patch.get("metadata") if isinstance(patch.get("metadata"), dict) else {}
    assert isinstance(pmeta, dict)
    return bool(
        patch.get("kind") == obj.get("kind")
        and pmeta.get("name") == meta.get("name")
        and (pmeta.get("namespace") in (None, meta.get("namespace")))
    )


_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\(([^)]*)\)\s*$")


def _selector_terms(selector: str) -> Iterator[str]:
    # Terms are comma-separated, but the values of `in (a,b)` hold commas too.
    depth, start = 0, 0
    for i, c in enumerate(selector):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            yield selector[start:i]
            start = i + 1
    yield selector[start:]


def selector_matches(selector: str, labels: dict[str, Any]) -> bool:
    """Whether ``labels`` match a Kubernetes label selector string (apimachinery
    ``labels.Parse``): ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)`` and
    ``k notin (a,b)``, all of them. ``!=`` and ``notin`` match an absent label, as in
    Kubernetes. A term that does not parse matches nothing."""
    for raw in _selector_terms(selector):
        term = raw.strip()
        if not term:
            continue
        m = _SET_TERM.match(term)
        if m is not None:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            present = key in labels and str(labels[key]) in values
            if present != (op == "in"):
                return False
            continue
        if term.startswith("!"):
            if term[1:].strip() in labels:
                return False
            continue
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = term.partition(op)
                have = labels.get(key.strip())
                equal = have is not None and str(have) == value.strip()
                if equal == (op == "!="):
                    return False
                break
        else:
            if term not in labels:
                return False
    return True


def _match(pattern: str, value: str) -> bool:
    # kustomize target names and kinds are anchored regular expressions.
    try:
        return re.fullmatch(pattern, value) is not None
    except re.error:
        return pattern == value


def apply_patch(obj: dict[str, Any], patch: Any) -> dict[str, Any]:
    """``obj`` with one patch applied: a JSON 6902 list, or a strategic merge as a deep merge.
    A patch that does not apply leaves ``obj`` as it was."""
    if isinstance(patch, list):
        try:
            result = jsonpatch.apply_patch(obj, patch, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError):
            return obj
        return result if isinstance(result, dict) else obj
    merged = _merge(obj, {k: v for k, v in patch.items() if k not in ("apiVersion", "kind")})
    if not isinstance(merged, dict):
        return obj
    # kustomize's PatchTransformer sets the patch's name and namespace to the target's (the
    # `name: _` of patches selected by `target`), unless allowNameChange.
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(merged.get("metadata"), dict):
        kept = {k: meta[k] for k in ("name", "namespace") if k in meta}
        merged["metadata"] = {**merged["metadata"], **kept}
    return merged
