"""Applying a Kustomization's objects as kustomize-controller does through fluxcd/pkg/ssa:
immutable-field detection (dry-run), force recreation, server-side apply, prune."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from gpushift.common import Kind, Obj, by_kind
from gpushift.flux import InventoryEntry
from gpushift_twin.apiserver import ApiError, Store
from gpushift_twin.charts import apply, kind_of

MANAGER = "kustomize-controller"
FORCE = "kustomize.toolkit.fluxcd.io/force"
PRUNE = "kustomize.toolkit.fluxcd.io/prune"
RECONCILE = "kustomize.toolkit.fluxcd.io/reconcile"
#: Fields the API server refuses to change (each kind's ValidateUpdate calls
#: ValidateImmutableField on them), with the Go type the error prints the new value as.
_IMMUTABLE: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "ResourceClaimTemplate": ((("spec",), "resource.ResourceClaimTemplateSpec"),),
    "ResourceClaim": ((("spec",), "resource.ResourceClaimSpec"),),
    "Deployment": ((("spec", "selector"), "v1.LabelSelector"),),
    "ReplicaSet": ((("spec", "selector"), "v1.LabelSelector"),),
    "DaemonSet": ((("spec", "selector"), "v1.LabelSelector"),),
    "StatefulSet": ((("spec", "selector"), "v1.LabelSelector"),),
    "Job": (
        (("spec", "selector"), "v1.LabelSelector"),
        (("spec", "template"), "core.PodTemplateSpec"),
    ),
}


def _go_strings(values: Any) -> str:
    return "[]string{" + ", ".join(json.dumps(str(v)) for v in values or []) + "}"


def _go_value(value: Any, go_type: str) -> str:
    """The new value as field.Invalid prints it: Go's ``%#v`` of the internal type.

    A label selector is printed in full. Other structs hold pointers whose addresses
    ``%#v`` prints, which no copy can reproduce, so their fields are elided as ``{...}``.
    """
    if go_type != "v1.LabelSelector" or not isinstance(value, dict):
        return f"{go_type}{{...}}"
    labels = value.get("matchLabels") or {}
    exprs = value.get("matchExpressions")
    ml = (
        "map[string]string{"
        + ", ".join(f"{json.dumps(str(k))}:{json.dumps(str(labels[k]))}" for k in sorted(labels))
        + "}"
        if labels
        else "map[string]string(nil)"
    )
    if exprs:
        items = ", ".join(
            "v1.LabelSelectorRequirement{"
            f"Key:{json.dumps(str(e.get('key', '')))}, "
            f"Operator:{json.dumps(str(e.get('operator', '')))}, "
            f"Values:{_go_strings(e.get('values'))}}}"
            for e in exprs
        )
        me = f"[]v1.LabelSelectorRequirement{{{items}}}"
    else:
        me = "[]v1.LabelSelectorRequirement(nil)"
    return f"v1.LabelSelector{{MatchLabels:{ml}, MatchExpressions:{me}}}"


def object_id(obj: Obj) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped), as fluxcd/pkg/ssa prints."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return (
        f"{obj.get('kind')}/{ns}/{meta.get('name')}"
        if ns
        else f"{obj.get('kind')}/{meta.get('name')}"
    )


def inventory_entry(obj: Obj, kind: Kind) -> InventoryEntry:
    """The inventory entry of an applied object."""
    return {"id": inventory_id(obj, kind), "v": kind.version}


def inventory_id(obj: Obj, kind: Kind) -> str:
    """The inventory entry id: ``<namespace>_<name>_<group>_<Kind>``."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}_{meta.get('name')}_{kind.group}_{kind.kind}"


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def _covers(desired: Any, live: Any) -> bool:
    # An apply changes a field only where the configuration sets it; defaults the server
    # filled in are not a change.
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(_covers(v, live.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(_covers(a, b) for a, b in zip(desired, live, strict=True))
        )
    return desired == live or (desired is None and live is None)


def immutable_error(obj: Obj, live: Obj, kind: Kind) -> str | None:
    """The API server's Invalid message when applying ``obj`` would change an immutable field
    (apimachinery ValidateImmutableField: ``<field>: Invalid value: <new>: field is
    immutable``), or None."""
    for path, go_type in _IMMUTABLE.get(kind.kind, ()):
        want = _at(obj, path)
        if want is None or _covers(want, _at(live, path)):
            continue
        field = ".".join(path)
        group = f".{kind.group}" if kind.group else ""
        name = (obj.get("metadata") or {}).get("name")
        return (
            f'{kind.kind}{group} "{name}" is invalid: {field}: Invalid value: '
            f"{_go_value(want, go_type)}: field is immutable"
        )
    return None


def _live(store: Store, *, kind: Kind, obj: Obj) -> Obj | None:
    meta = obj.get("metadata") or {}
    try:
        return store.get(
            kind,
            name=str(meta.get("name")),
            namespace=meta.get("namespace") if kind.namespaced else None,
        )
    except ApiError:
        return None


#: fluxcd/pkg/ssa ApplyAllStaged: cluster definitions go first, so what uses them resolves.
_FIRST = ("CustomResourceDefinition", "Namespace")


@dataclass(slots=True)
class Applied:
    """What an apply did: the objects applied (with their kinds), and those skipped."""

    objects: list[tuple[Obj, Kind]] = field(default_factory=list)
    #: ``Kind/namespace/name`` of objects whose kind the twin does not serve (lenient only).
    unserved: list[str] = field(default_factory=list)


def _known(store: Store, obj: Obj) -> bool:
    # A kind the store serves at another version (a Flux kind whose older API the modelled
    # Flux release no longer serves): not a CRD the twin lacks, so the apply fails as on a
    # cluster, with the API server's "no matches for kind".
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return any(k.group == group and k.kind == obj.get("kind") for k in store.kinds())


def _plan(
    store: Store, objects: list[Obj], *, force: bool, lenient: bool, place: bool, done: Applied
) -> list[tuple[Obj, Kind, bool]]:
    planned: list[tuple[Obj, Kind, bool]] = []
    for obj in objects:
        try:
            kind = kind_of(obj, store)
        except ApiError as err:
            if lenient and not _known(store, obj):
                done.unserved.append(object_id(obj))
                continue
            raise ApplyFailed(f"{object_id(obj)} dry-run failed: {err.message}") from None
        meta = obj.get("metadata") or {}
        if kind.namespaced and not meta.get("namespace") and not place:
            # fluxcd/pkg/ssa places nothing by default: one such object fails the whole
            # apply (check's model of a whole repository agrees).
            raise ApplyFailed(f"{object_id(obj)} namespace not specified")
        live = _live(store, kind=kind, obj=obj)
        if (
            live is not None
            and (live["metadata"].get("annotations") or {}).get(RECONCILE) == "disabled"
        ):
            continue
        recreate = False
        if live is not None:
            error = immutable_error(obj, live, kind)
            if error is not None:
                obj_force = (meta.get("annotations") or {}).get(FORCE) == "enabled"
                if not (force or obj_force):
                    raise ApplyFailed(f"{object_id(obj)} dry-run failed (Invalid): {error}")
                recreate = True
        planned.append((obj, kind, recreate))
    return planned


def _write(
    store: Store, planned: list[tuple[Obj, Kind, bool]], *, lenient: bool, done: Applied
) -> None:
    for obj, kind, recreate in planned:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") if kind.namespaced else None
        if recreate:
            try:
                store.delete(
                    kind, name=str(meta.get("name")), namespace=ns, propagation="Background"
                )
            except ApiError as err:
                if err.code != 404:
                    raise ApplyFailed(f"{object_id(obj)} delete failed: {err.message}") from None
        if lenient and ns:
            with contextlib.suppress(ApiError):  # 409: it exists
                store.create(by_kind("Namespace"), {"metadata": {"name": ns}}, manager=MANAGER)
        try:
            apply(store, obj, manager=MANAGER)
        except ApiError as err:
            raise ApplyFailed(f"{object_id(obj)} apply failed: {err.message}") from None
        done.objects.append((obj, kind))


def apply_all(
    store: Store, objects: list[Obj], *, force: bool, lenient: bool = False, place: bool = False
) -> Applied:
    """Apply ``objects`` in two stages as fluxcd/pkg/ssa does: CRDs and Namespaces, then the
    rest. Each stage is dry-run in full before any of it is written; objects whose immutable
    fields change are recreated when ``force`` (or the object's force annotation) allows.

    ``lenient`` (partial repositories) creates namespaces nothing defines and skips objects
    of kinds the twin does not serve instead of failing; a kind it serves at other versions
    only (a Flux API the modelled release removed) still fails. A namespaced object without a
    namespace fails the apply ("<Kind>/<name> namespace not specified"), unless ``place``
    (a partial repository, which may lack what sets it) lets the API server's ``default``
    take it. Raises ``ApplyFailed`` with Flux's message; a failing stage writes nothing.
    """
    done = Applied()
    first = [o for o in objects if o.get("kind") in _FIRST]
    rest = [o for o in objects if o.get("kind") not in _FIRST]
    for stage in (first, rest):
        planned = _plan(store, stage, force=force, lenient=lenient, place=place, done=done)
        _write(store, planned, lenient=lenient, done=done)
    return done


class ApplyFailed(Exception):  # noqa: N818 - a Kustomization state, not a program error
    """An object could not be applied; ``str()`` is the Kustomization's Ready message."""
