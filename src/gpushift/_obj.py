"""Raw Kubernetes API bodies: the one ``Obj`` alias, and reading nested fields of one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: A raw API body (an object, a list, a status) as JSON decodes it.
Obj = dict[str, Any]


def as_dict(value: Any) -> Obj:
    """``value`` as a new dict when it is a mapping, else an empty dict (an absent or null
    field of a body reads as empty)."""
    return dict(value) if isinstance(value, Mapping) else {}
