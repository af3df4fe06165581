"""Argo CD roots: Applications, ApplicationSets and what their sources deploy.

Mirrors Argo CD's documented behaviour (argo-cd docs/user-guide and
docs/operator-manual/applicationset):

- an Application's ``spec.source`` (or each of ``spec.sources``) is either a Helm chart from a
  chart repository (``chart`` set), or a ``path`` in git: a directory with ``Chart.yaml`` is a
  Helm chart, one with a kustomization file is built with kustomize, any other is a directory
  of plain manifests (only its own files, every file below with ``directory.recurse: true``,
  filtered by ``directory.include``/``exclude`` globs). Namespaced objects without a namespace
  land in ``destination.namespace``;
- Helm values: ``helm.valueFiles`` in order (relative to the chart's path, ``$<ref>/…`` to a
  ``ref`` source), then ``helm.values`` (a YAML string) or ``helm.valuesObject`` (which wins
  when both are given), then ``helm.parameters``;
- an ApplicationSet renders ``spec.template`` once per parameter set of its generators: the
  list generator's ``elements``; the git directory generator's ``directories`` (``path``
  globs as Go's path.Match, ``exclude`` entries winning; parameters ``path``,
  ``path.basename``, ``path.basenameNormalized``, ``path[n]``); the git file generator's
  ``files`` (``**`` globs; the file's keys flattened, plus ``path`` (its directory),
  ``path.basename``, ``path.filename``, ``path[n]``). With ``goTemplate: true`` the same
  values are read as ``{{.path.path}}``, ``{{.path.basename}}``, ``{{index .path.segments
  n}}`` and nested keys; ``matrix`` and ``merge`` compose those; the ``clusters`` generator
  reads the local cluster and the tree's cluster Secrets. Generators that read a forge, a
  cluster or a service (``NETWORK_GENERATORS``) are reported, not expanded;
- a kustomization's ``helmCharts`` (kustomize's HelmChartInflationGenerator, used by Argo CD
  with ``--enable-helm``): ``valuesFile`` first, ``valuesInline`` over it (the default
  ``valuesMerge: override``), then ``additionalValuesFiles``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpushift import _yaml
from gpushift.flux import KUSTOMIZATION_FILES, Doc, Item, Tree, norm, parent
from gpushift.flux import KustomizeBuilder as Builder
from gpushift.gitops._model import Manifest, Source, ValueLayer
from gpushift.gitops._subcharts import dependencies

_ARGO = "argoproj.io/"
_KINDS = ("Application", "ApplicationSet")

Resolve = Callable[[str], str | None]


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _str(v: Any) -> str | None:
    return None if v is None or v == "" else str(v)


def is_argo(data: Mapping[str, Any]) -> bool:
    """Whether a document is an Argo CD Application or ApplicationSet."""
    return data.get("kind") in _KINDS and str(data.get("apiVersion", "")).startswith(_ARGO)


@dataclass(frozen=True, slots=True)
class ChartSource:
    """A Helm chart that an Application or a kustomize ``helmCharts`` entry installs.

    ``obj`` is the Application (or the kustomization's entry as a ``HelmChart`` object);
    ``layers`` are the user-given values, lowest precedence first.
    """

    obj: Manifest
    chart_name: str
    version: str | None
    release_name: str
    namespace: str | None
    layers: tuple[ValueLayer, ...]


@dataclass(frozen=True, slots=True)
class PathUnit:
    """Manifests an Application's git ``path`` deploys, with the destination namespace."""

    items: list[Item]
    namespace: str | None
    directory: str


# -- ApplicationSets ----------------------------------------------------------------------


def applications(
    tree: Tree,
    obj: Manifest,
    make: Callable[[dict[str, Any], Source], Manifest],
) -> list[Manifest]:
    """The Applications ``obj`` stands for: itself, or those its ApplicationSet generates.

    ``make`` turns a rendered Application body (and where its template is written) into an
    object of the model.
    """
    if obj.kind == "Application":
        return [obj]
    spec = _dict(obj.body.get("spec"))
    go = spec.get("goTemplate") is True
    out: list[Manifest] = []
    for gen in _list(spec.get("generators")):
        gen = _dict(gen)
        template = _merge(_dict(spec.get("template")), _dict(_first(gen).get("template")))
        for params in _generator_params(tree, gen, go=go):
            body = _render(template, params, go=go)
            if not isinstance(body, dict):
                continue
            body = {"apiVersion": obj.api_version, "kind": "Application", **body}
            meta = _dict(body.get("metadata"))
            body["metadata"] = {"namespace": obj.namespace, **meta}
            out.append(make(body, obj.source.child(("spec", "template"))))
    return out


def _first(gen: Mapping[str, Any]) -> dict[str, Any]:
    for key in ("list", "git", "clusters", "matrix", "merge"):
        if isinstance(gen.get(key), dict):
            return _dict(gen[key])
    return {}


#: Generators whose parameters come from outside the repository (a forge's API, a cluster's
#: objects, a plugin service): gpushift does not expand them.
NETWORK_GENERATORS = ("scmProvider", "pullRequest", "clusterDecisionResource", "plugin")


def _leaves(
    gens: Any, keys: tuple[str | int, ...]
) -> Iterator[tuple[dict[str, Any], tuple[str | int, ...]]]:
    """Every generator below a ``generators`` list, through matrix and merge, with its keys."""
    for i, gen in enumerate(_list(gens)):
        gen = _dict(gen)
        here = (*keys, i)
        nested = next((k for k in ("matrix", "merge") if isinstance(gen.get(k), dict)), None)
        if nested is None:
            yield gen, here
        else:
            yield from _leaves(gen[nested].get("generators"), (*here, nested, "generators"))


def unexpanded_generators(obj: Manifest) -> list[tuple[str, tuple[str | int, ...]]]:
    """The network generators of an ApplicationSet (``NETWORK_GENERATORS``), each with the key
    path of its entry: the applications they stand for cannot be known offline."""
    if obj.kind != "ApplicationSet":
        return []
    spec = _dict(obj.body.get("spec"))
    out = []
    for gen, keys in _leaves(spec.get("generators"), ("spec", "generators")):
        kind = next((k for k in NETWORK_GENERATORS if k in gen), None)
        if kind is not None:
            out.append((kind, keys))
    return out


def parameter_files(tree: Tree, obj: Manifest) -> set[str]:
    """Files an ApplicationSet's git file generators read as parameters (not manifests)."""
    out: set[str] = set()
    if obj.kind != "ApplicationSet":
        return out
    for gen, _keys in _leaves(_dict(obj.body.get("spec")).get("generators"), ()):
        for entry in _list(_dict(gen.get("git")).get("files")):
            pattern = _str(_dict(entry).get("path"))
            if pattern is None:
                continue
            for cand in _candidates(pattern):
                rx = _glob(cand, doublestar=True)
                found = {f for f in tree.texts if rx.match(f)}
                if found:
                    out |= found
                    break
    return out


def _generator_params(tree: Tree, gen: Mapping[str, Any], *, go: bool) -> Iterator[Any]:
    if isinstance(gen.get("list"), dict):
        for element in _list(_dict(gen["list"]).get("elements")):
            if isinstance(element, dict):
                yield element if go else _flatten(element)
        return
    if isinstance(gen.get("clusters"), dict):
        yield from _clusters(tree, _dict(gen["clusters"]), go=go)
        return
    if isinstance(gen.get("matrix"), dict):
        yield from _matrix(tree, _dict(gen["matrix"]), go=go)
        return
    if isinstance(gen.get("merge"), dict):
        yield from _merge_params(tree, _dict(gen["merge"]), go=go)
        return
    git = _dict(gen.get("git"))
    prefix = str(git.get("pathParamPrefix") or "")
    if git.get("directories"):
        yield from _git_directories(tree, _list(git.get("directories")), go=go, param_prefix=prefix)
    if git.get("files"):
        yield from _git_files(tree, _list(git.get("files")), go=go, param_prefix=prefix)


# Matrix and merge follow argo-cd docs/operator-manual/applicationset/Generators-Matrix.md and
# Generators-Merge.md (applicationset/generators/matrix.go, merge.go).
def _matrix(tree: Tree, spec: Mapping[str, Any], *, go: bool) -> Iterator[Any]:
    """Every combination of the child generators' parameter sets, in order. A later child is
    rendered with the earlier one's parameters first (a git path may read ``{{path}}``). With
    ``goTemplate`` the earlier child's values win (mergo.Merge); otherwise a key both give with
    different values fails the whole generator, as Argo CD's CombineStringMaps does."""
    children = [_dict(g) for g in _list(spec.get("generators"))]
    if len(children) < 2:
        return
    acc = list(_generator_params(tree, children[0], go=go))
    for child in children[1:]:
        out: list[Any] = []
        for prev in acc:
            rendered = _render(child, prev, go=go)
            for cur in _generator_params(tree, _dict(rendered), go=go):
                if go:
                    out.append(_fill(dict(prev), cur))
                    continue
                if any(k in prev and prev[k] != v for k, v in cur.items()):
                    return
                out.append({**prev, **cur})
        acc = out
    yield from acc


def _empty(v: Any) -> bool:
    # mergo's isEmptyValue: a zero value is filled in even without WithOverride.
    return v is None or v is False or v == 0 or v == "" or v == {} or v == []


def _fill(dst: dict[str, Any], src: Mapping[str, Any]) -> dict[str, Any]:
    """mergo.Merge without override: ``src`` fills what ``dst`` lacks, maps deeply."""
    for k, v in src.items():
        if isinstance(dst.get(k), dict) and isinstance(v, dict):
            dst[k] = _fill(dict(dst[k]), v)
        elif k not in dst or _empty(dst[k]):
            dst[k] = v
    return dst


def _merge_params(tree: Tree, spec: Mapping[str, Any], *, go: bool) -> Iterator[Any]:
    """The first child's parameter sets, each overridden by the set of every later child that
    has the same values for ``mergeKeys`` (later children win; sets matching no base set are
    dropped). A later child with two sets under one key fails the whole generator."""
    keys = sorted({str(k) for k in _list(spec.get("mergeKeys"))})
    children = [_dict(g) for g in _list(spec.get("generators"))]
    if len(children) < 2 or not keys:
        return

    def key(params: Mapping[str, Any]) -> str:
        # Argo CD looks each merge key up at the top level of the parameter set.
        return repr([params.get(k) for k in keys])

    base = list(_generator_params(tree, children[0], go=go))
    for child in children[1:]:
        overrides: dict[str, Any] = {}
        for params in _generator_params(tree, child, go=go):
            if key(params) in overrides:
                return
            overrides[key(params)] = params
        base = [
            (_merge(b, overrides[key(b)]) if go else {**b, **overrides[key(b)]})
            if key(b) in overrides
            else b
            for b in base
        ]
    yield from base


#: The label that marks an Argo CD cluster Secret, and the local cluster Argo CD runs in,
#: which has no Secret (argo-cd applicationset/generators/cluster.go).
CLUSTER_SECRET_LABEL = ("argocd.argoproj.io/secret-type", "cluster")
_LOCAL_CLUSTER = ("in-cluster", "https://kubernetes.default.svc")


@dataclass(frozen=True, slots=True)
class _Cluster:
    name: str
    server: str
    project: str
    labels: dict[str, str]
    annotations: dict[str, str]


def _secret_field(data: Mapping[str, Any], key: str) -> str:
    string_data = _dict(data.get("stringData"))
    if key in string_data:
        return "" if string_data[key] is None else str(string_data[key])
    raw = _dict(data.get("data")).get(key)
    if raw is None:
        return ""
    try:
        return base64.b64decode(str(raw), validate=False).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return str(raw)


def _cluster_secrets(tree: Tree) -> list[_Cluster]:
    """The Argo CD cluster Secrets written in the tree, by name."""
    out = []
    for d in docs_of(tree):
        meta = _dict(d.data.get("metadata"))
        labels = {str(k): str(v) for k, v in _dict(meta.get("labels")).items()}
        if d.data.get("kind") != "Secret" or labels.get(CLUSTER_SECRET_LABEL[0]) != "cluster":
            continue
        annotations = {str(k): str(v) for k, v in _dict(meta.get("annotations")).items()}
        name = _secret_field(d.data, "name")
        server = _secret_field(d.data, "server")
        out.append(_Cluster(name, server, _secret_field(d.data, "project"), labels, annotations))
    return sorted(out, key=lambda c: c.name)


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels, matchExpressions) against ``labels``."""
    for k, v in _dict(selector.get("matchLabels")).items():
        if labels.get(str(k)) != str(v):
            return False
    for expr in _list(selector.get("matchExpressions")):
        expr = _dict(expr)
        key, op = str(expr.get("key", "")), str(expr.get("operator", ""))
        values = {str(v) for v in _list(expr.get("values"))}
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _normalized(name: str) -> str:
    # cluster.go sanitizeName: lower case, [^-a-z0-9.] to '-', at most 253, trimmed of '-.'.
    return re.sub(r"[^-a-z0-9.]", "-", name.lower())[:253].strip("-.")


def _clusters(tree: Tree, spec: Mapping[str, Any], *, go: bool) -> Iterator[Any]:
    """The cluster generator, offline: the local ``in-cluster`` (unless the selector is not
    empty, since it has no labels, or a Secret stands for it), then every cluster Secret of the
    tree the selector matches. ``values`` are rendered with each cluster's parameters."""
    selector = _dict(spec.get("selector"))
    values = _dict(spec.get("values"))
    secrets = _cluster_secrets(tree)
    found: list[_Cluster] = []
    empty = not selector.get("matchLabels") and not selector.get("matchExpressions")
    if empty and not any(c.server == _LOCAL_CLUSTER[1] for c in secrets):
        found.append(_Cluster(*_LOCAL_CLUSTER, "", {}, {}))
    found += [c for c in secrets if _selects(selector, c.labels)]
    for c in found:
        base: dict[str, Any] = {
            "name": c.name,
            "nameNormalized": _normalized(c.name),
            "server": c.server,
            "project": c.project,
        }
        if go:
            params = {**base, "metadata": {"labels": c.labels, "annotations": c.annotations}}
            params["values"] = {str(k): _render(v, params, go=True) for k, v in values.items()}
        else:
            params = dict(base)
            params.update({f"metadata.labels.{k}": v for k, v in c.labels.items()})
            params.update({f"metadata.annotations.{k}": v for k, v in c.annotations.items()})
            rendered = {f"values.{k}": _render(v, params, go=False) for k, v in values.items()}
            params.update(rendered)
        yield params


