"""The twin's Kubernetes API server: the object store with watches, garbage collection,
patches and server-side apply, discovery and OpenAPI, table printing, protobuf, bearer-token
auth and injected faults, served over HTTP. The selector and table functions are public
for the rooms that print or match as the API does.

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
from gpushift.twin.apiserver._discovery import (
    DEFAULT_KUBERNETES_VERSION,
    TWIN_MARKER,
    TWIN_MARKER_PATH,
    parse_kubernetes_version,
)
from gpushift.twin.apiserver._faults import FaultConfig, Faults
from gpushift.twin.apiserver._names import name_errors
from gpushift.twin.apiserver._ops import server_side_apply
from gpushift.twin.apiserver._runner import Twin, new_store, run_twin, serve_forever, url_for
from gpushift.twin.apiserver._selectors import (
    compile_fields,
    match_labels,
    parse_fields,
    parse_labels,
    selector_string,
)
from gpushift.twin.apiserver._server import TwinServer
from gpushift.twin.apiserver._state import as_list, load, save, write_list
from gpushift.twin.apiserver._status import ApiError, Status
from gpushift.twin.apiserver._store import Page, ScalePaths, Store, rfc3339
from gpushift.twin.apiserver._tables import human_duration, printer_columns, to_table
from gpushift.twin.apiserver._watch import Event, Watcher

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "TWIN_MARKER",
    "TWIN_MARKER_PATH",
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
    "compile_fields",
    "human_duration",
    "kubeconfig",
    "load",
    "match_labels",
    "name_errors",
    "new_store",
    "new_token",
    "parse_fields",
    "parse_kubernetes_version",
    "parse_labels",
    "printer_columns",
    "rfc3339",
    "run_twin",
    "save",
    "selector_string",
    "self_signed",
    "serve_forever",
    "server_side_apply",
    "to_table",
    "url_for",
    "write_kubeconfig",
    "write_list",
]
