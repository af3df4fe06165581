"""Server-side printing: the ``meta.k8s.io/v1`` Table that ``kubectl get`` asks for.

Columns and cells follow k8s.io/kubernetes pkg/printers/internalversion/printers.go for
built-in kinds, and apiextensions-apiserver's table convertor (``additionalPrinterColumns``)
for custom resources.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpushift._kinds import Kind

__all__ = ["human_duration", "printer_columns", "to_table"]


def human_duration(seconds: float) -> str:
    """A duration the way kubectl prints ages (apimachinery ``duration.HumanDuration``).

    Returns e.g. ``"5s"``, ``"3m2s"``, ``"5h"``, ``"2d"``; ``"<invalid>"`` below -1 s.
    """
    raise NotImplementedError


def printer_columns(crd: dict[str, Any], version: str) -> list[dict[str, Any]]:
    """The ``additionalPrinterColumns`` a CRD declares for ``version``.

    Returns upstream's default (one ``Age`` date column) when the version declares none,
    and an empty list when the CRD does not serve ``version``.
    """
    raise NotImplementedError


def to_table(
    kind: Kind,
    objects: list[dict[str, Any]],
    *,
    now: datetime,
    include_object: str = "Metadata",
    columns: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The Table for ``objects`` of ``kind``.

    ``include_object`` is the ``includeObject`` parameter: ``Metadata`` puts a
    PartialObjectMetadata in each row, ``Object`` the object, ``None`` nothing. ``columns``
    are a custom resource's printer columns (see ``printer_columns``). Returns the Table body
    with empty ``metadata`` for the caller to fill (resourceVersion, continue).
    """
    raise NotImplementedError
