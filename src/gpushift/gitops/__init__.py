"""The GitOps repository model: what a Flux or Argo CD repository deploys, for GPUs.

``load_repo(paths)`` reads a repository into a ``Repo``; ``summarize(repo)`` gives its GPU
summary. Chart knowledge (outcome-changing defaults, known top-level values keys) is in
``chart_defaults`` and ``known_values_keys``.
"""

from __future__ import annotations

from gpushift.flux import YamlError
from gpushift.gitops._charts import (
    GPU_OPERATOR_POLICY_KEYS,
    chart_defaults,
    chart_identity,
    known_values_keys,
)
from gpushift.gitops._load import load_repo
from gpushift.gitops._model import (
    GPU_RESOURCE,
    ActiveAllocators,
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
    Manifest,
    ModelPool,
    ModelPoolMember,
    PodClaim,
    PodSpec,
    Repo,
    RequestKind,
    RuntimeClass,
    SharingSummary,
    SharingSummaryMode,
    Source,
    Summary,
    TalosEvidence,
    TimeSlicingConfig,
    TimeSlicingForm,
    TimeSlicingResource,
    UnexpandedGenerator,
    ValueLayer,
    ValuesRef,
    Workload,
    WorkloadOrigin,
)
from gpushift.gitops._pods import CHART_POD_FIELDS, LLMKUBE_VENDOR_RESOURCES
from gpushift.gitops._summary import NVIDIA_PREFIX, summarize, truthy
from gpushift.gitops._timeslicing import parse_config as parse_time_slicing_config

__all__ = [
    "CHART_POD_FIELDS",
    "GPU_OPERATOR_POLICY_KEYS",
    "GPU_RESOURCE",
    "LLMKUBE_VENDOR_RESOURCES",
    "NVIDIA_PREFIX",
    "ActiveAllocators",
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
    "Manifest",
    "ModelPool",
    "ModelPoolMember",
    "PodClaim",
    "PodSpec",
    "Repo",
    "RequestKind",
    "RuntimeClass",
    "SharingSummary",
    "SharingSummaryMode",
    "Source",
    "Summary",
    "TalosEvidence",
    "TimeSlicingConfig",
    "TimeSlicingForm",
    "TimeSlicingResource",
    "UnexpandedGenerator",
    "ValueLayer",
    "ValuesRef",
    "Workload",
    "WorkloadOrigin",
    "YamlError",
    "chart_defaults",
    "chart_identity",
    "known_values_keys",
    "load_repo",
    "parse_time_slicing_config",
    "summarize",
    "truthy",
]
