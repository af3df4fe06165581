"""Reading a directory tree of manifests the way a kustomize build sees it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushift import _yaml
from gpushift._errors import InputError
from gpushift.flux._kustomize import KUSTOMIZATION_FILES, Doc, Tree, parent

_KUSTOMIZE_API = "kustomize.config.k8s.io/"


@dataclass(frozen=True, slots=True)
class YamlError:
    """A file that could not be read or parsed (the rule ``yaml-error`` reports it).

    ``unused`` is True when nothing applies the file: its directory has a kustomization file
    that does not list it (kustomize reads only what is listed, and Flux and Argo CD build such
    a directory with kustomize), or the tree has a cluster root and no Flux Kustomization's
    path reaches it, so the error cannot break a deployment (``unused-file``). ``breaks`` is
    False for a file that only Kustomizations not deployed (suspended, left out) apply: the
    error breaks them once they are. ``why`` says which case it is.
    """

    path: str
    line: int | None
    message: str
    unused: bool = False
    breaks: bool = True
    why: str = ""


def _find_files(root: Path, paths: Sequence[str | Path]) -> Iterator[tuple[str, str]]:
    """YAML and JSON files under ``paths`` as (path relative to ``root``, real path), sorted.

    ``.git`` directories are skipped. Paths are strings: a Path object per file costs more
    than the walk itself on large trees.
    """
    # Both sides resolved: a root given as ``../repo`` must not cut ``..`` from the walk's
    # resolved paths.
    root = Path(root).resolve()
    base = str(root)
    found: dict[str, str] = {}
    for raw in paths:
        p = Path(raw).resolve()
        if p.is_file():
            found[p.relative_to(root).as_posix()] = str(p)
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            rel_dir = dirpath[len(base) + 1 :].replace(os.sep, "/")
            for name in filenames:
                if name.endswith(_yaml.YAML_SUFFIXES):
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    found[rel] = os.path.join(dirpath, name)
    for rel in sorted(found):
        yield rel, found[rel]


def read_tree(
    root: Path, paths: Sequence[str | Path]
) -> tuple[Tree, list[YamlError], dict[str, str]]:
    """Parse every YAML and JSON file under ``paths`` (``.git`` skipped) into a ``Tree`` keyed
    by POSIX paths relative to ``root``.

    Kustomization files are kept by directory; ``List`` kinds are split into their items.
    Files that cannot be read or parsed are returned as errors, not raised; the third value
    maps each relative path to the file it was read from.
    """
    docs: dict[str, list[Doc]] = {}
    texts: dict[str, str] = {}
    kustomizations: dict[str, dict[str, Any]] = {}
    errors: list[YamlError] = []
    real: dict[str, str] = {}
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
            # open() rather than Path.read_text: the same read without pathlib's per-call
            # conversions, which add up over thousands of files.
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as err:
            errors.append(YamlError(rel, None, f"cannot read file: {err}"))
            continue
        texts[rel] = text
        try:
            parsed = _yaml.parse_text(text, rel)
        except InputError as err:
            errors.append(YamlError(rel, err.line, err.message))
            continue
        if rel.rsplit("/", 1)[-1] in KUSTOMIZATION_FILES:
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
