"""Quantities as kube-apiserver stores and serves them: canonical strings.

A resource.Quantity decodes from a JSON number or string and always encodes as its canonical
string (k8s.io/apimachinery/pkg/api/resource, Quantity.MarshalJSON / CanonicalizeBytes): ``1``
becomes ``"1"``, ``0.5`` becomes ``"500m"``, ``2048Mi`` becomes ``"2Gi"``. Typed clients (the
official Python client, client-go) refuse a number where a Quantity string belongs, so the
twin rewrites the quantity fields of the kinds it knows before it stores an object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpushift import _quantity
from gpushift._errors import InputError

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


def canonical(value: Any) -> Any:
    """The canonical string of a quantity; anything that is not one is returned unchanged."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    try:
        parsed = _quantity.parse(value)
    except (InputError, ValueError, ZeroDivisionError):
        return value
    binary = isinstance(value, str) and _quantity.is_binary(value)
    return _quantity.format_quantity(parsed, binary=binary)


def _rewrite(node: Any, path: tuple[str, ...], fix: Callable[[Any], Any]) -> Any:
    """``node`` with the values at ``path`` fixed; copies only what changes."""
    if not path:
        return fix(node)
    head, rest = path[0], path[1:]
    if head == "*":
        if not isinstance(node, list):
            return node
        items = [_rewrite(item, rest, fix) for item in node]
        return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
    if not isinstance(node, dict):
        return node
    if head == "{}":
        fixed = {k: _rewrite(v, rest, fix) for k, v in node.items()}
        return fixed if any(fixed[k] is not node[k] for k in node) else node
    if head not in node:
        return node
    child = _rewrite(node[head], rest, fix)
    return node if child is node[head] else {**node, head: child}


def canonicalize(group: str, plural: str, obj: Obj) -> Obj:
    """``obj`` with every quantity field of its kind as a canonical string (``obj`` itself
    when nothing changes; the caller's nested dicts are never modified)."""
    for path in _PATHS.get((group, plural), ()):
        obj = _rewrite(obj, path, canonical)
    return obj
