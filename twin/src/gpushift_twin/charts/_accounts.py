"""The ServiceAccounts chart workloads run as."""

from __future__ import annotations

from gpushift.common import Obj


def service_accounts(objects: list[Obj], *, namespace: str) -> list[Obj]:
    """The ServiceAccounts the workloads in ``objects`` run as and that ``objects`` lack, as
    the NVIDIA charts and the GPU Operator create them beside their workloads (a real API
    server refuses pods whose ServiceAccount does not exist)."""
    have = {
        (str(o["metadata"].get("namespace") or namespace), str(o["metadata"]["name"]))
        for o in objects
        if o.get("kind") == "ServiceAccount"
    }
    out: list[Obj] = []
    for obj in objects:
        if obj.get("kind") not in ("Deployment", "DaemonSet", "StatefulSet", "Job"):
            continue
        pod = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
        name = pod.get("serviceAccountName")
        ns = str(obj["metadata"].get("namespace") or namespace)
        if not name or name == "default" or (ns, str(name)) in have:
            continue
        have.add((ns, str(name)))
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": str(name), "namespace": ns},
            }
        )
    return out
