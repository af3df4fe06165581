"""Helm values as helm-controller composes them: valuesFrom layers, targetPath, the merge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_values(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` coalesced onto ``base`` as Helm does it: maps merge recursively (any mapping,
    not only a ``dict``), a null deletes the key, everything else (lists included) replaces.

    Neither argument is changed; values of ``over`` are shared, not copied.
    """
    # helm.sh/helm/v3 pkg/chartutil/coalesce.go (coalesceTablesFullKey).
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_values(out[k], v)
        else:
            out[k] = v
    return out


def value_at_target_path(target_path: str, value: Any) -> dict[str, Any]:
    """The values tree that puts ``value`` at helm-controller's ``targetPath`` (a dotted path in
    strvals syntax, ``\\.`` for a literal dot); an empty path gives an empty tree."""
    keys = [k for k in target_path.replace("\\.", "\0").split(".") if k]
    out: Any = value
    for k in reversed(keys):
        out = {k.replace("\0", "."): out}
    return out if isinstance(out, dict) else {}
