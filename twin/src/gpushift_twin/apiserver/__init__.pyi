"""Type stub of gpushift_twin.apiserver: its public names, which __init__.py loads on first use."""

from ._auth import (
    Certificate,
    check_bearer,
    kubeconfig,
    new_token,
    self_signed,
    write_kubeconfig,
)
from ._discovery import (
    DEFAULT_KUBERNETES_VERSION,
    TWIN_MARKER,
    TWIN_MARKER_PATH,
    parse_kubernetes_version,
)
from ._faults import FaultConfig, Faults
from ._names import name_errors
from ._ops import server_side_apply
from ._podlog import serve_pod_log
from ._proxy import (
    FaultProxy,
    ProxyTarget,
    RunningProxy,
    check_loopback,
    describe_error,
    run_proxy,
    target_from_kubeconfig,
)
from ._remote import ApiStore
from ._runner import (
    Twin,
    new_store,
    run_twin,
    serve_forever,
    start,
    url_for,
)
from ._selectors import (
    compile_fields,
    match_labels,
    parse_fields,
    parse_labels,
    selector_string,
)
from ._server import TwinServer
from ._state import as_list, load, save, write_list
from ._status import ApiError, Status
from ._store import Page, ScalePaths, Store, rfc3339
from ._tables import (
    human_duration,
    printer_columns,
    to_table,
)
from ._watch import Event, Watcher

__all__ = [
    "DEFAULT_KUBERNETES_VERSION",
    "TWIN_MARKER",
    "TWIN_MARKER_PATH",
    "ApiError",
    "ApiStore",
    "Certificate",
    "Event",
    "FaultConfig",
    "FaultProxy",
    "Faults",
    "Page",
    "ProxyTarget",
    "RunningProxy",
    "ScalePaths",
    "Status",
    "Store",
    "Twin",
    "TwinServer",
    "Watcher",
    "as_list",
    "check_bearer",
    "check_loopback",
    "compile_fields",
    "describe_error",
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
    "run_proxy",
    "run_twin",
    "save",
    "selector_string",
    "self_signed",
    "serve_forever",
    "serve_pod_log",
    "server_side_apply",
    "start",
    "target_from_kubeconfig",
    "to_table",
    "url_for",
    "write_kubeconfig",
    "write_list",
]
