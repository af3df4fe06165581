"""Quantities as kube-apiserver stores and serves them: canonical strings.

A resource.Quantity decodes from a JSON number or string and always encodes as its canonical
string (k8s.io/apimachinery/pkg/api/resource, Quantity.MarshalJSON / CanonicalizeBytes): ``1``
becomes ``"1"``, ``0.5`` becomes ``"500m"``, ``2048Mi`` becomes ``"2Gi"``. Typed clients (the
official Python client, client-go) refuse a number where a Quantity string belongs, so the
twin rewrites the quantity fields of the kinds it knows before it stores an object.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from gpushift import common
from gpushift.common import InputError

Obj = dict[str, Any]

_POD_SPEC = (
    ("containers", "*", "resources", "requests", "{}"),
    ("containers", "*", "resources", "limits", "{}"),
    ("initContainers", "*", "resources", "requests", "{}"),
    ("initContainers", "*", "resources", "limits", "{}"),
    ("overhead", "{}"),
)
_CLAIM_SPEC = (
    ("devices", "requests", "*", "exactly", "capacity", "requests", "{}"),
    ("devices", "requests", "*", "firstAvailable", "*", "capacity", "requests", "{}"),
)
_PATHS: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {
    ("", "pods"): tuple(("spec", *p) for p in _POD_SPEC),
    ("", "nodes"): (("status", "capacity", "{}"), ("status", "allocatable", "{}")),
    ("resource.k8s.io", "resourceslices"): (
        ("spec", "devices", "*", "capacity", "{}", "value"),
        ("spec", "devices", "*", "capacity", "{}", "requestPolicy", "default"),
        ("spec", "devices", "*", "capacity", "{}", "requestPolicy", "validRange", "min"),
        ("spec", "devices", "*", "capacity", "{}", "requestPolicy", "validRange", "max"),
        ("spec", "devices", "*", "capacity", "{}", "requestPolicy", "validRange", "step"),
    ),
    ("resource.k8s.io", "resourceclaims"): (
        *(("spec", *p) for p in _CLAIM_SPEC),
        ("status", "allocation", "devices", "results", "*", "consumedCapacity", "{}"),
    ),
    ("resource.k8s.io", "resourceclaimtemplates"): tuple(("spec", "spec", *p) for p in _CLAIM_SPEC),
}
for _plural in ("deployments", "replicasets", "statefulsets", "daemonsets"):
    _PATHS[("apps", _plural)] = tuple(("spec", "template", "spec", *p) for p in _POD_SPEC)
_PATHS[("batch", "jobs")] = _PATHS[("apps", "deployments")]
_ROOTS = {key: frozenset(p[0] for p in paths) for key, paths in _PATHS.items()}


def canonical(value: Any) -> Any:
    """The canonical string of a quantity; anything that is not one is returned unchanged."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    out = _canonical(value)
    # An already canonical string comes back as itself, so nothing around it is copied.
    return value if isinstance(value, str) and out == value else out


@functools.lru_cache(maxsize=4096, typed=True)
def _canonical(value: str | int | float) -> Any:
    # Every write of a pod re-canonicalises the same few request strings; parsing one is
    # exact rational arithmetic, so each distinct value is parsed once.
    try:
        parsed = common.parse_quantity(value)
    except (InputError, ValueError, ZeroDivisionError):
        return value
    binary = isinstance(value, str) and common.is_binary_quantity(value)
    return common.format_quantity(parsed, binary=binary)


def _rewrite(node: Any, path: tuple[str, ...], fix: Callable[[Any], Any], like: Any = None) -> Any:
    """``node`` with the values at ``path`` fixed; copies only what changes.

    ``like`` is the same place in an already canonical object: a part that is that very
    object (a write that built its body around the stored one) is left as it is.
    """
    if node is like:
        return node
    if not path:
        return fix(node)
    head, rest = path[0], path[1:]
    if head == "*":
        if not isinstance(node, list):
            return node
        peers: list[Any] = like if isinstance(like, list) and len(like) == len(node) else []
        peers = peers or [None] * len(node)
        items = [_rewrite(item, rest, fix, old) for item, old in zip(node, peers, strict=True)]
        return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
    if not isinstance(node, dict):
        return node
    olds: dict[str, Any] = like if isinstance(like, dict) else {}
    if head == "{}":
        fixed = {k: _rewrite(v, rest, fix, olds.get(k)) for k, v in node.items()}
        return fixed if any(fixed[k] is not node[k] for k in node) else node
    if head not in node:
        return node
    child = _rewrite(node[head], rest, fix, olds.get(head))
    return node if child is node[head] else {**node, head: child}


def canonicalize(group: str, plural: str, obj: Obj, *, like: Obj | None = None) -> Obj:
    """``obj`` with every quantity field of its kind as a canonical string (``obj`` itself
    when nothing changes; the caller's nested dicts are never modified).

    ``like`` is an already canonical object (the stored one an update replaces): a top-level
    part of ``obj`` equal to ``like``'s is kept as it is, since it is canonical too.
    """
    paths = _PATHS.get((group, plural), ())
    if like is not None and paths:
        # Comparing is far cheaper than rewriting; a status write leaves spec unchanged.
        same = {top for top in _ROOTS[(group, plural)] if obj.get(top) == like.get(top)}
        paths = tuple(p for p in paths if p[0] not in same)
    for path in paths:
        obj = _rewrite(obj, path, canonical, like)
    return obj
