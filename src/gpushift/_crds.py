"""CustomResourceDefinitions for the custom kinds of the kind table: Flux, llmkube, the GPU
Operator's ClusterPolicy and GPUCluster, and prometheus-operator's ServiceMonitor.

The twin installs them at start, and so does the upstream control plane
(`gpushift.upstream`): gpushift writes them itself, with an open schema and the printer
columns the upstream CRDs declare, rather than taking the projects' own files.
"""

from __future__ import annotations

from gpushift._kinds import FLUX_VERSION, KINDS, Kind

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
    "GPUCluster": [{"name": "Status", "type": "string", "jsonPath": ".status.state"}, _AGE],
}


def _version(kind: Kind, name: str) -> dict[str, object]:
    version: dict[str, object] = {
        "name": name,
        "served": True,
        "storage": name == kind.version,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if name != kind.version:
        # kubebuilder's +kubebuilder:deprecatedversion on each older Flux API version.
        version["deprecated"] = True
        version["deprecationWarning"] = (
            f"{name} {kind.kind} is deprecated, upgrade to {kind.version}"
        )
    if kind.subresources:
        version["subresources"] = {s: {} for s in kind.subresources}
    if kind.kind in _COLUMNS:
        version["additionalPrinterColumns"] = _COLUMNS[kind.kind]
    return version


def crd(kind: Kind, *, flux: str = FLUX_VERSION) -> dict[str, object]:
    """A v1 CRD serving ``kind`` with an open schema (fields are the controllers' to check).

    A Flux kind's CRD also serves the older versions Flux release ``flux`` still serves, as
    upstream's do: ``served: true``, ``storage: false``, no conversion webhook (the
    ``None`` strategy: an object reads the same at every version but its ``apiVersion``).
    """
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
            "versions": [_version(kind, v) for v in kind.served_versions(flux=flux)],
        },
    }


def custom_crds(*, flux: str = FLUX_VERSION) -> list[dict[str, object]]:
    """A CRD for every kind of the table that is not built in, in table order, with the
    versions Flux release ``flux`` serves."""
    return [crd(kind, flux=flux) for kind in KINDS if not kind.builtin]