def _glob(pattern: str, *, doublestar: bool) -> re.Pattern[str]:
    """Go's path.Match (``*`` and ``?`` stay within a segment), with ``**`` across segments
    for the file generator."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if doublestar and pattern.startswith("**", i):
            out.append(".*")
            i += 2
            if pattern.startswith("/", i):
                out[-1] = "(?:.*/)?"
                i += 1
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = pattern.find("]", i)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end].replace("|", "")
                out.append("[" + ("^" + body[1:] if body.startswith("^") else body) + "]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z")


def _has_glob(part: str) -> bool:
    return any(c in part for c in "*?[")


def _candidates(pattern: str) -> list[str]:
    """``pattern`` and shorter forms without leading literal components: the checked tree may
    be below the repository root the generator names paths from."""
    parts = pattern.strip("/").split("/")
    out = []
    for i in range(len(parts)):
        if i > 0 and _has_glob(parts[i - 1]):
            break
        out.append("/".join(parts[i:]))
    return out


def _dropped(pattern: str, cand: str) -> str:
    """The leading components of ``pattern`` that ``cand`` leaves out ("" or ending in /)."""
    whole = pattern.strip("/")
    return whole[: len(whole) - len(cand)]


def _match_dirs(tree: Tree, pattern: str) -> tuple[str, list[str]]:
    """Directories of the tree matching ``pattern``, with the prefix dropped to match."""
    for cand in _candidates(pattern):
        rx = _glob(cand, doublestar=False)
        found = sorted(d for d in tree.dirs if d != "." and rx.match(d))
        if found:
            return _dropped(pattern, cand), found
    return "", []


def _path_params(
    directory: str, *, go: bool, filename: str | None = None, prefix: str = ""
) -> dict[str, Any]:
    """The git generators' path parameters; ``prefix`` is ``pathParamPrefix`` (``prefix.path``
    and so on, ``{{.prefix.path.path}}`` with goTemplate), which keeps two git generators of
    one matrix apart."""
    params = _unprefixed_path_params(directory, go=go, filename=filename)
    if not prefix:
        return params
    if go:
        return {prefix: params}
    return {f"{prefix}.{k}": v for k, v in params.items()}


def _unprefixed_path_params(
    directory: str, *, go: bool, filename: str | None = None
) -> dict[str, Any]:
    segments = [] if directory in ("", ".") else directory.split("/")
    base = segments[-1] if segments else ""
    normal = re.sub(r"[^a-zA-Z0-9-.]", "-", base)
    if go:
        p: dict[str, Any] = {
            "path": directory,
            "basename": base,
            "basenameNormalized": normal,
            "segments": segments,
        }
        if filename is not None:
            p["filename"] = filename
            p["filenameNormalized"] = re.sub(r"[^a-zA-Z0-9-.]", "-", filename)
        return {"path": p}
    flat: dict[str, Any] = {"path": directory, "path.basename": base}
    flat["path.basenameNormalized"] = normal
    for n, seg in enumerate(segments):
        flat[f"path[{n}]"] = seg
    if filename is not None:
        flat["path.filename"] = filename
        flat["path.filenameNormalized"] = re.sub(r"[^a-zA-Z0-9-.]", "-", filename)
    return flat


def _git_directories(
    tree: Tree, entries: list[Any], *, go: bool, param_prefix: str
) -> Iterator[Any]:
    include: dict[str, str] = {}
    excluded: set[str] = set()
    for entry in entries:
        pattern = _str(_dict(entry).get("path"))
        if pattern is None:
            continue
        prefix, dirs = _match_dirs(tree, pattern)
        if _dict(entry).get("exclude") is True:
            excluded.update(dirs)
        else:
            for d in dirs:
                if not d.split("/")[-1].startswith("."):
                    include[d] = prefix + d
    for d, repo_path in sorted(include.items()):
        if d not in excluded:
            yield _path_params(repo_path, go=go, prefix=param_prefix)


def _git_files(tree: Tree, entries: list[Any], *, go: bool, param_prefix: str) -> Iterator[Any]:
    for entry in entries:
        pattern = _str(_dict(entry).get("path"))
        if pattern is None or _dict(entry).get("exclude") is True:
            continue
        for cand in _candidates(pattern):
            rx = _glob(cand, doublestar=True)
            files = sorted(f for f in tree.texts if rx.match(f))
            if not files:
                continue
            prefix = _dropped(pattern, cand)
            for f in files:
                try:
                    data = _yaml.load(tree.texts[f])
                except yaml.YAMLError:
                    continue
                for doc in data if isinstance(data, list) else [data]:
                    if not isinstance(doc, dict):
                        continue
                    directory = prefix + parent(f) if parent(f) != "." else prefix.rstrip("/")
                    name = f.rsplit("/", 1)[-1]
                    params = _path_params(directory, go=go, filename=name, prefix=param_prefix)
                    yield {**doc, **params} if go else {**_flatten(doc), **params}
            break


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


_FAST = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")
_GO = re.compile(r"\{\{-?\s*(?:index\s+\.([\w.]+)\s+(\d+)|\.([\w.]+))\s*-?\}\}")


def _render(node: Any, params: Any, *, go: bool) -> Any:
    """The template with parameters substituted in every string (fasttemplate's
    ``{{key}}`` or Go's ``{{.a.b}}`` and ``{{index .a.b n}}``); unknown keys stay as written."""
    if isinstance(node, dict):
        return {k: _render(v, params, go=go) for k, v in node.items()}
    if isinstance(node, list):
        return [_render(v, params, go=go) for v in node]
    if not isinstance(node, str) or "{{" not in node:
        return node
    if go:
        return _GO.sub(lambda m: _go_value(m, params), node)
    return _FAST.sub(
        lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), node
    )


