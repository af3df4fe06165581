"""Saving and loading a twin's objects (``--state FILE``, ``gpushift twin export``).

A state file is a ``v1`` ``List`` (JSON, or YAML when the name ends in .yaml/.yml), as
``kubectl get -o json`` would print it. Files are written atomically: a reader never sees a
half-written state.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from gpushift.common import InputError, Obj, describe, expand_lists, read_file
from gpushift_twin.apiserver._status import ApiError
from gpushift_twin.apiserver._store import Store

_CRD = ("apiextensions.k8s.io", "customresourcedefinitions")


def as_list(store: Store) -> Obj:
    """Every object of ``store`` as a ``v1`` List (without resourceVersions)."""
    items = []
    for obj in store.dump():
        meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
        items.append({**obj, "metadata": meta})
    return {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_list(path: Path, doc: Obj) -> None:
    """Write ``doc`` (a List) to ``path`` atomically: YAML for .yaml/.yml, else JSON."""
    if path.suffix in (".yaml", ".yml"):
        write_text(path, yaml.safe_dump(doc, sort_keys=False))
    else:
        write_text(path, json.dumps(doc, indent=2) + "\n")


def save(store: Store, path: Path) -> None:
    """Write ``store`` to ``path`` atomically (YAML for .yaml/.yml, else JSON)."""
    write_list(path, as_list(store))


def load(store: Store, path: Path) -> int:
    """Restore the objects of a state file (or any manifests) into ``store``.

    Namespaces and CustomResourceDefinitions are restored first, so objects that need them
    load in any order. Returns the number of objects restored.

    Raises:
        InputError: naming file, line and object, for an unknown kind or a rejected object.
    """
    docs = list(expand_lists(read_file(path)))

    def order(doc: Any) -> int:
        data = doc.data if isinstance(doc.data, dict) else {}
        kind = data.get("kind")
        return 0 if kind == "Namespace" else 1 if kind == "CustomResourceDefinition" else 2

    count = 0
    for doc in sorted(docs, key=order):
        obj = doc.data
        if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
            raise InputError(
                "not a Kubernetes object (apiVersion and kind are required)",
                path=str(path),
                line=doc.line,
                obj=describe(obj),
            )
        group, _, version = str(obj["apiVersion"]).rpartition("/")
        kind = next(
            (
                k
                for k in store.kinds()
                if (k.group, k.version, k.kind) == (group, version, obj["kind"])
            ),
            None,
        )
        if kind is None:
            raise InputError(
                f'no matches for kind "{obj["kind"]}" in version "{obj["apiVersion"]}"',
                path=str(path),
                line=doc.line,
                obj=describe(obj),
            )
        try:
            store.restore(kind, obj)
        except ApiError as err:
            raise InputError(
                err.message, path=str(path), line=doc.line, obj=describe(obj)
            ) from None
        count += 1
    return count
