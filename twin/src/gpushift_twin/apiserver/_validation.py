"""Update validation the twin enforces: fields that may not change once set.

Rules and wording follow kube-apiserver's validation (pkg/apis/apps/validation,
pkg/apis/resource/validation, pkg/apis/core/validation ``ValidateConfigMapUpdate`` and
``ValidateSecretUpdate``, and the size limit of ``ValidateConfigMap`` and ``ValidateSecret``).
Go renders the old value with ``%#v``; the twin shows it as JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from gpushift.common import Kind, Obj
from gpushift_twin.apiserver._status import ApiError, invalid

_SELECTOR_IMMUTABLE = {
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
}
_SPEC_IMMUTABLE = {
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceclaimtemplates"),
}


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def check_update(kind: Kind, old: Obj, new: Obj) -> None:
    """Refuse an update that changes an immutable field.

    Raises:
        ApiError: 422 Invalid naming the field, as kube-apiserver does.
    """
    key = (kind.group, kind.plural)
    name = str(old["metadata"]["name"])
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if key in _SELECTOR_IMMUTABLE and old_spec.get("selector") != new_spec.get("selector"):
        raise _immutable(kind, name, "spec.selector", new_spec.get("selector"))
    if key in _SPEC_IMMUTABLE and old_spec != new_spec:
        raise _immutable(kind, name, "spec", new_spec)
    if key in (("", "configmaps"), ("", "secrets")) and old.get("immutable") is True:
        if new.get("immutable") is not True:
            raise invalid(
                kind,
                name,
                [("immutable", "Forbidden", "field is immutable when `immutable` is set")],
            )
        for field in ("data", "binaryData", "stringData"):
            if (old.get(field) or {}) != (new.get(field) or {}):
                raise invalid(
                    kind, name, [(field, "Forbidden", "field is immutable when `immutable` is set")]
                )


#: core.MaxSecretSize (pkg/apis/core/types.go): what a ConfigMap's or a Secret's data may total.
MAX_DATA_BYTES = 1024 * 1024


def _decoded_len(value: Any) -> int:
    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return len(str(value))


def data_size(kind: Kind, obj: Obj) -> int | None:
    """The bytes kube-apiserver counts against :data:`MAX_DATA_BYTES`, None for other kinds:
    a ConfigMap's ``data`` (UTF-8) plus its decoded ``binaryData``; a Secret's decoded
    ``data`` plus its ``stringData`` (which the API server folds into ``data``)."""
    key = (kind.group, kind.plural)
    if key == ("", "configmaps"):
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        return sum(len(str(v).encode()) for v in data.values()) + sum(
            _decoded_len(v) for v in binary.values()
        )
    if key == ("", "secrets"):
        data = obj.get("data") or {}
        strings = obj.get("stringData") or {}
        folded = {k: _decoded_len(v) for k, v in data.items()}
        folded.update({k: len(str(v).encode()) for k, v in strings.items()})
        return sum(folded.values())
    return None


def check_size(kind: Kind, obj: Obj) -> None:
    """Refuse a ConfigMap or Secret whose data passes 1 MiB, on create and on update.

    Mirrors pkg/apis/core/validation ValidateConfigMap (``field.TooLong`` at the root path,
    shown as ``[]``) and ValidateSecret (at ``data``); the detail is apimachinery's TooLong.

    Raises:
        ApiError: 422 Invalid, ``ConfigMap "x" is invalid: []: Too long: may not be more
            than 1048576 bytes``.
    """
    size = data_size(kind, obj)
    if size is None or size <= MAX_DATA_BYTES:
        return
    name = str((obj.get("metadata") or {}).get("name") or "")
    field = "[]" if kind.plural == "configmaps" else "data"
    raise invalid(kind, name, [(field, "Too long", f"may not be more than {MAX_DATA_BYTES} bytes")])


def _immutable(kind: Kind, name: str, field: str, value: Any) -> ApiError:
    return invalid(kind, name, [(field, f"Invalid value: {_value(value)}", "field is immutable")])


#: resource.DRAAdminNamespaceLabelKey (pkg/apis/resource/types.go).
ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
ADMIN_ACCESS_FORBIDDEN = (
    "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label "
    "on the containing namespace"
)


def admin_access_path(kind: Kind, obj: Obj) -> str | None:
    """The field path of the first request asking for admin access, or None.

    Mirrors pkg/registry/resource/utils.go AuthorizedForAdmin: only ``exactly`` carries it.
    """
    if (kind.group, kind.plural) == ("resource.k8s.io", "resourceclaims"):
        spec, prefix = obj.get("spec"), "spec"
    elif (kind.group, kind.plural) == ("resource.k8s.io", "resourceclaimtemplates"):
        spec, prefix = (obj.get("spec") or {}).get("spec"), "spec.spec"
    else:
        return None
    requests = (
        ((spec or {}).get("devices") or {}).get("requests") if isinstance(spec, dict) else None
    )
    for i, req in enumerate(requests if isinstance(requests, list) else []):
        exactly = req.get("exactly") if isinstance(req, dict) else None
        if isinstance(exactly, dict) and exactly.get("adminAccess") is True:
            return f"{prefix}.devices.requests[{i}].adminAccess"
    return None


def check_admin_access(kind: Kind, obj: Obj, namespace: Obj) -> None:
    """Refuse admin access to devices outside a namespace labelled for it (KEP-5018).

    Raises:
        ApiError: 422 Invalid with kube-apiserver's Forbidden cause.
    """
    path = admin_access_path(kind, obj)
    if path is None:
        return
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    if labels.get(ADMIN_NAMESPACE_LABEL) != "true":
        name = str((obj.get("metadata") or {}).get("name", ""))
        raise invalid(kind, name, [(path, "Forbidden", ADMIN_ACCESS_FORBIDDEN)])
