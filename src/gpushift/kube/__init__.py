"""gpushift's client for live clusters (and the twin): verbs over a frozen :class:`ResourceRef`.

Built on lightkube; objects are plain dicts; 429/5xx are retried with backoff; every change
made to a cluster is logged on the ``gpushift.kube`` logger.
"""

from __future__ import annotations

from gpushift.kube._client import (
    NOT_KUBERNETES,
    RETRYABLE,
    UNREACHABLE,
    Kube,
    KubeError,
    PatchKind,
    Propagation,
    ResourceRef,
    connect,
    export_all,
)
from gpushift.kube._config import Access, kubeconfig_paths, merge_kubeconfigs

__all__ = [
    "NOT_KUBERNETES",
    "RETRYABLE",
    "UNREACHABLE",
    "Access",
    "Kube",
    "KubeError",
    "PatchKind",
    "Propagation",
    "ResourceRef",
    "connect",
    "export_all",
    "kubeconfig_paths",
    "merge_kubeconfigs",
]
