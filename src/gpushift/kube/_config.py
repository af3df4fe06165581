"""Where a cluster-facing command finds its cluster: kubeconfig files merged as kubectl merges them.

Mirrors client-go's ``clientcmd`` loading rules (tools/clientcmd/loader.go): an explicit
``--kubeconfig`` is one file that must exist; otherwise ``$KUBECONFIG`` is a list of files
(``os.pathsep``-separated, missing ones skipped), else ``~/.kube/config``. Named clusters,
contexts and users are merged with the first file that names an entry winning, and
``current-context`` is taken from the first file that sets it. Relative file references are
resolved against the file that holds them, before merging, as client-go does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpushift._errors import InputError

Obj = dict[str, Any]

#: Fields holding file paths, per section (clientcmd's ResolvePaths).
_FILE_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
}
_SECTIONS = (("clusters", "cluster"), ("contexts", "context"), ("users", "user"))


@dataclass(frozen=True, slots=True)
class Access:
    """How a command reaches its cluster, resolved once from its options.

    ``kubeconfig`` is the explicit ``--kubeconfig`` (None: ``$KUBECONFIG``, then
    ``~/.kube/config``); ``context`` the ``--context`` (None: the current context);
    ``namespace`` the ``-n/--namespace`` where a command takes one (None: the context's).
    """

    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None

    def paths(self, *, environ: Mapping[str, str] | None = None) -> list[Path]:
        """The kubeconfig files in precedence order (see :func:`kubeconfig_paths`)."""
        return kubeconfig_paths(self.kubeconfig, environ=environ)


def kubeconfig_paths(
    explicit: Path | None = None, *, environ: Mapping[str, str] | None = None
) -> list[Path]:
    """The files to merge: the explicit one, else ``$KUBECONFIG``'s list, else
    ``~/.kube/config``. Entries of the list that do not exist are skipped, as kubectl does."""
    if explicit is not None:
        return [explicit]
    env = os.environ if environ is None else environ
    listed = [Path(p).expanduser() for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        seen: list[Path] = []
        for path in listed:
            if path not in seen:
                seen.append(path)
        return seen
    return [Path("~/.kube/config").expanduser()]


def _read(path: Path) -> Obj:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise InputError(f"cannot read kubeconfig: {reason}", path=str(path)) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = None if mark is None else int(mark.line) + 1
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise InputError(f"not a kubeconfig: {problem}", path=str(path), line=line) from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InputError("not a kubeconfig: expected a mapping", path=str(path))
    return doc


def _entries(doc: Obj, section: str, inner: str, path: Path) -> list[tuple[str, Obj]]:
    raw = doc.get(section)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(f"not a kubeconfig: {section} must be a list", path=str(path))
    out: list[tuple[str, Obj]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise InputError(f"not a kubeconfig: a {inner} entry has no name", path=str(path))
        body = item.get(inner)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise InputError(
                f"not a kubeconfig: {inner} {item['name']!r} must be a mapping", path=str(path)
            )
        body = dict(body)
        for field in _FILE_FIELDS.get(section, ()):
            value = body.get(field)
            if isinstance(value, str) and value and not os.path.isabs(value):
                body[field] = str((path.parent / value).expanduser().absolute())
        out.append((item["name"], body))
    return out


def merge_kubeconfigs(paths: Sequence[Path], *, explicit: bool = False) -> Obj:
    """The merged kubeconfig of ``paths``: the first file to name a cluster, context or user
    wins it, and ``current-context`` comes from the first file that sets one.

    Raises ``InputError`` (exit 2) for an unreadable or malformed file, for a missing explicit
    file, and when none of the files exists.
    """
    merged: Obj = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [],
        "contexts": [],
        "users": [],
    }
    found = False
    named: dict[str, set[str]] = {section: set() for section, _ in _SECTIONS}
    for path in paths:
        if not path.exists():
            if explicit:
                raise InputError("kubeconfig not found", path=str(path))
            continue
        found = True
        doc = _read(path)
        current = doc.get("current-context")
        if isinstance(current, str) and current and "current-context" not in merged:
            merged["current-context"] = current
        for section, inner in _SECTIONS:
            for name, body in _entries(doc, section, inner, path):
                if name not in named[section]:
                    named[section].add(name)
                    merged[section].append({"name": name, inner: body})
    if not found:
        shown = os.pathsep.join(str(p) for p in paths)
        raise InputError("no kubeconfig: none of these files exists", path=shown)
    return merged