def _go_value(m: re.Match[str], params: Any) -> str:
    dotted = m.group(1) or m.group(3)
    cur: Any = params
    for k in dotted.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return m.group(0)
        cur = cur[k]
    if m.group(2) is not None:
        if not isinstance(cur, list) or int(m.group(2)) >= len(cur):
            return m.group(0)
        cur = cur[int(m.group(2))]
    return "" if cur is None else str(cur)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


# -- what an Application deploys ----------------------------------------------------------


def _sources(app: Manifest) -> list[tuple[dict[str, Any], tuple[str | int, ...]]]:
    spec = _dict(app.body.get("spec"))
    if isinstance(spec.get("sources"), list):
        return [
            (s, ("spec", "sources", i))
            for i, s in enumerate(spec["sources"])
            if isinstance(s, dict)
        ]
    source = spec.get("source")
    return [(source, ("spec", "source"))] if isinstance(source, dict) else []


def destination_namespace(app: Manifest) -> str | None:
    """``spec.destination.namespace`` of an Application."""
    return _str(_dict(_dict(app.body.get("spec")).get("destination")).get("namespace"))


def _chart_dir(tree: Tree, directory: str) -> bool:
    return f"{directory}/Chart.yaml" in tree.texts or (
        directory == "." and "Chart.yaml" in tree.texts
    )


