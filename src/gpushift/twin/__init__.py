"""The cluster twin: a Kubernetes API server that real clients (kubectl, lightkube) can use.

The :class:`Store` holds the cluster's objects and notifies watchers; the HTTP layer serves it;
:func:`run_twin` starts both on a background thread for tests and in-process callers::

    with run_twin() as twin:          # twin.url, twin.token, twin.kubeconfig, twin.store
        subprocess.run(["kubectl", "--kubeconfig", twin.kubeconfig, "get", "nodes"])
"""

from __future__ import annotations

from gpushift.twin.apiserver import (
    ApiError,
    Certificate,
    Event,
    FaultConfig,
    Faults,
    Page,
    ScalePaths,
    Status,
    Store,
    Twin,
    TwinServer,
    Watcher,
    as_list,
    kubeconfig,
    load,
    new_store,
    new_token,
    run_twin,
    save,
    self_signed,
    serve_forever,
    write_kubeconfig,
)

__all__ = [
    "ApiError",
    "Certificate",
    "Event",
    "FaultConfig",
    "Faults",
    "Page",
    "ScalePaths",
    "Status",
    "Store",
    "Twin",
    "TwinServer",
    "Watcher",
    "as_list",
    "kubeconfig",
    "load",
    "new_store",
    "new_token",
    "run_twin",
    "save",
    "self_signed",
    "serve_forever",
    "write_kubeconfig",
]
