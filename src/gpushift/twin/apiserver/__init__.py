"""The twin's Kubernetes API server: the object store with watches, garbage collection,
patches and server-side apply, discovery and OpenAPI, table printing, protobuf, bearer-token
auth and injected faults, served over HTTP.

:func:`run_twin` starts it on a background thread for tests and in-process callers::

    with run_twin() as twin:          # twin.url, twin.token, twin.kubeconfig, twin.store
        subprocess.run(["kubectl", "--kubeconfig", twin.kubeconfig, "get", "nodes"])
"""

from __future__ import annotations

from gpushift.twin.apiserver._auth import (
    Certificate,
    check_bearer,
    kubeconfig,
    new_token,
    self_signed,
    write_kubeconfig,
)
from gpushift.twin.apiserver._faults import FaultConfig, Faults
from gpushift.twin.apiserver._ops import server_side_apply
from gpushift.twin.apiserver._runner import Twin, new_store, run_twin, serve_forever, url_for
from gpushift.twin.apiserver._server import TwinServer
from gpushift.twin.apiserver._state import as_list, load, save, write_list
from gpushift.twin.apiserver._status import ApiError, Status
from gpushift.twin.apiserver._store import Event, Page, ScalePaths, Store, Watcher, rfc3339

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
    "check_bearer",
    "kubeconfig",
    "load",
    "new_store",
    "new_token",
    "rfc3339",
    "run_twin",
    "save",
    "self_signed",
    "serve_forever",
    "server_side_apply",
    "url_for",
    "write_kubeconfig",
    "write_list",
]
