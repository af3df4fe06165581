"""The GitOps repository model: what a Flux repository deploys, for GPUs.

``load_repo(paths)`` reads a repository into a ``Repo``; ``summarize(repo)`` gives its GPU
summary. Chart knowledge (outcome-changing defaults, known top-level values keys) is in
``chart_defaults`` and ``known_values_keys``.
"""

from __future__ import annotations

from gpushift.gitops._charts import chart_defaults, chart_identity, known_values_keys
from gpushift.gitops._load import load_repo
from gpushift.gitops._model import (
    GPU_RESOURCE,
    Allocator,
    ChartId,
    Claim,
    Consumer,
    Container,
    DependsOn,
    DeviceClass,
    DevicePluginConfig,
    DeviceRequest,
    FluxKustomization,
    HealthCheck,
    HelmRelease,
    KsRef,
    Obj,
    PodClaim,
    PodSpec,
    Repo,
    RequestKind,
    RuntimeClass,
    Sharing,
    SharingMode,
    Source,
    Summary,
    TalosEvidence,
    TimeSlicingConfig,
    TimeSlicingForm,
    TimeSlicingResource,
    ValueLayer,
    ValuesRef,
    Workload,
    WorkloadOrigin,
    YamlError,
)
from gpushift.gitops._summary import summarize

__all__ = [
    "GPU_RESOURCE",
    "Allocator",
    "ChartId",
    "Claim",
    "Consumer",
    "Container",
    "DependsOn",
    "DeviceClass",
    "DevicePluginConfig",
    "DeviceRequest",
    "FluxKustomization",
    "HealthCheck",
    "HelmRelease",
    "KsRef",
    "Obj",
    "PodClaim",
    "PodSpec",
    "Repo",
    "RequestKind",
    "RuntimeClass",
    "Sharing",
    "SharingMode",
    "Source",
    "Summary",
    "TalosEvidence",
    "TimeSlicingConfig",
    "TimeSlicingForm",
    "TimeSlicingResource",
    "ValueLayer",
    "ValuesRef",
    "Workload",
    "WorkloadOrigin",
    "YamlError",
    "chart_defaults",
    "chart_identity",
    "known_values_keys",
    "load_repo",
    "summarize",
]
