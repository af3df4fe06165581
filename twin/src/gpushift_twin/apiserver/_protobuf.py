"""Kubernetes protobuf request bodies, for the few kinds kubectl's typed commands send.

kubectl 1.32 sends ``application/vnd.kubernetes.protobuf`` when it creates objects through its
typed client (``kubectl create namespace|configmap|secret|serviceaccount``). The body is the
``k8s\\x00`` magic followed by a ``runtime.Unknown`` whose ``raw`` field holds the object.
Field numbers are those of k8s.io/api/core/v1/generated.proto and
k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto. A field this module does not know makes
the whole body undecodable, so nothing is ever silently dropped.
"""

from __future__ import annotations

import base64
from typing import Any, Union

MAGIC = b"k8s\x00"

# A schema maps field numbers to (json name, type); a type is a scalar name, a nested schema,
# ("map", key type, value type) or ("repeated", type).
Type = Union[str, "Schema", tuple[str, Any, Any], tuple[str, Any]]
Schema = dict[int, tuple[str, Any]]

_TYPE_META: Schema = {1: ("apiVersion", "string"), 2: ("kind", "string")}
_UNKNOWN: Schema = {
    1: ("typeMeta", _TYPE_META),
    2: ("raw", "bytes"),
    3: ("contentEncoding", "string"),
    4: ("contentType", "string"),
}
_OWNER_REFERENCE: Schema = {
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
_OBJECT_REFERENCE: Schema = {
    1: ("kind", "string"),
    2: ("namespace", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    5: ("apiVersion", "string"),
    6: ("resourceVersion", "string"),
    7: ("fieldPath", "string"),
}
# Go's protobuf marshaller writes every non-pointer field, empty or not, so each message lists
# all of its fields; empty strings and zero numbers decode as absent, like omitempty JSON.
_OBJECT_META: Schema = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    4: ("selfLink", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    8: ("creationTimestamp", "time"),
    9: ("deletionTimestamp", "time"),
    10: ("deletionGracePeriodSeconds", "int"),
    11: ("labels", ("map", "string", "string")),
    12: ("annotations", ("map", "string", "string")),
    13: ("ownerReferences", ("repeated", _OWNER_REFERENCE)),
    14: ("finalizers", ("repeated", "string")),
    17: ("managedFields", "skip"),
}
_LOCAL_OBJECT_REFERENCE: Schema = {1: ("name", "string")}
_KINDS: dict[tuple[str, str], Schema] = {
    ("v1", "Namespace"): {
        1: ("metadata", _OBJECT_META),
        2: ("spec", {1: ("finalizers", ("repeated", "string"))}),
        3: ("status", {1: ("phase", "string"), 2: ("conditions", "skip")}),
    },
    ("v1", "ConfigMap"): {
        1: ("metadata", _OBJECT_META),
        2: ("data", ("map", "string", "string")),
        3: ("binaryData", ("map", "string", "bytes")),
        4: ("immutable", "bool"),
    },
    ("v1", "Secret"): {
        1: ("metadata", _OBJECT_META),
        2: ("data", ("map", "string", "bytes")),
        3: ("type", "string"),
        4: ("stringData", ("map", "string", "string")),
        5: ("immutable", "bool"),
    },
    ("v1", "ServiceAccount"): {
        1: ("metadata", _OBJECT_META),
        2: ("secrets", ("repeated", _OBJECT_REFERENCE)),
        3: ("imagePullSecrets", ("repeated", _LOCAL_OBJECT_REFERENCE)),
        4: ("automountServiceAccountToken", "bool"),
    },
}


class ProtobufError(ValueError):
    """A body that is not protobuf this module can decode faithfully."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated field")
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _scalar(kind: str, wire: int, value: Any) -> Any:
    if kind == "string":
        if wire != 2:
            raise ProtobufError("expected a string")
        return bytes(value).decode("utf-8")
    if kind == "bytes":
        return base64.b64encode(bytes(value)).decode()
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return value - (1 << 64) if value >= 1 << 63 else value
    raise ProtobufError(f"unknown scalar {kind}")


def _time(value: bytes) -> str | None:
    seconds = 0
    for number, _wire, v in _fields(value):
        if number == 1:
            seconds = v
    if not seconds:
        return None
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _value(kind: Any, wire: int, value: Any) -> Any:
    if isinstance(kind, dict):
        if wire != 2:
            raise ProtobufError("expected a message")
        return decode_message(value, kind)
    if kind == "time":
        return _time(value)
    return _scalar(kind, wire, value)


def decode_message(data: bytes, schema: Schema) -> dict[str, Any]:
    """Decode one message by ``schema`` into its JSON form.

    Raises:
        ProtobufError: malformed data or a field the schema does not name.
    """
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        if number not in schema:
            raise ProtobufError(f"field {number} is not known")
        name, kind = schema[number]
        if kind == "skip":  # server-owned fields a create ignores anyway
            continue
        if isinstance(kind, tuple) and kind[0] == "map":
            entry = {n: v for n, _w, v in _fields(value)}
            key = _scalar(kind[1], 2, entry.get(1, b""))
            out.setdefault(name, {})[key] = _scalar(kind[2], 2, entry.get(2, b""))
        elif isinstance(kind, tuple) and kind[0] == "repeated":
            out.setdefault(name, []).append(_value(kind[1], wire, value))
        else:
            decoded = _value(kind, wire, value)
            if decoded not in (None, "", 0) or isinstance(decoded, bool):
                out[name] = decoded
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object (``apiVersion`` and ``kind`` included).

    Raises:
        ProtobufError: not a Kubernetes protobuf body, or a kind or field not supported.
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic number")
    unknown = decode_message(body[len(MAGIC) :], _UNKNOWN)
    meta = unknown.get("typeMeta", {})
    api_version, kind = meta.get("apiVersion", ""), meta.get("kind", "")
    schema = _KINDS.get((api_version, kind))
    if schema is None:
        raise ProtobufError(f"protobuf bodies of {api_version} {kind} are not supported")
    if unknown.get("contentEncoding"):
        raise ProtobufError("encoded protobuf bodies are not supported")
    raw = base64.b64decode(unknown.get("raw", ""))
    return {"apiVersion": api_version, "kind": kind, **decode_message(raw, schema)}
