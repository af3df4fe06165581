"""Raw bodies of the Flux and kustomize objects the renderer writes.

Field names and nesting are upstream's: Flux source-controller ``OCIRepository``
(source.toolkit.fluxcd.io/v1), helm-controller ``HelmRelease`` (helm.toolkit.fluxcd.io/v2),
kustomize-controller ``Kustomization`` (kustomize.toolkit.fluxcd.io/v1) and the kustomize
``kustomization.yaml``. Values that carry a why-comment are ``Note`` wrappers, hence ``Any``.
"""

from __future__ import annotations

from typing import Any, TypedDict


class ObjectMeta(TypedDict, total=False):
    """The part of ObjectMeta the renderer sets."""

    name: str
    namespace: str
    labels: dict[str, str]
    annotations: Any


class LayerSelector(TypedDict):
    """OCIRepository ``spec.layerSelector``."""

    mediaType: str
    operation: str


class OCIRepositoryRef(TypedDict, total=False):
    """OCIRepository ``spec.ref``."""

    tag: str
    semver: str
    digest: str


class OCIRepositorySpec(TypedDict):
    """OCIRepository ``spec`` as rendered."""

    interval: str
    layerSelector: LayerSelector
    url: str
    ref: OCIRepositoryRef


class OCIRepository(TypedDict):
    """source.toolkit.fluxcd.io/v1 OCIRepository."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: OCIRepositorySpec


class ChartRef(TypedDict):
    """HelmRelease ``spec.chartRef``."""

    kind: str
    name: str


class HelmReleaseSpec(TypedDict, total=False):
    """HelmRelease ``spec`` as rendered."""

    interval: str
    timeout: str
    chartRef: ChartRef
    install: dict[str, Any]
    upgrade: dict[str, Any]
    values: dict[str, Any]


class HelmRelease(TypedDict):
    """helm.toolkit.fluxcd.io/v2 HelmRelease."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: HelmReleaseSpec


class CrossNamespaceSourceReference(TypedDict):
    """Kustomization ``spec.sourceRef``."""

    kind: str
    name: str
    namespace: str


class FluxKustomizationSpec(TypedDict, total=False):
    """Kustomization ``spec`` as rendered (``dependsOn``, ``healthChecks``, ``force`` may carry
    a Note)."""

    targetNamespace: str
    commonMetadata: dict[str, Any]
    dependsOn: Any
    path: str
    prune: bool
    retryInterval: str
    sourceRef: CrossNamespaceSourceReference
    wait: bool
    interval: str
    timeout: str
    force: Any
    healthChecks: Any


class FluxKustomization(TypedDict):
    """kustomize.toolkit.fluxcd.io/v1 Kustomization (a ``ks.yaml``)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: FluxKustomizationSpec


class KustomizeFile(TypedDict, total=False):
    """A kustomize ``kustomization.yaml`` (kustomize.config.k8s.io/v1beta1)."""

    apiVersion: str
    kind: str
    namespace: str
    resources: list[str]
