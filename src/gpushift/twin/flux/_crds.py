"""The CustomResourceDefinitions the twin serves from the start: Flux, llmkube, the GPU
Operator's ClusterPolicy and prometheus-operator's ServiceMonitor."""

from __future__ import annotations

from gpushift._kinds import KINDS, Kind
from gpushift.twin.apiserver import ApiError, Store

_READY = '.status.conditions[?(@.type=="Ready")]'
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_STATE = [
    {"name": "Ready", "type": "string", "jsonPath": f"{_READY}.status"},
    {"name": "Status", "type": "string", "jsonPath": f"{_READY}.message"},
]
_URL = {"name": "URL", "type": "string", "jsonPath": ".spec.url"}
# The columns the upstream CRDs declare (fluxcd/*-controller config/crd/bases, gpu-operator
# bundle), so `kubectl get ks,hr,gitrepo -A` reads as on a cluster.
_COLUMNS: dict[str, list[dict[str, str]]] = {
    "Kustomization": [_AGE, *_STATE],
    "HelmRelease": [_AGE, *_STATE],
    "GitRepository": [_URL, _AGE, *_STATE],
    "OCIRepository": [_URL, *_STATE, _AGE],
    "HelmRepository": [_URL, _AGE, *_STATE],
    "ClusterPolicy": [{"name": "Status", "type": "string", "jsonPath": ".status.state"}, _AGE],
}


def crd(kind: Kind) -> dict[str, object]:
    """A v1 CRD serving ``kind`` with an open schema (fields are the controllers' to check)."""
    version: dict[str, object] = {
        "name": kind.version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if kind.subresources:
        version["subresources"] = {s: {} for s in kind.subresources}
    if kind.kind in _COLUMNS:
        version["additionalPrinterColumns"] = _COLUMNS[kind.kind]
    names: dict[str, object] = {
        "kind": kind.kind,
        "listKind": f"{kind.kind}List",
        "plural": kind.plural,
        "singular": kind.singular_name,
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    if kind.categories:
        names["categories"] = list(kind.categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{kind.group}"},
        "spec": {
            "group": kind.group,
            "names": names,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [version],
        },
    }


def install_crds(store: Store) -> list[str]:
    """Create every CRD of the kind table that the store does not hold yet; returns their names."""
    crd_kind = store.kind_for("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    made: list[str] = []
    for kind in KINDS:
        if kind.builtin:
            continue
        body = crd(kind)
        try:
            store.create(crd_kind, body, manager="gpushift-twin")
        except ApiError as err:
            if err.code != 409:
                raise
            continue
        made.append(str(body["metadata"]["name"]))  # type: ignore[index]
    return made