def path_units(tree: Tree, builder: Builder, app: Manifest, resolve: Resolve) -> Iterator[PathUnit]:
    """The manifests of each git ``path`` source of ``app`` that is in the checked tree.

    Helm chart directories deploy through ``chart_sources`` instead.
    """
    ns = destination_namespace(app)
    for source, _keys in _sources(app):
        path = _str(source.get("path"))
        if path is None or source.get("chart"):
            continue
        directory = resolve(path)
        if directory is None or _chart_dir(tree, directory):
            continue
        if directory in tree.kustomizations:
            items = builder.build(directory)
        else:
            items = _directory_items(tree, directory, _dict(source.get("directory")))
        yield PathUnit([_in_namespace(i, ns) for i in items], ns, directory)


def _in_namespace(item: Item, ns: str | None) -> Item:
    if (
        ns is None
        or item.namespace is not None
        or _dict(item.data.get("metadata")).get("namespace")
    ):
        return item
    return Item(item.doc, item.data, ns, item.generated)


def _directory_items(tree: Tree, directory: str, options: Mapping[str, Any]) -> list[Item]:
    recurse = options.get("recurse") is True
    include = _str(options.get("include"))
    exclude = _str(options.get("exclude"))
    prefix = "" if directory == "." else directory + "/"
    items: list[Item] = []
    for rel in sorted(tree.docs):
        if not rel.startswith(prefix):
            continue
        inner = rel[len(prefix) :]
        if "/" in inner and not recurse:
            continue
        if rel.rsplit("/", 1)[-1] in KUSTOMIZATION_FILES:
            continue
        if include and not _any_glob(include, inner):
            continue
        if exclude and _any_glob(exclude, inner):
            continue
        items.extend(Item(d, d.data) for d in tree.docs[rel])
    return items


