"""Whether a kind is namespaced, as the API server that serves it says.

kustomize does not know the scope of custom kinds: its namespace transformer sets
``metadata.namespace`` on every kind it does not know, and the API server drops it for a
cluster-scoped one. So what an object is on the cluster (``namespace/name`` or ``name``)
needs the scope of its kind: the kinds table, then the custom kinds the repository itself
defines (a ``CustomResourceDefinition``'s ``spec.scope``), then the cluster-scoped kinds of
the charts home clusters install (their CRDs are in the charts, not in the repository).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift._kinds import KINDS, lookup

#: Cluster-scoped kinds of widely installed charts, by kind name (their CRDs' ``scope:
#: Cluster``): Kubernetes built-ins the kinds table does not serve, cert-manager,
#: external-secrets, Cilium, Gateway API, NFD, Kyverno, Longhorn-free storage classes.
_CLUSTER_KINDS = frozenset(k.kind for k in KINDS if not k.namespaced) | {
    "PersistentVolume",
    "StorageClass",
    "ClusterIssuer",
    "NodeFeatureRule",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "CSIDriver",
    "VolumeSnapshotClass",
    "IngressClass",
    "GatewayClass",
    "ClusterSecretStore",
    "ClusterExternalSecret",
    "ClusterGenerator",
    "ClusterPushSecret",
    "CiliumClusterwideNetworkPolicy",
    "CiliumClusterwideEnvoyConfig",
    "CiliumLoadBalancerIPPool",
    "CiliumL2AnnouncementPolicy",
    "CiliumBGPClusterConfig",
    "CiliumBGPPeerConfig",
    "CiliumBGPAdvertisement",
    "CiliumBGPNodeConfigOverride",
    "CiliumBGPPeeringPolicy",
    "CiliumNodeConfig",
    "ClusterPolicy",
    "ClusterPolicyException",
}


def crd_scopes(bodies: Any) -> dict[tuple[str, str], bool]:
    """``(group, kind) -> namespaced`` of the CustomResourceDefinitions among ``bodies``."""
    out: dict[tuple[str, str], bool] = {}
    for body in bodies:
        if not isinstance(body, Mapping) or body.get("kind") != "CustomResourceDefinition":
            continue
        spec = body.get("spec")
        if not isinstance(spec, Mapping):
            continue
        names = spec.get("names")
        kind = names.get("kind") if isinstance(names, Mapping) else None
        if isinstance(kind, str) and isinstance(spec.get("group"), str):
            out[(spec["group"], kind)] = spec.get("scope") != "Cluster"
    return out


def namespaced(
    api_version: str, kind: str, *, crds: Mapping[tuple[str, str], bool] | None = None
) -> bool:
    """Whether objects of ``kind`` live in a namespace: the kinds table's answer, else the
    repository's own CRD (``crds`` from ``crd_scopes``), else whether it is one of the
    well-known cluster-scoped kinds. Unknown kinds are namespaced (kustomize's assumption,
    and the usual scope of a custom resource)."""
    known = lookup(api_version, kind)
    if known is not None:
        return known.namespaced
    if crds:
        group = api_version.rpartition("/")[0]
        found = crds.get((group, kind))
        if found is not None:
            return found
    return kind not in _CLUSTER_KINDS
