"""The upstream Kubernetes control plane, built from source by `make upstream`.

:class:`ControlPlane` runs etcd, kube-apiserver, kube-controller-manager and kube-scheduler on
loopback with generated certificates, installs gpushift's CustomResourceDefinitions and writes
an admin kubeconfig. It is what `gpushift twin serve --control-plane upstream` serves and what
`gpushift simulate --against upstream` holds the simulator to.
"""

from __future__ import annotations

from gpushift.upstream._controlplane import ALL_CONTROLLERS, ControlPlane, StartError
from gpushift.upstream._paths import BINARIES, CACHE_ENV, VERSION, NotBuiltError, bin_dir
from gpushift.upstream._pki import ADMIN_GROUP, ADMIN_USER
from gpushift.upstream._serve import serve_bare

__all__ = [
    "ADMIN_GROUP",
    "ADMIN_USER",
    "ALL_CONTROLLERS",
    "BINARIES",
    "CACHE_ENV",
    "VERSION",
    "ControlPlane",
    "NotBuiltError",
    "StartError",
    "bin_dir",
    "serve_bare",
]
