"""Field ownership: server-side apply and ``metadata.managedFields`` bookkeeping.

Mirrors sigs.k8s.io/structured-merge-diff (merge.Updater: Apply, Update, prune) and the
kube-apiserver field managers around it (strip of identity fields, entry order, time
stamps). Field sets are written in the FieldsV1 format with ``f:``/``k:``/``v:``/``i:``
keys and ``.`` for a node owned in itself, exactly as Kubernetes writes them.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from gpushift._kinds import Kind

__all__ = [
    "ApplyConflict",
    "Conflict",
    "ManagedFieldsEntry",
    "server_side_apply",
    "update_managed_fields",
]


class ManagedFieldsEntry(TypedDict):
    """One ``metadata.managedFields`` item (meta/v1 ManagedFieldsEntry)."""

    manager: str
    operation: str
    apiVersion: str
    time: NotRequired[str]
    fieldsType: str
    fieldsV1: dict[str, Any]
    subresource: NotRequired[str]


class Conflict(TypedDict):
    """One apply conflict: who owns the field, and the field's path (``.spec.replicas``)."""

    manager: str
    field: str


class ApplyConflict(Exception):  # noqa: N818 - the name the twin's API uses
    """An apply that would change fields another manager owns (HTTP 409, reason Conflict).

    ``conflicts`` lists them; ``message`` is upstream's Status message
    (``Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using
    apps/v1: .spec.replicas``); ``causes`` are the Status details causes.
    """

    code = 409

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        self.message = ""
        super().__init__(self.message)

    @property
    def causes(self) -> list[dict[str, str]]:
        """Status ``details.causes``: one ``FieldManagerConflict`` per conflict."""
        return [
            {
                "type": "FieldManagerConflict",
                "message": f"conflict with {c['manager']}",
                "field": c["field"],
            }
            for c in self.conflicts
        ]


def server_side_apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any],
    *,
    manager: str,
    force: bool,
    kind: Kind,
    now: str,
) -> dict[str, Any]:
    """Apply ``applied`` (an apply configuration) to ``live`` (None when creating).

    Returns the new object with ``metadata.managedFields`` updated: ``manager`` owns exactly
    the fields of ``applied`` (an ``Apply`` entry stamped ``now``); fields it applied last
    time and no longer applies are removed unless another manager owns them. Raises
    ``ApplyConflict`` when another manager owns a field ``applied`` would change, unless
    ``force`` is true, in which case ``manager`` takes the field over.
    """
    raise NotImplementedError


def update_managed_fields(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    operation: str,
    now: str,
    subresource: str | None = None,
) -> dict[str, Any]:
    """Record an ``Update`` (or ``Patch``-made update) of ``old`` into ``new`` by ``manager``.

    Returns a copy of ``new`` whose ``metadata.managedFields`` gives ``manager`` the fields
    it added or changed and takes them, and fields it removed, from every other manager.
    Managed fields set explicitly in ``new`` are kept as sent; an empty list resets them.
    """
    raise NotImplementedError
