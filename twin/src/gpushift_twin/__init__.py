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

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: a command that
# needs one room does not import the others (docs/decisions.md, lazy packages).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
