"""The cluster twin: a Kubernetes API server that real clients (kubectl, lightkube) can use,
with a cluster's agents and Flux running on it.

Four rooms: ``apiserver`` (the store, watches, garbage collection, patches and apply, tables,
discovery, protobuf, auth and faults, served over HTTP), ``cluster`` (nodes, kubelets,
scheduler, controllers and GPU agents on a virtual clock), ``flux`` (source-, kustomize- and
helm-controller) and ``charts`` (the chart models helm-controller renders).

:func:`serve` runs a whole twin in the foreground from :class:`ServeOptions`;
:func:`run_twin` starts the API server on a background thread for tests and in-process
callers::

    with run_twin() as twin:          # twin.url, twin.token, twin.kubeconfig, twin.store
        subprocess.run(["kubectl", "--kubeconfig", twin.kubeconfig, "get", "nodes"])
"""

from __future__ import annotations

from gpushift.twin._export import export
from gpushift.twin._guard import require_twin
from gpushift.twin._serve import ServeOptions, serve
from gpushift.twin.apiserver import (
    DEFAULT_KUBERNETES_VERSION,
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
    parse_kubernetes_version,
    run_twin,
    save,
    self_signed,
    serve_forever,
    write_kubeconfig,
    write_list,
)

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "ApiError",
    "Certificate",
    "Event",
    "FaultConfig",
    "Faults",
    "Page",
    "ScalePaths",
    "ServeOptions",
    "Status",
    "Store",
    "Twin",
    "TwinServer",
    "Watcher",
    "as_list",
    "export",
    "kubeconfig",
    "load",
    "new_store",
    "new_token",
    "parse_kubernetes_version",
    "require_twin",
    "run_twin",
    "save",
    "self_signed",
    "serve",
    "serve_forever",
    "write_kubeconfig",
    "write_list",
]