def _any_glob(patterns: str, rel: str) -> bool:
    # directory.include/exclude: a glob or {a,b} alternatives, matched against the file's path.
    body = patterns.strip()
    alts = body[1:-1].split(",") if body.startswith("{") and body.endswith("}") else [body]
    name = rel.rsplit("/", 1)[-1]
    return any(
        _glob(a.strip(), doublestar=True).match(rel)
        or _glob(a.strip(), doublestar=True).match(name)
        for a in alts
        if a.strip()
    )


def app_directories(tree: Tree, app_body: Mapping[str, Any], resolve: Resolve) -> Iterator[str]:
    """Directories an Application body's git paths name (for root discovery)."""
    spec = _dict(app_body.get("spec"))
    sources: list[Any] = _list(spec.get("sources")) or [spec.get("source")]
    for s in sources:
        path = _str(_dict(s).get("path"))
        if path is not None and not _dict(s).get("chart"):
            d = resolve(path)
            if d is not None:
                yield d


# -- charts -------------------------------------------------------------------------------


Load = Callable[[str], tuple[Any, Source] | None]


def chart_sources(tree: Tree, app: Manifest, resolve: Resolve, load: Load) -> Iterator[ChartSource]:
    """Helm charts ``app`` installs: chart-repository sources and git chart directories
    (a chart itself, or the known charts it depends on)."""
    ns = destination_namespace(app)
    refs = {str(s["ref"]): s for s, _k in _sources(app) if isinstance(s.get("ref"), str)}
    for source, keys in _sources(app):
        helm = _dict(source.get("helm"))
        release = _str(helm.get("releaseName")) or app.name
        chart = _str(source.get("chart"))
        src = app.source.child(keys)
        if chart is not None:
            layers = _helm_layers(app, helm, src, None, refs, load)
            yield ChartSource(app, chart, _str(source.get("targetRevision")), release, ns, layers)
            continue
        path = _str(source.get("path"))
        directory = resolve(path) if path is not None else None
        if directory is None or not _chart_dir(tree, directory):
            continue
        meta = load(f"{directory}/Chart.yaml" if directory != "." else "Chart.yaml")
        chart_yaml = _dict(meta[0]) if meta else {}
        own = f"{directory}/values.yaml" if directory != "." else "values.yaml"
        base = load(own)
        # The chart's own values.yaml sits in another file: placed at the source's path.
        base_layers = (
            (ValueLayer(_dict(base[0]), src.child(("path",)), False),)
            if base and isinstance(base[0], dict)
            else ()
        )
        layers = base_layers + _helm_layers(app, helm, src, directory, refs, load)
        name = str(chart_yaml.get("name", ""))
        yield ChartSource(app, name, _str(chart_yaml.get("version")), release, ns, layers)
        for dep in dependencies(chart_yaml, layers):
            yield ChartSource(app, dep.chart, dep.version, release, ns, dep.layers)


