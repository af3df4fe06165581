"""Object names as kube-apiserver validates them, per kind.

Each kind's ``Validate<Kind>`` passes one name function to ``ValidateObjectMeta``
(k8s.io/kubernetes pkg/apis/*/validation, k8s.io/apimachinery pkg/api/validation):

* RBAC kinds (Role, ClusterRole, RoleBinding, ClusterRoleBinding): ``ValidateRBACName`` =
  ``path.IsValidPathSegmentName``, so ``system:kube-vip-role`` is a valid name;
* Namespace: ``ValidateNamespaceName`` = ``NameIsDNSLabel`` (63 characters);
* Service: ``ValidateServiceName`` = ``NameIsDNS1035Label`` (starts with a letter);
* every other built-in kind, and custom resources (apiextensions-apiserver's validator):
  ``NameIsDNSSubdomain`` (253 characters).
"""

from __future__ import annotations

import re

#: apimachinery pkg/util/validation: dns1123LabelFmt and friends.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

_RBAC = "rbac.authorization.k8s.io"
#: (group, kind) -> the name rule; kinds not listed are DNS-1123 subdomains.
RULES: dict[tuple[str, str], str] = {
    (_RBAC, "Role"): "path-segment",
    (_RBAC, "ClusterRole"): "path-segment",
    (_RBAC, "RoleBinding"): "path-segment",
    (_RBAC, "ClusterRoleBinding"): "path-segment",
    ("", "Namespace"): "dns1123-label",
    ("", "Service"): "dns1035-label",
}


def rule(group: str, kind: str) -> str:
    """The name rule of a kind: ``path-segment``, ``dns1123-label``, ``dns1035-label`` or
    ``dns1123-subdomain``."""
    return RULES.get((group, kind), "dns1123-subdomain")


def _max_len(limit: int) -> str:
    return f"must be no more than {limit} characters"


def name_errors(group: str, kind: str, name: str) -> list[str]:
    """What kube-apiserver says is wrong with ``name`` for the kind (empty when valid): the
    detail strings of ``metadata.name: Invalid value: "<name>": <detail>``."""
    which = rule(group, kind)
    if which == "path-segment":
        # apimachinery pkg/api/validation/path IsValidPathSegmentName.
        if name in (".", ".."):
            return [f"may not be '{name}'"]
        return [f"may not contain '{c}'" for c in ("/", "%") if c in name]
    errors: list[str] = []
    if which == "dns1123-label":
        if len(name) > 63:
            errors.append(_max_len(63))
        if not _DNS1123_LABEL.match(name):
            errors.append(_LABEL_MSG)
    elif which == "dns1035-label":
        if len(name) > 63:
            errors.append(_max_len(63))
        if not _DNS1035_LABEL.match(name):
            errors.append(_DNS1035_MSG)
    else:
        if len(name) > 253:
            errors.append(_max_len(253))
        if not _DNS1123_SUBDOMAIN.match(name):
            errors.append(_SUBDOMAIN_MSG)
    return errors
