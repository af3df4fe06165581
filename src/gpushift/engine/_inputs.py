"""Reading and checking the objects ``simulate`` works on.

Every object keeps where it came from (file, document, line), so a problem found later (an
unknown DeviceClass, a bad quantity) is reported at the right place with exit code 2.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from gpushift import _quantity, _sharing, _yaml
from gpushift._errors import InputError
from gpushift.engine import _filters, _ledger, _requests, _workloads

#: Kinds simulate reads; everything else is listed once and ignored.
KNOWN_KINDS = frozenset(
    {
        "Node",
        "Pod",
        "Deployment",
        "StatefulSet",
        "ReplicaSet",
        "DaemonSet",
        "ResourceSlice",
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "PriorityClass",
        "Namespace",
    }
)


class Origin(NamedTuple):
    """Where an object was read: file, document index in it, keys from the document root,
    line.

    A named tuple: one is made per object read, and a tuple is made several times faster
    than a frozen dataclass."""

    path: str
    document: int
    prefix: tuple[str | int, ...]
    line: int | None


@dataclass(slots=True)
class Inputs:
    """The simulation's input objects, by kind, in the order they were read.

    Workloads are already expanded into pods. ``unknown`` names each ignored kind once.
    """

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    namespaces: list[dict[str, Any]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    origins: dict[int, Origin] = field(default_factory=dict)
    #: :func:`content_key` of pod specs that passed every check; pods from one template share
    #: a spec.
    valid_pod_specs: set[bytes | str] = field(default_factory=set, repr=False, compare=False)

    def origin(self, obj: object) -> Origin | None:
        """Where ``obj`` was read, if it came from a file."""
        return self.origins.get(id(obj))

    def error(self, obj: object, message: str, keys: Sequence[str | int] = ()) -> InputError:
        """An InputError about ``obj`` naming its file and the line of ``keys`` inside it."""
        o = self.origin(obj)
        desc = _yaml.describe(obj)
        if o is None:
            return InputError(message, obj=desc)
        line = o.line
        if (keys or line is None) and os.path.exists(o.path):
            found = _yaml.locate(o.path, o.document, [*o.prefix, *keys])
            line = found if found is not None else line
        return InputError(message, path=o.path, line=line, obj=desc)


def content_key(value: Any) -> bytes | str:
    """A key equal for two JSON-like values exactly when they have the same content, types
    and key order (1, 1.0 and True differ): their JSON text, or ``repr`` where JSON cannot
    hold them (keys that are not strings, integers beyond 64 bits)."""
    try:
        # orjson writes a small object about ten times faster than repr formats it.
        return orjson.dumps(value)
    except TypeError:
        return repr(value)


def _meta_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, dict) else ""


def _require(inputs: Inputs, obj: dict[str, Any], keys: Sequence[str | int]) -> Any:
    cur: Any = obj
    for i, k in enumerate(keys):
        if isinstance(k, int):
            ok = isinstance(cur, list) and k < len(cur)
        else:
            ok = isinstance(cur, dict) and cur.get(k) not in (None, "", [], {})
        if not ok:
            path = ".".join(str(x) for x in keys)
            raise inputs.error(obj, f"missing required field {path!r}", keys[:i])
        cur = cur[k]
    return cur


_VALID_QUANTITIES: set[Any] = set()

_TYPE_NAMES: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
}


def _shape(inputs: Inputs, obj: dict[str, Any], keys: Sequence[str | int], want: type) -> Any:
    """The value at ``keys`` (None if absent); raises InputError if it is not ``want``."""
    cur: Any = obj
    for k in keys:
        if isinstance(k, int):
            cur = cur[k] if isinstance(cur, list) and k < len(cur) else None
        else:
            cur = cur.get(k) if isinstance(cur, dict) else None
        if cur is None:
            return None
    if not isinstance(cur, want) or isinstance(cur, bool):
        path = ".".join(str(x) for x in keys)
        raise inputs.error(obj, f"{path} must be {_TYPE_NAMES[want]}", keys)
    return cur


def _shapes(
    inputs: Inputs,
    obj: dict[str, Any],
    prefix: Sequence[str | int],
    fields: Sequence[tuple[str, type]],
) -> None:
    """:func:`_shape` of each dotted field under ``prefix`` (and of each item of the lists
    of objects among them)."""
    base: Any = obj
    for k in prefix:
        if isinstance(k, int):
            base = base[k] if isinstance(base, list) and k < len(base) else None
        else:
            base = base.get(k) if isinstance(base, dict) else None
        if base is None:
            return
    _shapes_at(inputs, obj, base, prefix, fields)


def _shapes_at(
    inputs: Inputs,
    obj: dict[str, Any],
    base: Any,
    prefix: Sequence[str | int],
    fields: Sequence[tuple[str, type]],
) -> None:
    """:func:`_shapes` with the value at ``prefix`` already in hand (``base``). Every value is
    looked at in place; only a value of the wrong type goes through :func:`_shape`, which
    walks from the root and raises the error."""
    for parts, want, objects in _compiled(fields):
        cur = base
        for k in parts:
            cur = cur.get(k) if isinstance(cur, dict) else None
            if cur is None:
                break
        if cur is None:
            continue
        if not isinstance(cur, want) or isinstance(cur, bool):
            _shape(inputs, obj, [*prefix, *parts], want)
        if objects:
            for i, item in enumerate(cur):
                if item is not None and not isinstance(item, dict):
                    _shape(inputs, obj, [*prefix, *parts, i], dict)


_Compiled = list[tuple[tuple[str, ...], type, bool]]
#: :func:`_compiled` by the id of the field table (kept, so the id stays its own).
_COMPILED: dict[int, tuple[Sequence[tuple[str, type]], _Compiled]] = {}


def _compiled(fields: Sequence[tuple[str, type]]) -> _Compiled:
    """``fields`` with each dotted name split, and whether it is a list of objects."""
    hit = _COMPILED.get(id(fields))
    if hit is not None and hit[0] is fields:
        return hit[1]
    out = [
        (tuple(dotted.split(".")), want, want is list and dotted in _LISTS_OF_OBJECTS)
        for dotted, want in fields
    ]
    _COMPILED[id(fields)] = (fields, out)
    return out


#: List fields whose items must be objects.
_LISTS_OF_OBJECTS = frozenset(
    {
        "tolerations",
        "schedulingGates",
        "topologySpreadConstraints",
        "resourceClaims",
        "taints",
        "spec.taints",
        "resources.claims",
        "selectors",
        "devices",
        "devices.requests",
        "devices.constraints",
        "firstAvailable",
    }
)


_POD_SPEC_FIELDS = (
    ("nodeSelector", dict),
    ("tolerations", list),
    ("affinity", dict),
    ("affinity.nodeAffinity", dict),
    ("affinity.podAffinity", dict),
    ("affinity.podAntiAffinity", dict),
    ("topologySpreadConstraints", list),
    ("resourceClaims", list),
    ("overhead", dict),
    ("priorityClassName", str),
    ("schedulingGates", list),
)
_CONTAINER_FIELDS = (
    ("resources", dict),
    ("resources.requests", dict),
    ("resources.limits", dict),
    ("resources.claims", list),
)
_REQUEST_FIELDS = (
    ("deviceClassName", str),
    ("count", int),
    ("allocationMode", str),
    ("selectors", list),
    ("capacity", dict),
    ("capacity.requests", dict),
    ("tolerations", list),
)
_CLAIM_SPEC_FIELDS = (
    ("devices", dict),
    ("devices.requests", list),
    ("devices.constraints", list),
)
_CLAIM_REQUEST_FIELDS = (("exactly", dict), ("firstAvailable", list))
_SLICE_SPEC_FIELDS = (("driver", str), ("pool", dict), ("nodeName", str))
_SLICE_POOL_FIELDS = (("name", str), ("generation", int), ("resourceSliceCount", int))
_SLICE_DEVICES_FIELDS = (("devices", list), ("nodeSelector", dict))
_DEVICE_FIELDS = (("attributes", dict), ("capacity", dict), ("taints", list), ("name", str))
_CAPACITY_FIELDS = (("requestPolicy", dict), ("requestPolicy.validRange", dict))
_META_FIELDS = (("labels", dict), ("annotations", dict))
_OBJECT_FIELDS = (("spec", dict), ("status", dict))
_CLASS_FIELDS = (("selectors", list), ("config", list), ("extendedResourceName", str))
_NODE_FIELDS = (("spec.taints", list), ("status.allocatable", dict))


def field_path(keys: Sequence[str | int], *, maps: int = 0) -> str:
    """``keys`` as kube-apiserver writes a field path: ``spec.containers[0].resources.requests
    [nvidia.com/gpu]``; the last ``maps`` keys are map keys."""
    out = ""
    for i, k in enumerate(keys):
        if isinstance(k, int) or i >= len(keys) - maps:
            out += f"[{k}]"
        else:
            out += f".{k}" if out else str(k)
    return out


def _check_quantity(
    inputs: Inputs, obj: dict[str, Any], raw: Any, keys: Sequence[str | int]
) -> None:
    if isinstance(raw, str | int) and not isinstance(raw, bool) and raw in _VALID_QUANTITIES:
        return
    try:
        value = _quantity.parse(raw)
    except InputError as err:
        where = ".".join(map(str, keys))
        raise inputs.error(obj, f"invalid quantity at {where}: {err.message}", keys) from None
    if value < 0:
        # k8s.io/apimachinery validation ValidateNonnegativeQuantity (resource lists, node
        # capacity and allocatable, device capacity) as kube-apiserver words it.
        raise inputs.error(
            obj,
            f'{field_path(keys, maps=1)}: Invalid value: "{str(raw).strip()}": '
            "must be greater than or equal to 0",
            keys,
        )
    if isinstance(raw, str | int):
        _VALID_QUANTITIES.add(raw)


def _check_pod_spec(inputs: Inputs, obj: dict[str, Any], *, prefix: tuple[str | int, ...]) -> None:
    _shape(inputs, obj, prefix, dict)
    _require(inputs, obj, [*prefix, "containers"])
    _shape(inputs, obj, [*prefix, "containers"], list)
    _shape(inputs, obj, [*prefix, "initContainers"], list)
    _shapes(inputs, obj, prefix, _POD_SPEC_FIELDS)
    spec: Any = obj
    for k in prefix:
        spec = spec[k]
    gates = spec.get("schedulingGates") or []
    for i, g in enumerate(gates):
        if not g.get("name"):
            keys = [*prefix, "schedulingGates", i]
            raise inputs.error(obj, f"missing required field 'schedulingGates[{i}].name'", keys)
    if gates and spec.get("nodeName"):
        # k8s.io/kubernetes pkg/apis/core/validation ValidatePodCreate: a pod is bound only
        # once its gates are gone.
        raise inputs.error(
            obj,
            "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared",
            [*prefix, "nodeName"],
        )
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            if not isinstance(c, dict) or not c.get("name"):
                raise inputs.error(
                    obj, f"missing required field '{group}[{i}].name'", [*prefix, group, i]
                )
            _shapes(inputs, obj, [*prefix, group, i], _CONTAINER_FIELDS)
            res = c.get("resources") or {}
            for part in ("requests", "limits"):
                for rname, raw in (res.get(part) or {}).items():
                    keys = [*prefix, group, i, "resources", part, rname]
                    _check_quantity(inputs, obj, raw, keys)
                    if (
                        rname in _ledger.GPU_RESOURCES
                        and _quantity.parse(raw) > _sharing.MAX_UNITS_PER_NODE
                    ):
                        raise inputs.error(
                            obj,
                            f"{field_path(keys, maps=1)}: {str(raw).strip()} is more than any "
                            f"node can give (at most {_sharing.MAX_UNITS_PER_NODE})",
                            keys,
                        )


def _check_claim_spec(
    inputs: Inputs, obj: dict[str, Any], *, prefix: tuple[str | int, ...]
) -> None:
    spec: Any = _require(inputs, obj, list(prefix))
    _shape(inputs, obj, prefix, dict)
    _shapes(inputs, obj, prefix, _CLAIM_SPEC_FIELDS)
    requests = (spec.get("devices") or {}).get("requests") or []
    for i, req in enumerate(requests):
        keys = [*prefix, "devices", "requests", i]
        if not isinstance(req, dict) or not req.get("name"):
            raise inputs.error(obj, f"missing required field 'requests[{i}].name'", keys)
        _shapes(inputs, obj, keys, _CLAIM_REQUEST_FIELDS)
        subs: list[tuple[list[str | int], Any]] = []
        if req.get("exactly") is not None:
            subs.append(([*keys, "exactly"], req["exactly"]))
        elif req.get("firstAvailable"):
            for j, sub in enumerate(req["firstAvailable"]):
                subs.append(([*keys, "firstAvailable", j], sub))
        else:
            raise inputs.error(
                obj, f"request {req['name']!r}: one of exactly or firstAvailable is required", keys
            )
        for skeys, sub in subs:
            if not isinstance(sub, dict) or not sub.get("deviceClassName"):
                raise inputs.error(
                    obj, f"request {req['name']!r}: missing required field deviceClassName", skeys
                )
            _shapes(inputs, obj, skeys, _REQUEST_FIELDS)
            caps = (sub.get("capacity") or {}).get("requests") or {}
            for cname, raw in caps.items():
                _check_quantity(inputs, obj, raw, [*skeys, "capacity", "requests", cname])


def _check_slice(inputs: Inputs, obj: dict[str, Any]) -> None:
    _require(inputs, obj, ["spec", "driver"])
    _shapes(inputs, obj, ["spec"], _SLICE_SPEC_FIELDS)
    _require(inputs, obj, ["spec", "pool", "name"])
    spec = obj["spec"]
    _shapes_at(inputs, obj, spec["pool"], ["spec", "pool"], _SLICE_POOL_FIELDS)
    _shapes_at(inputs, obj, spec, ["spec"], _SLICE_DEVICES_FIELDS)
    if not any(spec.get(k) for k in ("nodeName", "nodeSelector", "allNodes")) and not spec.get(
        "perDeviceNodeSelection"
    ):
        raise inputs.error(
            obj, "exactly one of nodeName, nodeSelector, allNodes is required", ["spec"]
        )
    for i, dev in enumerate(spec.get("devices") or []):
        if not isinstance(dev, dict) or not dev.get("name"):
            raise inputs.error(obj, f"missing required field 'devices[{i}].name'", ["spec"])
        _shapes_at(inputs, obj, dev, ("spec", "devices", i), _DEVICE_FIELDS)
        for aname, attr in (dev.get("attributes") or {}).items():
            if attr is not None and not isinstance(attr, dict):
                _shape(inputs, obj, ["spec", "devices", i, "attributes", aname], dict)
        for cname, cap in (dev.get("capacity") or {}).items():
            keys = ("spec", "devices", i, "capacity", cname)
            if not isinstance(cap, dict) or "value" not in cap:
                raise inputs.error(obj, f"capacity {cname!r}: missing required field 'value'", keys)
            raw = cap["value"]
            # A quantity met before (the same model's devices repeat them) passed already.
            if type(raw) is not str or raw not in _VALID_QUANTITIES:
                _check_quantity(inputs, obj, raw, [*keys, "value"])
            _shapes_at(inputs, obj, cap, keys, _CAPACITY_FIELDS)
            policy = cap.get("requestPolicy")
            if not policy:
                continue
            if "default" in policy:
                _check_quantity(inputs, obj, policy["default"], [*keys, "requestPolicy"])
            for part in ("min", "max", "step"):
                raw = (policy.get("validRange") or {}).get(part)
                if raw is not None:
                    _check_quantity(inputs, obj, raw, [*keys, "requestPolicy", "validRange"])


def _check(inputs: Inputs, obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    _shape(inputs, obj, ["metadata"], dict)
    if not _meta_name(obj):
        raise inputs.error(obj, "missing required field 'metadata.name'", ["metadata"])
    _shapes(inputs, obj, ["metadata"], _META_FIELDS)
    _shapes_at(inputs, obj, obj, [], _OBJECT_FIELDS)
    if kind == "Pod":
        # The checks read nothing but the spec, so an equal spec (same keys, types and values)
        # passes them again; only specs that passed are remembered.
        spec_text = content_key(obj.get("spec"))
        if spec_text not in inputs.valid_pod_specs:
            _check_pod_spec(inputs, obj, prefix=("spec",))
            inputs.valid_pod_specs.add(spec_text)
    elif kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"):
        _require(inputs, obj, ["spec", "template", "spec"])
        _check_pod_spec(inputs, obj, prefix=("spec", "template", "spec"))
    elif kind == "ResourceSlice":
        _check_slice(inputs, obj)
    elif kind == "ResourceClaim":
        _check_claim_spec(inputs, obj, prefix=("spec",))
    elif kind == "ResourceClaimTemplate":
        _check_claim_spec(inputs, obj, prefix=("spec", "spec"))
    elif kind == "DeviceClass":
        _shapes(inputs, obj, ["spec"], _CLASS_FIELDS)
    elif kind == "PriorityClass":
        if not isinstance(obj.get("value"), int):
            raise inputs.error(obj, "missing required field 'value'")
    elif kind == "Node":
        _shapes_at(inputs, obj, obj, [], _NODE_FIELDS)
        status = obj.get("status") or {}
        for part in ("capacity", "allocatable"):
            for rname, raw in (status.get(part) or {}).items():
                _check_quantity(inputs, obj, raw, ["status", part, rname])
        _check_gpu_node(inputs, obj)


def _check_gpu_node(inputs: Inputs, obj: dict[str, Any]) -> None:
    """GPU labels and counts within what a node can hold, so no ledger grows per unit."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, high in (
        (_ledger.GPU_COUNT_LABEL, _sharing.MAX_GPUS_PER_NODE),
        (_ledger.GPU_REPLICAS_LABEL, _sharing.MAX_REPLICAS_PER_CARD),
    ):
        try:
            _sharing.label_count(labels.get(key), key=key, high=high)
        except ValueError as err:
            raise inputs.error(obj, str(err), ["metadata", "labels", key]) from None
    alloc = (obj.get("status") or {}).get("allocatable") or {}
    for rname in _ledger.GPU_RESOURCES:
        raw = alloc.get(rname)
        if raw is not None and _quantity.parse(raw) > _sharing.MAX_UNITS_PER_NODE:
            raise inputs.error(
                obj,
                f"status.allocatable[{rname}]: {str(raw).strip()} is more units than a node "
                f"can advertise (at most {_sharing.MAX_UNITS_PER_NODE}: "
                f"{_sharing.MAX_GPUS_PER_NODE} cards of {_sharing.MAX_REPLICAS_PER_CARD} "
                "replicas)",
                ["status", "allocatable", rname],
            )