def _helm_layers(
    app: Manifest,
    helm: Mapping[str, Any],
    src: Source,
    directory: str | None,
    refs: Mapping[str, Mapping[str, Any]],
    load: Load,
) -> tuple[ValueLayer, ...]:
    layers: list[ValueLayer] = []
    for i, f in enumerate(_list(helm.get("valueFiles"))):
        if not isinstance(f, str):
            continue
        rel = _value_file(f, directory, refs)
        found = load(rel) if rel is not None else None
        if found is not None and isinstance(found[0], dict):
            # Findings name the Application's file, so keys from the values file are placed
            # at its valueFiles entry.
            layers.append(ValueLayer(found[0], src.child(("helm", "valueFiles", i)), False))
    text = helm.get("values")
    obj_values = helm.get("valuesObject")
    if isinstance(obj_values, dict):
        # valuesObject takes precedence over values when both are set.
        layers.append(ValueLayer(obj_values, src.child(("helm", "valuesObject")), True))
    elif isinstance(text, str):
        try:
            parsed = _yaml.load(text)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, dict):
            layers.append(ValueLayer(parsed, src.child(("helm", "values")), False))
    params: dict[str, Any] = {}
    for p in _list(helm.get("parameters")):
        p = _dict(p)
        if p.get("name"):
            params = _merge(params, _dotted(str(p["name"]), p.get("value")))
    if params:
        layers.append(ValueLayer(params, src.child(("helm", "parameters")), False))
    return tuple(layers)


