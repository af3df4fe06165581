"""Update validation the twin enforces: fields that may not change once set.

Rules and wording follow kube-apiserver's validation (pkg/apis/apps/validation,
pkg/apis/resource/validation, pkg/apis/core/validation ``ValidateConfigMapUpdate`` and
``ValidateSecretUpdate``). Go renders the old value with ``%#v``; the twin shows it as JSON.
"""

from __future__ import annotations

import json
from typing import Any

from gpushift._kinds import Kind
from gpushift._obj import Obj
from gpushift.twin.apiserver._status import ApiError, invalid

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