def _check_cel(inputs: Inputs) -> None:
    # Compile every selector once up front, so a bad one is reported where it is written.
    from gpushift.engine._cel import CelSelectorEvaluator

    evaluator = CelSelectorEvaluator()

    def check(obj: dict[str, Any], selectors: Any, keys: list[str | int]) -> None:
        for k, sel in enumerate(selectors or []):
            expr = (sel.get("cel") or {}).get("expression") if isinstance(sel, dict) else None
            if expr is None:
                continue
            try:
                evaluator.check(str(expr))
            except InputError as err:
                raise inputs.error(obj, err.message, [*keys, k, "cel"]) from None

    for c in inputs.classes:
        check(c, (c.get("spec") or {}).get("selectors"), ["spec", "selectors"])
    for obj in [*inputs.claims, *inputs.templates]:
        prefix: list[str | int] = ["spec"] if obj["kind"] == "ResourceClaim" else ["spec", "spec"]
        spec: Any = obj
        for key in prefix:
            spec = spec[key]
        for i, req in enumerate((spec.get("devices") or {}).get("requests") or []):
            base: list[str | int] = [*prefix, "devices", "requests", i]
            if req.get("exactly") is not None:
                check(obj, req["exactly"].get("selectors"), [*base, "exactly", "selectors"])
            for j, sub in enumerate(req.get("firstAvailable") or []):
                check(obj, sub.get("selectors"), [*base, "firstAvailable", j, "selectors"])


