"""Reading a running cluster twin's violation record through a kubeconfig."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from gpushift.common import InputError
from gpushift.kube import Kube


def _kubeconfig(path: Path) -> tuple[str, str | None, bytes | None]:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read kubeconfig: {err}", path=str(path)) from None
    except yaml.YAMLError as err:
        raise InputError(f"not YAML: {err}", path=str(path)) from None
    if not isinstance(doc, dict):
        raise InputError("not a kubeconfig", path=str(path))
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []}
    ctx = contexts.get(doc.get("current-context")) or next(iter(contexts.values()), {})
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or []}
    users = {u.get("name"): u.get("user") or {} for u in doc.get("users") or []}
    cluster = clusters.get(ctx.get("cluster")) or {}
    user = users.get(ctx.get("user")) or {}
    server = cluster.get("server")
    if not server:
        raise InputError("the current context names no cluster server", path=str(path))
    ca = cluster.get("certificate-authority-data")
    return str(server), user.get("token"), base64.b64decode(ca) if ca else None


def fetch_violations(kubeconfig: Path | Kube) -> dict[str, Any]:
    """The twin's ``/twin/v1/violations`` record, through a connected client or a kubeconfig.

    Raises:
        InputError: the kubeconfig cannot be read or names no server.
        OSError: the twin cannot be reached (URLError is an OSError).
        KubeError: the client's request failed.
    """
    if isinstance(kubeconfig, Kube):
        return kubeconfig.get_path("/twin/v1/violations")
    server, token, ca = _kubeconfig(kubeconfig)
    context = ssl.create_default_context(cadata=ca.decode()) if ca else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(server.rstrip("/") + "/twin/v1/violations", headers=headers)
    with urllib.request.urlopen(req, context=context, timeout=10) as resp:
        out: dict[str, Any] = json.loads(resp.read())
    return out
