"""What a Secret in the repository gives kustomize-controller to substitute.

A SOPS-encrypted Secret (a top-level ``sops`` block) is decrypted by kustomize-controller
with a key that is not in the repository, so its values cannot be known offline. Both check
and the twin read every value of such a Secret as ``ENCRYPTED_VALUE``: a name built from one
(``${SECRET_DOMAIN/./-}-production``) is the same object on both sides, and a valid name.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

#: Every value of a SOPS-encrypted Secret, as read offline.
ENCRYPTED_VALUE = "sops-encrypted"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def is_sops_encrypted(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` is a SOPS-encrypted Secret (kustomize-controller decrypts it)."""
    return body.get("kind") == "Secret" and isinstance(body.get("sops"), dict)


def secret_values(body: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's values as text: ``data`` base64-decoded (undecodable values as written),
    ``stringData`` over it, as the API server folds it; every value ``ENCRYPTED_VALUE`` when
    the Secret is SOPS-encrypted."""
    out: dict[str, str] = {}
    for k, v in _dict(body.get("data")).items():
        try:
            out[str(k)] = base64.b64decode(str(v), validate=False).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            out[str(k)] = str(v)
    for k, v in _dict(body.get("stringData")).items():
        out[str(k)] = "" if v is None else str(v)
    if is_sops_encrypted(body):
        return dict.fromkeys(out, ENCRYPTED_VALUE)
    return out
