"""Where `make upstream` puts the control plane's binaries, and whether they are there."""

from __future__ import annotations

import os
from pathlib import Path

#: The k8s.io/kubernetes version upstream/go.mod requires; tests hold the two equal.
VERSION = "v1.37.2"
#: The programs `make upstream` builds into the bin directory.
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
#: Overrides the cache root ``~/.cache/gpushift/upstream``; versions stay in subdirectories.
CACHE_ENV = "GPUSHIFT_UPSTREAM"


class NotBuiltError(Exception):
    """The binaries are not in the bin directory; the message names `make upstream`."""


def bin_dir(version: str = VERSION) -> Path:
    """``${GPUSHIFT_UPSTREAM:-~/.cache/gpushift/upstream}/<version>/bin``, as upstream/build.py
    installs it."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "gpushift" / "upstream"
    return root / version / "bin"


def require_binaries(directory: Path | None = None) -> Path:
    """The bin directory, when every binary is there and executable.

    Raises:
        NotBuiltError: one or more are missing.
    """
    where = directory if directory is not None else bin_dir()
    missing = [b for b in BINARIES if not os.access(where / b, os.X_OK)]
    if missing:
        raise NotBuiltError(
            f"the upstream control plane {VERSION} is not built (no {', '.join(missing)} in "
            f"{where}): run `make upstream`"
        )
    return where
