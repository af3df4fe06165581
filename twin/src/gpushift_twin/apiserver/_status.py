"""API errors and the ``Status`` bodies kube-apiserver answers them with.

Wording mirrors k8s.io/apimachinery/pkg/api/errors/errors.go.
"""

from __future__ import annotations

from typing import Any, TypedDict

from gpushift.common import Kind


class StatusDetails(TypedDict, total=False):
    """``metav1.StatusDetails``."""

    name: str
    group: str
    kind: str
    uid: str
    causes: list[dict[str, str]]
    retryAfterSeconds: int


class Status(TypedDict, total=False):
    """``metav1.Status`` as returned in an error response body."""

    kind: str
    apiVersion: str
    metadata: dict[str, Any]
    status: str
    message: str
    reason: str
    details: StatusDetails
    code: int


class ApiError(Exception):
    """A request the API refuses; ``status()`` is the body, ``code`` the HTTP status."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: StatusDetails | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> Status:
        """The ``Status`` object describing this error."""
        body: Status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def qualified(kind: Kind) -> str:
    """``schema.GroupResource.String()``: ``pods``, ``deployments.apps``."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def _details(kind: Kind, name: str) -> StatusDetails:
    details: StatusDetails = {"name": name, "kind": kind.plural}
    if kind.group:
        details["group"] = kind.group
    return details


def not_found(kind: Kind, name: str) -> ApiError:
    """404 NotFound: ``pods "x" not found``."""
    return ApiError(
        404, "NotFound", f'{qualified(kind)} "{name}" not found', details=_details(kind, name)
    )


def already_exists(kind: Kind, name: str) -> ApiError:
    """409 AlreadyExists: ``pods "x" already exists``."""
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(kind)} "{name}" already exists',
        details=_details(kind, name),
    )


def conflict(kind: Kind, name: str, why: str) -> ApiError:
    """409 Conflict: ``Operation cannot be fulfilled on pods "x": <why>``."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(kind)} "{name}": {why}',
        details=_details(kind, name),
    )


#: The reason optimistic concurrency gives (registry/generic/registry/store.go).
MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


_CAUSE_TYPES = {
    "Required value": "FieldValueRequired",
    "Invalid value": "FieldValueInvalid",
    "Forbidden": "FieldValueForbidden",
    "Unsupported value": "FieldValueNotSupported",
    "Duplicate value": "FieldValueDuplicate",
    "Too long": "FieldValueTooLong",
}


def invalid(kind: Kind, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid: ``Deployment.apps "x" is invalid: <field>: <type>: <detail>``.

    ``causes`` are ``(field, type, detail)`` triples, e.g. ``("metadata.name", "Required value",
    "name or generateName is required")``; an Invalid value's type carries the value
    (``'Invalid value: "Foo"'``).
    """
    return invalid_group_kind(kind.group, kind.kind, name, causes)


def invalid_group_kind(
    group: str, kind: str, name: str, causes: list[tuple[str, str, str]]
) -> ApiError:
    """:func:`invalid` for a kind the twin does not serve (``CreateOptions`` of
    ``meta.k8s.io``); an empty ``name`` is left out of the details, as upstream."""
    text = ", ".join(f"{f}: {t}: {d}" if d else f"{f}: {t}" for f, t, d in causes)
    if len(causes) > 1:
        text = "[" + text + "]"
    details: StatusDetails = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [
        {
            "reason": _CAUSE_TYPES.get(t.split(":")[0], "FieldValueInvalid"),
            "message": f"{t}: {d}" if d else t,
            "field": f,
        }
        for f, t, d in causes
    ]
    # schema.GroupKind.String(): the kind, then its group.
    group_kind = f"{kind}.{group}" if group else kind
    return ApiError(422, "Invalid", f'{group_kind} "{name}" is invalid: {text}', details=details)


def bad_request(message: str) -> ApiError:
    """400 BadRequest with the given message."""
    return ApiError(400, "BadRequest", message)


def method_not_allowed(method: str) -> ApiError:
    """405 MethodNotAllowed."""
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def gone(requested: int, oldest: int) -> ApiError:
    """410 Expired: a watch or list from a resourceVersion older than the history window."""
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


def unsupported_media_type(content_type: str) -> ApiError:
    """415 UnsupportedMediaType for a PATCH content type the resource cannot take."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        if content_type
        else "missing content type",
    )