#: resource.DRAAdminNamespaceLabelKey (pkg/apis/resource/types.go).
ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"


def _check_admin_access(inputs: Inputs) -> None:
    # pkg/registry/resource/utils.go AuthorizedForAdmin: kube-apiserver refuses admin access
    # outside a namespace labelled for it. Only a Namespace in the input can say; without
    # one, the claim is taken as the cluster stored it.
    labelled = {
        _meta_name(n): ((n.get("metadata") or {}).get("labels") or {}).get(ADMIN_NAMESPACE_LABEL)
        == "true"
        for n in inputs.namespaces
    }
    for obj in [*inputs.claims, *inputs.templates]:
        ns = str((obj.get("metadata") or {}).get("namespace") or "default")
        if labelled.get(ns, True):
            continue
        prefix: list[str | int] = ["spec"] if obj["kind"] == "ResourceClaim" else ["spec", "spec"]
        spec: Any = obj
        for k in prefix:
            spec = spec[k]
        for i, req in enumerate((spec.get("devices") or {}).get("requests") or []):
            if (req.get("exactly") or {}).get("adminAccess") is True:
                keys = [*prefix, "devices", "requests", i, "adminAccess"]
                raise inputs.error(
                    obj,
                    f"{field_path(keys)}: Forbidden: admin access to devices requires the "
                    f"`{ADMIN_NAMESPACE_LABEL}: true` label on the containing namespace",
                    [*prefix, "devices", "requests", i],
                )


