"""What a real cluster has since bootstrap: the Secrets and ConfigMaps the roots read.

A root Kustomization substitutes from ``Secret/flux-system/cluster-secrets``
(``postBuild.substituteFrom``), and the repository makes that Secret (an ExternalSecret, a
SOPS-encrypted Secret, a ``secretGenerator``) under that same root. On the cluster it exists
since bootstrap; on a fresh twin the root would fail before applying anything. So, before the
roots apply, each Secret (or ConfigMap) that

* a Kustomization reads through ``postBuild.substituteFrom``,
* a HelmRelease reads through ``spec.valuesFrom``,
* any object names in a ``secretRef``,

and that the repository itself produces is seeded: a Secret with placeholder values
(``PLACEHOLDER``) for the keys the repository uses (the producer's keys, and for
``substituteFrom`` the ``${VAR}`` names used under that Kustomization's path that nothing else
defines), a ConfigMap with the data the repository gives it. The repository's own apply
replaces them later, as it would on the cluster.

A ``substituteFrom`` or ``valuesFrom`` source that is not optional and that nothing in the
repository produces is named in one line (:attr:`Seeds.missing`); ``--secret NS/NAME=FILE``
supplies a Secret (:func:`read_secret`), and ``--vars`` stands in for the rest.

Reading files and choosing only; :func:`gpushift_twin.flux.start_flux` creates the objects.
Secret values are never printed.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushift.common import InputError, Obj, parse_text
from gpushift.flux import Doc, Tree, parent, read_tree
from gpushift_twin.flux._placeholders import (
    PLACEHOLDER,
    PLACEHOLDER_ANNOTATION,
    decrypted,
    from_external_secret,
)
from gpushift_twin.flux._roots import Roots

_KS_API = "kustomize.toolkit.fluxcd.io/"
_HR_API = "helm.toolkit.fluxcd.io/"
#: A plain ``${NAME}`` (not escaped as ``$${NAME}``) and any ``${NAME…}`` with an operator.
_PLAIN_VAR = re.compile(r"(?<!\$)\$\{([_A-Za-z][_A-Za-z0-9]*)\}")
_DEFAULTED_VAR = re.compile(r"(?<!\$)\$\{([_A-Za-z][_A-Za-z0-9]*)[^_A-Za-z0-9}]")
#: kube-apiserver's Secret and ConfigMap key rule (IsConfigMapKey).
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_VALUE = base64.b64encode(PLACEHOLDER.encode()).decode()


@dataclass(frozen=True, slots=True)
class _Need:
    kind: str  # Secret or ConfigMap
    namespace: str | None
    name: str
    by: str  # "Kustomization flux-system/cluster-apps (postBuild.substituteFrom at f:12)"
    optional: bool
    reported: bool  # whether its absence fails the twin's controllers (and is named)
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Producer:
    kind: str
    namespace: str | None
    name: str
    what: str  # "ExternalSecret flux-system/cluster-secrets at f:3"
    keys: tuple[str, ...]
    data: Mapping[str, str] | None = None  # a ConfigMap's data, as given


@dataclass(frozen=True, slots=True)
class Seeds:
    """What to create before the roots apply, and what to say about it.

    ``objects`` are the Secrets and ConfigMaps to create (seeded from the repository's
    producers, or supplied); ``notes`` one line each about a seeded or supplied object (keys
    counted, values never shown); ``missing`` one line per required source nothing produces.
    """

    objects: tuple[Obj, ...] = ()
    notes: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()


@dataclass(slots=True)
class _Scan:
    tree: Tree
    directory: Path
    needs: list[_Need] = field(default_factory=list)
    producers: list[_Producer] = field(default_factory=list)


def _ident(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _dir_namespace(tree: Tree, rel: str) -> str | None:
    # kustomize's namespace transform: the kustomization.yaml beside the file sets it.
    ns = (tree.kustomizations.get(parent(rel)) or {}).get("namespace")
    return str(ns) if isinstance(ns, str) and ns else None


def _namespace(tree: Tree, doc: Doc) -> str | None:
    ns = (doc.data.get("metadata") or {}).get("namespace")
    if isinstance(ns, str) and ns and "${" not in ns:
        return ns
    return _dir_namespace(tree, doc.rel)


def _is(obj: Obj, api: str, kind: str) -> bool:
    return str(obj.get("apiVersion", "")).startswith(api) and obj.get("kind") == kind


def _vars_under(tree: Tree, path: str) -> tuple[set[str], set[str]]:
    """The plain ``${NAME}`` names used in files under ``path``, and the names used anywhere
    there with a default or a function (those keep their default when unset)."""
    prefix = path.strip("/").removeprefix("./").strip("/")
    plain: set[str] = set()
    defaulted: set[str] = set()
    for rel, text in tree.texts.items():
        if prefix not in ("", ".") and not (rel == prefix or rel.startswith(prefix + "/")):
            continue
        if "${" not in text:
            continue
        plain.update(_PLAIN_VAR.findall(text))
        defaulted.update(_DEFAULTED_VAR.findall(text))
    return plain, defaulted


def _needs(scan: _Scan, docs: list[Doc]) -> None:
    tree = scan.tree
    for doc in docs:
        obj = doc.data
        meta = obj.get("metadata") or {}
        ns = _namespace(tree, doc)
        kind = str(obj.get("kind"))
        where = f"{doc.rel}:{doc.line}"
        label = f"{kind} {_ident(ns, str(meta.get('name')))}"
        spec: dict[str, Any] = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
        if _is(obj, _KS_API, "Kustomization"):
            post: dict[str, Any] = (
                spec["postBuild"] if isinstance(spec.get("postBuild"), dict) else {}
            )
            refs = [r for r in post.get("substituteFrom") or [] if isinstance(r, dict)]
            if refs:
                plain, defaulted = _vars_under(tree, str(spec.get("path") or "./"))
                inline = set((post.get("substitute") or {}).keys())
                used = tuple(sorted(plain - defaulted - inline))
                for ref in refs:
                    ref_kind = str(ref.get("kind") or "ConfigMap")
                    scan.needs.append(
                        _Need(
                            ref_kind,
                            ns,
                            str(ref.get("name")),
                            f"{label} (postBuild.substituteFrom at {where})",
                            ref.get("optional") is True,
                            True,
                            used if ref_kind == "Secret" else (),
                        )
                    )
        if _is(obj, _HR_API, "HelmRelease"):
            for ref in spec.get("valuesFrom") or []:
                if not isinstance(ref, dict):
                    continue
                scan.needs.append(
                    _Need(
                        str(ref.get("kind") or "ConfigMap"),
                        ns,
                        str(ref.get("name")),
                        f"{label} (spec.valuesFrom at {where})",
                        ref.get("optional") is True,
                        ns is not None,
                        (str(ref.get("valuesKey") or "values.yaml"),),
                    )
                )
        for name in _secret_refs(spec):
            scan.needs.append(
                _Need("Secret", ns, name, f"{label} (secretRef at {where})", True, False, ())
            )


def _secret_refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "secretRef" and isinstance(v, dict) and isinstance(v.get("name"), str):
                yield v["name"]
            else:
                yield from _secret_refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _secret_refs(v)


def _producers(scan: _Scan, docs: list[Doc]) -> None:
    tree = scan.tree
    for doc in docs:
        obj = doc.data
        where = f"{doc.rel}:{doc.line}"
        ns = _namespace(tree, doc)
        name = str((obj.get("metadata") or {}).get("name"))
        if obj.get("kind") == "ExternalSecret" and str(obj.get("apiVersion", "")).startswith(
            "external-secrets.io/"
        ):
            made = from_external_secret(obj)
            scan.producers.append(
                _Producer(
                    "Secret",
                    ns,
                    str(made["metadata"]["name"]),
                    f"ExternalSecret {_ident(ns, name)} at {where}",
                    tuple(made["data"]),
                )
            )
        elif obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1":
            keys = tuple(decrypted(obj)["data"])
            plain: dict[str, str] | None = None
            if "sops" not in obj:
                # A Secret in the clear: the cluster gets what the repository says.
                plain = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
                plain.update(
                    {
                        str(k): base64.b64encode(str(v).encode()).decode()
                        for k, v in (obj.get("stringData") or {}).items()
                    }
                )
            what = "SOPS-encrypted Secret" if "sops" in obj else "Secret"
            scan.producers.append(
                _Producer("Secret", ns, name, f"{what} {_ident(ns, name)} at {where}", keys, plain)
            )
        elif obj.get("kind") == "ConfigMap" and obj.get("apiVersion") == "v1":
            data = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
            scan.producers.append(
                _Producer(
                    "ConfigMap", ns, name, f"ConfigMap {_ident(ns, name)} at {where}", (), data
                )
            )
    for directory, kdoc in tree.kustomizations.items():
        kns = kdoc.get("namespace") if isinstance(kdoc.get("namespace"), str) else None
        for kind, key in (("Secret", "secretGenerator"), ("ConfigMap", "configMapGenerator")):
            for gen in kdoc.get(key) or []:
                if not isinstance(gen, dict) or not gen.get("name"):
                    continue
                data = _generated(scan, directory, gen)
                gns = str(gen.get("namespace") or kns or "") or None
                scan.producers.append(
                    _Producer(
                        kind,
                        gns,
                        str(gen["name"]),
                        f"{key} {_ident(gns, str(gen['name']))} in {directory}",
                        tuple(data),
                        data if kind == "ConfigMap" else None,
                    )
                )


def _generated(scan: _Scan, directory: str, gen: Mapping[str, Any]) -> dict[str, str]:
    """The keys (and, where the repository holds them, values) a generator makes."""
    out: dict[str, str] = {}
    for lit in gen.get("literals") or []:
        key, _, value = str(lit).partition("=")
        out[key.strip()] = value
    for env in gen.get("envs") or []:
        # Env files are not YAML, so the tree did not read them: kustomize reads them from
        # beside the kustomization.
        try:
            text = (scan.directory / directory / str(env)).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                out[key.strip()] = value
    for f in gen.get("files") or []:
        key, sep, _path = str(f).partition("=")
        out[(key if sep else Path(key).name).strip()] = ""
    return out


def _producer_for(scan: _Scan, need: _Need) -> _Producer | None:
    found = [
        p
        for p in scan.producers
        if p.kind == need.kind
        and p.name == need.name
        and (need.namespace is None or p.namespace is None or p.namespace == need.namespace)
    ]
    # A Secret in the clear beside an ExternalSecret of the same name is what the build
    # applies (the placeholder of the ExternalSecret gives way to it).
    found.sort(key=lambda p: p.data is None)
    return found[0] if found else None


def plan(
    directory: Path,
    roots: Roots,
    *,
    supplied: Mapping[tuple[str, str], Obj] | None = None,
    variables: Mapping[str, str] | None = None,
) -> Seeds:
    """What to seed for the repository at ``directory`` started from ``roots``.

    ``supplied`` maps ``(namespace, name)`` to Secrets given with ``--secret`` (created as
    given); ``variables`` are ``--vars``, which stand in for substitution sources nothing
    produces (those are then created empty rather than named as missing).
    """
    tree, _errors, _real = read_tree(directory, [directory])
    scan = _Scan(tree, directory)
    docs = [doc for rel in sorted(tree.docs) for doc in tree.docs[rel]]
    own = {
        (str(k["metadata"].get("namespace")), str(k["metadata"].get("name")))
        for k in roots.kustomizations
    }
    root_docs = [
        Doc(roots.origin or "(the twin's root)", 0, 1, k)
        for k in roots.kustomizations
        if not any(
            _is(d.data, _KS_API, "Kustomization")
            and (_namespace(tree, d), (d.data.get("metadata") or {}).get("name")) in own
            for d in docs
        )
    ]
    _needs(scan, root_docs + docs)
    _producers(scan, docs)
    supplied = dict(supplied or {})
    objects: dict[tuple[str, str, str], Obj] = {}
    notes: list[str] = []
    missing: list[str] = []
    for (given_ns, given_name), secret in supplied.items():
        objects[("Secret", given_ns, given_name)] = secret
        count = len(secret.get("data") or {})
        notes.append(f"secret {given_ns}/{given_name}: supplied with --secret ({count} keys)")
    stand_ins: set[tuple[str, str, str]] = set()
    for need in scan.needs:
        if "${" in need.name:
            continue  # named by a substitution: not knowable before the build
        producer = _producer_for(scan, need)
        ns = need.namespace or (producer.namespace if producer else None)
        if ns is None:
            continue
        ident = (need.kind, ns, need.name)
        if need.kind == "Secret" and (ns, need.name) in supplied:
            continue  # as given
        if producer is None:
            if need.optional or not need.reported or ident in objects:
                continue
            if variables is not None:
                if ident not in stand_ins:
                    stand_ins.add(ident)
                    objects[ident] = _object(need.kind, ns, need.name, {}, "--vars")
                continue
            line = (
                f"{need.kind.lower()} {ns}/{need.name}: needed by {need.by}; nothing in the "
                "repository produces it"
            )
            if need.kind == "Secret":
                line += f": supply it with --secret {ns}/{need.name}=FILE"
            else:
                line += ": give its variables with --vars FILE"
            if line not in missing:
                missing.append(line)
            continue
        current = objects.get(ident)
        if producer.data is not None:
            data = dict(producer.data)  # a ConfigMap, or a Secret in the clear
        else:
            keys = [*producer.keys, *need.keys]
            old = (current or {}).get("data") or {}
            data = {**old, **{k: _VALUE for k in keys if _KEY.match(k)}}
        first = current is None
        objects[ident] = _object(need.kind, ns, need.name, data, producer.what)
        if first:
            notes.append(
                f"{need.kind.lower()} {ns}/{need.name}: seeded before the roots apply, as "
                f"bootstrap leaves it (from {producer.what})"
            )
    return Seeds(tuple(objects.values()), tuple(notes), tuple(missing))


def _object(kind: str, ns: str, name: str, data: Mapping[str, str], source: str) -> Obj:
    out: Obj = {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {PLACEHOLDER_ANNOTATION: source},
        },
        "data": dict(data),
    }
    if kind == "Secret":
        out["type"] = "Opaque"
    return out


def read_secret(option: str) -> tuple[tuple[str, str], Obj]:
    """One ``--secret NS/NAME=FILE``: the Secret it supplies, keyed by ``(ns, name)``.

    FILE is an env file (``KEY=VALUE`` lines; blank lines and ``#`` comments skipped) or a
    YAML Secret (its ``data``, base64, and ``stringData``). Raises ``InputError`` naming the
    option, or the file and line; never with a value in the message.
    """
    ident, sep, file = option.partition("=")
    ns, slash, name = ident.partition("/")
    if not sep or not slash or not ns or not name or "/" in name or not file:
        raise InputError(f"--secret {option!r}: expected NAMESPACE/NAME=FILE")
    path = Path(file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or err
        raise InputError(f"cannot read file: {reason}", path=file) from None
    data = _secret_yaml(text, file) if _looks_like_yaml_secret(text) else _env_file(text, file)
    secret = _object("Secret", ns, name, {}, "--secret")
    secret["data"] = data
    return (ns, name), secret


def _looks_like_yaml_secret(text: str) -> bool:
    return re.search(r"^kind:\s*Secret\s*$", text, re.MULTILINE) is not None


def _env_file(text: str, file: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _KEY.match(key):
            raise InputError(
                "expected KEY=VALUE (a key of letters, digits, '-', '_' and '.')",
                path=file,
                line=n,
            )
        out[key] = base64.b64encode(value.encode()).decode()
    return out


def _secret_yaml(text: str, file: str) -> dict[str, str]:
    docs = parse_text(text, file)
    doc = docs[0] if docs else None
    body = doc.data if doc is not None else None
    line = doc.line if doc is not None else 1
    if not isinstance(body, dict) or body.get("kind") != "Secret":
        raise InputError("expected a Secret", path=file, line=line)
    out: dict[str, str] = {}
    for key, value in (body.get("data") or {}).items():
        if not _KEY.match(str(key)):
            raise InputError(f"data: invalid key {str(key)!r}", path=file, line=line)
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            raise InputError(
                f"data.{key}: not base64 (use stringData for plain text)", path=file, line=line
            ) from None
        out[str(key)] = str(value)
    for key, value in (body.get("stringData") or {}).items():
        if not _KEY.match(str(key)):
            raise InputError(f"stringData: invalid key {str(key)!r}", path=file, line=line)
        out[str(key)] = base64.b64encode(str(value).encode()).decode()
    return out
