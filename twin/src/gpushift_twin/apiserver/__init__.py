"""The twin's Kubernetes API server: the object store with watches, garbage collection,
patches and server-side apply, discovery and OpenAPI, table printing, protobuf, bearer-token
auth and injected faults, served over HTTP. The selector and table functions are public
for the rooms that print or match as the API does.

:func:`run_twin` starts it on a background thread for tests and in-process callers::

    with run_twin() as twin:          # twin.url, twin.token, twin.kubeconfig, twin.store
        subprocess.run(["kubectl", "--kubeconfig", twin.kubeconfig, "get", "nodes"])
"""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: a command that
# needs one room does not import the others (docs/decisions.md, lazy packages).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
