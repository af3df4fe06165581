"""How built-in kinds merge: strategic-merge tags and server-side-apply list types.

Two upstream sources describe the same fields:

- strategic merge patch reads the ``patchStrategy``/``patchMergeKey`` struct tags of
  k8s.io/api (``containers`` merge by ``name``, ``tolerations`` have no tag and are replaced);
- server-side apply reads the OpenAPI ``x-kubernetes-list-type``/``x-kubernetes-list-map-keys``
  markers, falling back to the patch tags when a list has no marker
  (k8s.io/kube-openapi pkg/schemaconv). ``ports`` of a container is therefore merged by
  ``containerPort`` for a patch but keyed by ``containerPort`` and ``protocol`` for apply.

Only the fields whose merging differs from the default are declared. Any other field of a
known type, and every field of a custom resource without a schema, is a granular struct field
(maps merge key by key, lists are atomic), which is what upstream does for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeAlias

from gpushift.common import Kind

__all__ = [
    "ATOMIC_LIST",
    "ATOMIC_STRUCT",
    "DEDUCED",
    "SCALAR",
    "UNKNOWN",
    "FreeMap",
    "ListOf",
    "Scalar",
    "Struct",
    "TypeSpec",
    "child_type",
    "from_openapi",
    "is_atomic",
    "is_entry",
    "item_type",
    "list_type",
    "root_type",
]


@dataclass(frozen=True, slots=True)
class Struct:
    """An object with named fields.

    ``name`` indexes the built-in field tables; ``fields`` holds the fields of a type read
    from a CRD schema instead, with ``open`` set when the schema keeps unknown fields
    (``x-kubernetes-preserve-unknown-fields``). Neither: a struct of unknown fields.
    """

    name: str | None = None
    atomic: bool = False
    fields: Mapping[str, TypeSpec] | None = None
    open: bool = False


@dataclass(frozen=True, slots=True)
class FreeMap:
    """A ``map[string]T`` such as ``labels`` or ``data``: every key is an entry, not a field.

    ``deduced`` marks a value without a schema (structured-merge-diff's deduced type): its
    maps are free maps all the way down and its lists are atomic.
    """

    item: TypeSpec = field(default_factory=lambda: Scalar())
    atomic: bool = False
    deduced: bool = False


@dataclass(frozen=True, slots=True)
class ListOf:
    """A list field with its patch tags and its apply list type."""

    item: TypeSpec = field(default_factory=lambda: Scalar())
    #: ``patchStrategy`` tag: "", "merge", "retainKeys" or "merge,retainKeys".
    patch_strategy: str = ""
    #: ``patchMergeKey`` tag.
    patch_merge_key: str = ""
    #: ``+listType``: "atomic", "set" or "map"; "" derives it from the patch tags.
    list_type: str = ""
    #: ``+listMapKey`` markers; empty derives them from ``patch_merge_key``.
    list_map_keys: tuple[str, ...] = ()
    #: OpenAPI defaults of key fields, used when an item omits one (``protocol: TCP``).
    key_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def smp_merges(self) -> bool:
        """True when a strategic merge patch merges this list instead of replacing it."""
        return "merge" in self.patch_strategy.split(",")

    @property
    def apply_type(self) -> str:
        """The list type server-side apply uses: "atomic", "set" or "map"."""
        if self.list_type:
            return self.list_type
        if self.smp_merges:
            return "map" if self.patch_merge_key else "set"
        return "atomic"

    @property
    def apply_keys(self) -> tuple[str, ...]:
        """The key fields of an associative ("map") list."""
        if self.list_map_keys:
            return self.list_map_keys
        return (self.patch_merge_key,) if self.patch_merge_key else ()


@dataclass(frozen=True, slots=True)
class Scalar:
    """A leaf: string, number, boolean, or a value that is replaced whole."""


TypeSpec: TypeAlias = Struct | FreeMap | ListOf | Scalar

SCALAR = Scalar()
UNKNOWN = Struct()
DEDUCED = FreeMap(deduced=True)
#: A struct or map that apply owns as one value (``+structType=atomic``, ``+mapType=atomic``).
ATOMIC_STRUCT = Struct(atomic=True)
ATOMIC_LIST = ListOf()
_STRINGS = FreeMap()


def _merge(key: str, item: TypeSpec, **kw: Any) -> ListOf:
    return ListOf(item=item, patch_strategy="merge", patch_merge_key=key, **kw)


def _conditions() -> ListOf:
    return _merge("type", UNKNOWN)


_TCP = MappingProxyType({"protocol": "TCP"})

# Field tables, from the struct tags and list markers in k8s.io/api (core/v1, apps/v1,
# resource/v1) and k8s.io/apimachinery meta/v1, release 1.32.
_TYPES: dict[str, dict[str, TypeSpec]] = {
    "ObjectMeta": {
        "labels": _STRINGS,
        "annotations": _STRINGS,
        "finalizers": ListOf(patch_strategy="merge", list_type="set"),
        "ownerReferences": _merge("uid", UNKNOWN),
        "managedFields": ATOMIC_LIST,
    },
    "PodTemplateSpec": {"metadata": Struct("ObjectMeta"), "spec": Struct("PodSpec")},
    "PodSpec": {
        "volumes": ListOf(
            item=Struct("Volume"),
            patch_strategy="merge,retainKeys",
            patch_merge_key="name",
        ),
        "initContainers": _merge("name", Struct("Container")),
        "containers": _merge("name", Struct("Container")),
        "ephemeralContainers": _merge("name", Struct("Container")),
        "imagePullSecrets": _merge("name", UNKNOWN),
        "hostAliases": _merge("ip", UNKNOWN),
        "topologySpreadConstraints": _merge(
            "topologyKey",
            Struct("TopologySpreadConstraint"),
            list_map_keys=("topologyKey", "whenUnsatisfiable"),
        ),
        "schedulingGates": _merge("name", UNKNOWN),
        "resourceClaims": ListOf(
            item=UNKNOWN, patch_strategy="merge,retainKeys", patch_merge_key="name"
        ),
        "nodeSelector": FreeMap(atomic=True),
        "tolerations": ATOMIC_LIST,
        "readinessGates": ATOMIC_LIST,
        "overhead": _STRINGS,
    },
    "Container": {
        "ports": _merge(
            "containerPort",
            UNKNOWN,
            list_map_keys=("containerPort", "protocol"),
            key_defaults=_TCP,
        ),
        "env": _merge("name", UNKNOWN),
        "volumeMounts": _merge("mountPath", UNKNOWN),
        "volumeDevices": _merge("devicePath", UNKNOWN),
        "resources": Struct("ResourceRequirements"),
    },
    "ResourceRequirements": {
        "limits": _STRINGS,
        "requests": _STRINGS,
        # +listType=map +listMapKey=name, but no patch tags: a patch replaces it.
        "claims": ListOf(item=UNKNOWN, list_type="map", list_map_keys=("name",)),
    },
    "Volume": {},
    # LabelSelector is +structType=atomic wherever it appears.
    "TopologySpreadConstraint": {"labelSelector": ATOMIC_STRUCT},
    "PodStatus": {
        "conditions": _conditions(),
        "podIPs": _merge("ip", UNKNOWN),
        "hostIPs": _merge("ip", UNKNOWN, list_type="atomic"),
        "resourceClaimStatuses": ListOf(
            item=UNKNOWN, patch_strategy="merge,retainKeys", patch_merge_key="name"
        ),
    },
    "NodeSpec": {"podCIDRs": ListOf(patch_strategy="merge", list_type="set")},
    "NodeStatus": {
        "conditions": _conditions(),
        "addresses": _merge("type", UNKNOWN),
        "capacity": _STRINGS,
        "allocatable": _STRINGS,
    },
    "NamespaceStatus": {"conditions": _conditions()},
    "ServiceSpec": {
        "ports": _merge("port", UNKNOWN, list_map_keys=("port", "protocol"), key_defaults=_TCP),
        "selector": FreeMap(atomic=True),
    },
    "ServiceStatus": {
        "conditions": ListOf(item=UNKNOWN, patch_strategy="merge", patch_merge_key="type")
    },
    "WorkloadSpec": {
        "selector": ATOMIC_STRUCT,
        "template": Struct("PodTemplateSpec"),
        "volumeClaimTemplates": ATOMIC_LIST,
    },
    "WorkloadStatus": {"conditions": _conditions()},
    "ResourceClaimStatus": {"reservedFor": _merge("uid", UNKNOWN)},
    "ServiceAccount": {"secrets": _merge("name", UNKNOWN)},
    "ConfigMap": {"data": _STRINGS, "binaryData": _STRINGS},
    "Secret": {"data": _STRINGS, "stringData": _STRINGS},
}

_WORKLOAD: dict[str, TypeSpec] = {
    "spec": Struct("WorkloadSpec"),
    "status": Struct("WorkloadStatus"),
}

# Top-level fields per (group, kind); "metadata" is added to every kind.
_ROOTS: dict[tuple[str, str], dict[str, TypeSpec]] = {
    ("", "Pod"): {"spec": Struct("PodSpec"), "status": Struct("PodStatus")},
    ("", "Node"): {"spec": Struct("NodeSpec"), "status": Struct("NodeStatus")},
    ("", "Namespace"): {"status": Struct("NamespaceStatus")},
    ("", "Service"): {"spec": Struct("ServiceSpec"), "status": Struct("ServiceStatus")},
    ("", "ServiceAccount"): dict(_TYPES["ServiceAccount"]),
    ("", "ConfigMap"): dict(_TYPES["ConfigMap"]),
    ("", "Secret"): dict(_TYPES["Secret"]),
    ("apps", "Deployment"): _WORKLOAD,
    ("apps", "ReplicaSet"): _WORKLOAD,
    ("apps", "StatefulSet"): _WORKLOAD,
    ("apps", "DaemonSet"): _WORKLOAD,
    ("resource.k8s.io", "ResourceClaim"): {"status": Struct("ResourceClaimStatus")},
}

for (_group, _name), _fields in _ROOTS.items():
    _TYPES[f"{_group}/{_name}"] = {"metadata": Struct("ObjectMeta"), **_fields}
_TYPES["Object"] = {"metadata": Struct("ObjectMeta")}


def root_type(kind: Kind, schema: Mapping[str, Any] | None = None) -> Struct:
    """The type of a whole object of ``kind``.

    ``schema`` is a custom resource's ``openAPIV3Schema``; without one, kinds without a
    declared table get ``metadata`` typed and every other field treated as an unknown
    struct field.
    """
    if schema is not None and not kind.builtin:
        converted = from_openapi(schema)
        fields = dict(converted.fields or {}) if isinstance(converted, Struct) else {}
        fields.update(metadata=Struct("ObjectMeta"), apiVersion=SCALAR, kind=SCALAR)
        is_open = not isinstance(converted, Struct) or converted.open
        return Struct(fields=MappingProxyType(fields), open=is_open)
    name = f"{kind.group}/{kind.kind}"
    return Struct(name if name in _TYPES else "Object")


def from_openapi(schema: Mapping[str, Any]) -> TypeSpec:
    """The type a CRD's structural schema describes (kube-openapi pkg/schemaconv rules).

    Lists are atomic unless ``x-kubernetes-list-type`` says ``set`` or ``map`` (with
    ``x-kubernetes-list-map-keys``); ``x-kubernetes-map-type: atomic`` makes an object
    atomic; ``additionalProperties`` makes a free map; an object without properties, or one
    that preserves unknown fields, is deduced from its value.
    """
    if not isinstance(schema, Mapping) or schema.get("x-kubernetes-int-or-string"):
        return SCALAR
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        items = items if isinstance(items, Mapping) else {}
        keys = tuple(str(k) for k in schema.get("x-kubernetes-list-map-keys") or ())
        properties = items.get("properties") or {}
        defaults = {
            k: properties[k]["default"]
            for k in keys
            if isinstance(properties.get(k), Mapping) and "default" in properties[k]
        }
        return ListOf(
            item=from_openapi(items),
            list_type=str(schema.get("x-kubernetes-list-type") or "atomic"),
            list_map_keys=keys,
            key_defaults=MappingProxyType(defaults),
        )
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    if kind == "object" or "properties" in schema or preserve:
        atomic = schema.get("x-kubernetes-map-type") == "atomic"
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and properties:
            fields = {str(k): from_openapi(v) for k, v in properties.items()}
            return Struct(fields=MappingProxyType(fields), atomic=atomic, open=preserve)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return FreeMap(item=from_openapi(extra), atomic=atomic)
        return FreeMap(deduced=True, atomic=atomic) if atomic else DEDUCED
    return SCALAR


def child_type(spec: TypeSpec, key: str) -> TypeSpec:
    """The type of field or entry ``key`` inside a map-valued ``spec``."""
    if isinstance(spec, FreeMap):
        return DEDUCED if spec.deduced else spec.item
    if isinstance(spec, Struct):
        if spec.fields is not None:
            found = spec.fields.get(key)
            if found is not None:
                return found
            return DEDUCED if spec.open else UNKNOWN
        if spec.name is not None:
            return _TYPES[spec.name].get(key, UNKNOWN)
    return UNKNOWN


def is_entry(spec: TypeSpec, key: str) -> bool:
    """True when ``key`` of a map typed ``spec`` is a map entry rather than a named field.

    Apply owns map entries in themselves (and a struct field only through its leaves).
    Fields missing from a CRD schema count as entries; fields missing from the built-in
    tables, which declare only what merges specially, count as named fields.
    """
    if isinstance(spec, FreeMap):
        return True
    return isinstance(spec, Struct) and spec.fields is not None and key not in spec.fields


def list_type(spec: TypeSpec, key: str) -> ListOf:
    """The list description of field ``key``: declared, or atomic when undeclared."""
    child = child_type(spec, key)
    return child if isinstance(child, ListOf) else ATOMIC_LIST


def item_type(spec: ListOf, item: object) -> TypeSpec:
    """The type of one list element: the declared item type, or unknown for maps."""
    if isinstance(item, dict):
        return spec.item if not isinstance(spec.item, Scalar) else UNKNOWN
    return SCALAR


def is_atomic(spec: TypeSpec) -> bool:
    """True when apply owns the value as a whole (scalars, atomic lists, maps and structs)."""
    if isinstance(spec, Scalar):
        return True
    if isinstance(spec, ListOf):
        return spec.apply_type == "atomic"
    return spec.atomic
