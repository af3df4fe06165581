"""Secrets the twin cannot have: made with placeholder data, so what mounts them starts.

* An ExternalSecret (external-secrets.io) makes its target Secret: ``spec.target.name``
  (default: the ExternalSecret's name), of ``spec.target.template.type`` (default Opaque),
  with a key per ``spec.data[].secretKey`` and per ``spec.target.template.data`` key. Keys
  that ``dataFrom`` would fetch cannot be known; the Secret has only the others.
* A SOPS-encrypted Secret (a top-level ``sops`` block) is what kustomize-controller's
  decryption would apply: the same keys, without the ``sops`` block.

Every value is ``PLACEHOLDER``; the annotation ``PLACEHOLDER_ANNOTATION`` names the source.
Pure: objects in, objects out.
"""

from __future__ import annotations

import base64
import copy

from gpushift.common import Obj

PLACEHOLDER = "twin-placeholder"
PLACEHOLDER_ANNOTATION = "twin.gpushift.io/placeholder"
_VALUE = base64.b64encode(PLACEHOLDER.encode()).decode()


def _is_external_secret(obj: Obj) -> bool:
    return obj.get("kind") == "ExternalSecret" and str(obj.get("apiVersion", "")).startswith(
        "external-secrets.io/"
    )


def _secret_id(obj: Obj) -> tuple[str | None, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace"), str(meta.get("name"))


def from_external_secret(es: Obj) -> Obj:
    """The Secret ``es`` would make, with placeholder values."""
    meta = es.get("metadata") or {}
    spec = es.get("spec") or {}
    target = spec.get("target") or {}
    template = target.get("template") or {}
    keys = [
        str(d["secretKey"])
        for d in spec.get("data") or []
        if isinstance(d, dict) and d.get("secretKey")
    ]
    keys += [str(k) for k in (template.get("data") or {})]
    out_meta: Obj = {
        "name": str(target.get("name") or meta.get("name")),
        "annotations": {
            **((template.get("metadata") or {}).get("annotations") or {}),
            PLACEHOLDER_ANNOTATION: "/".join(
                str(p) for p in ("ExternalSecret", meta.get("namespace"), meta.get("name")) if p
            ),
        },
    }
    labels = (template.get("metadata") or {}).get("labels") or {}
    if labels:
        out_meta["labels"] = dict(labels)
    if meta.get("namespace"):
        out_meta["namespace"] = meta["namespace"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": out_meta,
        "type": str(template.get("type") or "Opaque"),
        "data": {k: _VALUE for k in dict.fromkeys(keys)},
    }


def decrypted(secret: Obj) -> Obj:
    """A SOPS-encrypted Secret as decryption would apply it, with placeholder values."""
    out = copy.deepcopy(secret)
    out.pop("sops", None)
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        PLACEHOLDER_ANNOTATION: "sops",
    }
    keys = [*(out.get("data") or {}), *(out.pop("stringData", None) or {})]
    out["data"] = {str(k): _VALUE for k in dict.fromkeys(keys)}
    return out


def with_placeholders(objects: list[Obj]) -> list[Obj]:
    """``objects`` with SOPS Secrets replaced and the Secrets of ExternalSecrets added
    (unless the build defines a Secret of that name itself)."""
    out: list[Obj] = []
    secrets = {
        _secret_id(o) for o in objects if o.get("kind") == "Secret" and o.get("apiVersion") == "v1"
    }
    for obj in objects:
        if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1" and "sops" in obj:
            out.append(decrypted(obj))
            continue
        out.append(obj)
        if _is_external_secret(obj):
            made = from_external_secret(obj)
            if _secret_id(made) not in secrets:
                secrets.add(_secret_id(made))
                out.append(made)
    return out