def _check_class_refs(inputs: Inputs) -> None:
    names = {_meta_name(c) for c in inputs.classes}
    for obj in [*inputs.claims, *inputs.templates]:
        prefix: tuple[str, ...] = ("spec",) if obj["kind"] == "ResourceClaim" else ("spec", "spec")
        spec: Any = obj
        for k in prefix:
            spec = spec[k]
        for i, req in enumerate((spec.get("devices") or {}).get("requests") or []):
            subs = [req["exactly"]] if req.get("exactly") is not None else req["firstAvailable"]
            for j, sub in enumerate(subs):
                cls = sub["deviceClassName"]
                if cls not in names:
                    where: list[str | int] = [*prefix, "devices", "requests", i]
                    where += (
                        ["exactly"] if req.get("exactly") is not None else ["firstAvailable", j]
                    )
                    raise inputs.error(
                        obj,
                        f'request {req["name"]!r}: device class "{cls}" does not exist',
                        [*where, "deviceClassName"],
                    )


def _daemon_nodes(ds: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    # pkg/controller/daemon NodeShouldRunDaemonPod: selector/affinity and NoSchedule/NoExecute
    # taints decide which nodes get a pod (resources do not).
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    tolerations = [*(spec.get("tolerations") or []), *_workloads.DAEMONSET_TOLERATIONS]
    out = []
    for n in nodes:
        name = _meta_name(n)
        labels = (n.get("metadata") or {}).get("labels") or {}
        if not _filters.node_matches_pod(spec, node_name=name, labels=labels):
            continue
        if _filters.untolerated_taint((n.get("spec") or {}).get("taints") or [], tolerations):
            continue
        out.append(name)
    return out


def _add(inputs: Inputs, obj: dict[str, Any], origin: Origin, workloads: list[Any]) -> None:
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        inputs.origins[id(obj)] = origin
        raise inputs.error(obj, "missing required field 'kind'")
    if kind not in KNOWN_KINDS:
        label = f"{kind} ({obj.get('apiVersion', '')})"
        if label not in inputs.unknown:
            inputs.unknown.append(label)
        return
    inputs.origins[id(obj)] = origin
    _check(inputs, obj)
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"):
        workloads.append(obj)
        return
    getattr(inputs, _LIST_OF_KIND[kind]).append(obj)


#: The ``Inputs`` list each kind that is not a workload goes to.
_LIST_OF_KIND = {
    "Node": "nodes",
    "Pod": "pods",
    "ResourceSlice": "slices",
    "DeviceClass": "classes",
    "ResourceClaim": "claims",
    "ResourceClaimTemplate": "templates",
    "PriorityClass": "priority_classes",
    "Namespace": "namespaces",
}


def _keys(obj: dict[str, Any]) -> list[object]:
    """How owner references can name ``obj``: its uid, and kind/namespace/name."""
    meta = obj.get("metadata") or {}
    out: list[object] = [(obj.get("kind"), meta.get("namespace") or "default", meta.get("name"))]
    if meta.get("uid"):
        out.append(str(meta["uid"]))
    return out


def _parents(obj: dict[str, Any]) -> list[object]:
    """The controllers ``obj``'s ownerReferences name, in the forms of :func:`_keys`."""
    meta = obj.get("metadata") or {}
    out: list[object] = []
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if not isinstance(ref, dict):
            continue
        out.append((ref.get("kind"), meta.get("namespace") or "default", ref.get("name")))
        if ref.get("uid"):
            out.append(str(ref["uid"]))
    return out


def _finish(inputs: Inputs, workloads: list[dict[str, Any]]) -> Inputs:
    # A cluster dump holds controllers with their ReplicaSets and pods: a controller whose
    # children are in the input already has its pods there (or in a child that is expanded
    # in its place), so only controllers without children are expanded from their template.
    parented = {key for obj in [*inputs.pods, *workloads] for key in _parents(obj)}
    for w in workloads:
        if any(key in parented for key in _keys(w)):
            continue
        kind = w["kind"]
        if kind == "Deployment":
            pods = _workloads.deployment_pods(w)
        elif kind == "ReplicaSet":
            pods = _workloads.replicaset_pods(w)
        elif kind == "StatefulSet":
            pods = _workloads.statefulset_pods(w)
        else:
            pods = _workloads.daemonset_pods(w, node_names=_daemon_nodes(w, inputs.nodes))
        origin = inputs.origins[id(w)]
        for p in pods:
            inputs.origins[id(p)] = Origin(origin.path, origin.document, origin.prefix, origin.line)
            inputs.pods.append(p)
    _check_class_refs(inputs)
    _check_admin_access(inputs)
    _check_cel(inputs)
    summed: set[bytes | str] = set()
    for p in inputs.pods:
        meta = p.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        spec = p.get("spec") or {}
        # Requests follow from the spec alone: an equal spec adds up as before.
        key = content_key(spec)
        if key in summed:
            continue
        try:
            _requests.pod_requests(spec)
        except InputError as err:
            raise inputs.error(p, str(err), ["spec"]) from None
        summed.add(key)
    for obj in [*inputs.claims, *inputs.templates]:
        obj.setdefault("metadata", {}).setdefault("namespace", "default")
    return inputs


def load(paths: Iterable[str | os.PathLike[str]]) -> Inputs:
    """Read every YAML/JSON file under ``paths`` (multi-document files, Lists, directories).

    Raises InputError (file, line, object) for unparsable YAML, a missing required field, an
    invalid quantity, a claim naming a DeviceClass that is not in the input, or paths that
    hold no Kubernetes object at all.
    """
    paths = list(paths)
    inputs = Inputs()
    workloads: list[dict[str, Any]] = []
    for f in _yaml.find_files(paths):
        for doc in _read(f):
            _add_document(inputs, doc, workloads)
    if not (inputs.origins or inputs.unknown):
        shown = ", ".join(os.fspath(p) for p in paths)
        raise InputError("no Kubernetes objects (documents with apiVersion and kind)", path=shown)
    return _finish(inputs, workloads)


def _read(path: Path) -> list[_yaml.Document]:
    # JSON is valid YAML, but orjson reads it many times faster (and about twice as fast as
    # the json module); any file it rejects (NaN, integers beyond 64 bits, bad UTF-8) goes
    # through the YAML reader, which reads it or reports the error with its line.
    if path.suffix == ".json":
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, ValueError):
            pass
        else:
            return [_yaml.Document(data, str(path), 1, 0)]
    return _yaml.read_file(path)


def from_objects(objects: Iterable[dict[str, Any]], *, path: str = "<example>") -> Inputs:
    """The same as ``load`` for objects already in memory (the embedded example, tests)."""
    inputs = Inputs()
    workloads: list[dict[str, Any]] = []
    for i, obj in enumerate(objects):
        _add_document(inputs, _yaml.Document(obj, path, 0, i), workloads)
    return _finish(inputs, workloads)


def _add_document(inputs: Inputs, doc: _yaml.Document, workloads: list[dict[str, Any]]) -> None:
    data = doc.data
    if data is None:
        return
    if not isinstance(data, dict):
        raise InputError("a Kubernetes object must be a mapping", path=doc.path, line=doc.line)
    kind = str(data.get("kind", ""))
    if kind.endswith("List") and isinstance(data.get("items"), list):
        for i, item in enumerate(data["items"]):
            if not isinstance(item, dict):
                raise InputError(f"items[{i}] is not an object", path=doc.path, line=doc.line)
            # The item's line is looked up only if an error needs it (``Inputs.error``).
            _add(inputs, item, Origin(doc.path, doc.index, ("items", i), None), workloads)
        return
    _add(inputs, data, Origin(doc.path, doc.index, (), doc.line or None), workloads)