def _dotted(name: str, value: Any) -> dict[str, Any]:
    out: Any = value
    for k in reversed(name.replace("\\.", "\0").split(".")):
        out = {k.replace("\0", "."): out}
    return out if isinstance(out, dict) else {}


def _value_file(f: str, directory: str | None, refs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """A ``valueFiles`` entry as a path from the repository root (``$<ref>/…`` from the
    ``ref`` source's path, which is its repository root unless it names one)."""
    if f.startswith("$"):
        ref, _, rest = f[1:].partition("/")
        if ref not in refs:
            return None
        return norm(_str(refs[ref].get("path")) or ".", rest)
    if directory is None:
        return None
    return norm(directory, f)


def kustomize_charts(
    tree: Tree,
    directory: str,
    file: str | Path,
    rel: str,
    *,
    namespace: str | None,
    active: bool,
    load: Load,
) -> Iterator[ChartSource]:
    """The ``helmCharts`` of the kustomization in ``directory`` (file ``rel``)."""
    k = tree.kustomizations.get(directory, {})
    for i, entry in enumerate(_list(k.get("helmCharts"))):
        entry = _dict(entry)
        name = _str(entry.get("name"))
        if name is None:
            continue
        src = Source(rel, 1, 0, file, ("helmCharts", i))
        ns = _str(entry.get("namespace")) or _str(k.get("namespace")) or namespace
        release = _str(entry.get("releaseName")) or name
        obj = Manifest(
            api_version="kustomize.config.k8s.io/v1beta1",
            kind="HelmChart",
            name=release,
            namespace=ns,
            body=entry,
            source=src,
            active=active,
        )
        layers: list[ValueLayer] = []
        # Keys from values files are placed at the entry naming the file (findings name the
        # kustomization's file).
        f = entry.get("valuesFile")
        if isinstance(f, str):
            found = load(norm(directory, f))
            if found is not None and isinstance(found[0], dict):
                layers.append(ValueLayer(found[0], src.child(("valuesFile",)), False))
        inline = entry.get("valuesInline")
        if isinstance(inline, dict):
            merge = entry.get("valuesMerge") or "override"
            if merge == "replace":
                layers = []
            layers.append(ValueLayer(inline, src.child(("valuesInline",)), True))
        for j, extra_file in enumerate(_list(entry.get("additionalValuesFiles"))):
            if isinstance(extra_file, str):
                found = load(norm(directory, extra_file))
                if found is not None and isinstance(found[0], dict):
                    extra = src.child(("additionalValuesFiles", j))
                    layers.append(ValueLayer(found[0], extra, False))
        yield ChartSource(obj, name, _str(entry.get("version")), release, ns, tuple(layers))


def kustomization_file(tree: Tree, directory: str) -> str:
    """The name of the kustomization file in ``directory`` as written."""
    for name in KUSTOMIZATION_FILES:
        rel = name if directory == "." else f"{directory}/{name}"
        if rel in tree.texts:
            return rel
    return f"{directory}/kustomization.yaml"


def docs_of(tree: Tree) -> Iterator[Doc]:
    """Every document of the tree (for root discovery)."""
    for docs in tree.docs.values():
        yield from docs
