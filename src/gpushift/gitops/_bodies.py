"""Raw shapes of the Flux objects the reader interprets, as written in a repository.

Field names follow the upstream Go types; every field is optional here because a repository
may hold anything, and the reader checks each value's type before using it.
"""

from __future__ import annotations

from typing import Any, TypedDict


class DependencyReference(TypedDict, total=False):
    """fluxcd/pkg apis/meta ``DependencyReference``."""

    name: str
    namespace: str
    readyExpr: str


class NamespacedObjectKindReference(TypedDict, total=False):
    """fluxcd/pkg apis/meta ``NamespacedObjectKindReference`` (a health check)."""

    apiVersion: str
    kind: str
    name: str
    namespace: str


class SubstituteReference(TypedDict, total=False):
    """kustomize-controller api/v1 ``SubstituteReference``."""

    kind: str
    name: str
    optional: bool


class PostBuild(TypedDict, total=False):
    """kustomize-controller api/v1 ``PostBuild``."""

    substitute: dict[str, str]
    substituteFrom: list[SubstituteReference]


class KustomizationSpec(TypedDict, total=False):
    """kustomize-controller api/v1 ``KustomizationSpec`` (the fields gpushift reads)."""

    path: str
    dependsOn: list[DependencyReference]
    healthChecks: list[NamespacedObjectKindReference]
    force: bool
    prune: bool
    suspend: bool
    wait: bool
    targetNamespace: str
    postBuild: PostBuild
    components: list[str]
    patches: list[dict[str, Any]]


class ValuesReference(TypedDict, total=False):
    """fluxcd/pkg apis/meta ``ValuesReference``."""

    kind: str
    name: str
    valuesKey: str
    targetPath: str
    optional: bool


class HelmChartTemplateSpec(TypedDict, total=False):
    """helm-controller api/v2 ``HelmChartTemplateSpec`` (the fields gpushift reads)."""

    chart: str
    version: str


class HelmChartTemplate(TypedDict, total=False):
    """helm-controller api/v2 ``HelmChartTemplate``."""

    spec: HelmChartTemplateSpec


class CrossNamespaceSourceReference(TypedDict, total=False):
    """helm-controller api/v2 ``CrossNamespaceSourceReference`` (``chartRef``)."""

    apiVersion: str
    kind: str
    name: str
    namespace: str


class HelmReleaseSpec(TypedDict, total=False):
    """helm-controller api/v2 ``HelmReleaseSpec`` (the fields gpushift reads)."""

    chart: HelmChartTemplate
    chartRef: CrossNamespaceSourceReference
    releaseName: str
    targetNamespace: str
    suspend: bool
    values: dict[str, Any]
    valuesFrom: list[ValuesReference]
