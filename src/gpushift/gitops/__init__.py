"""The GitOps repository model: what a Flux or Argo CD repository deploys, for GPUs.

``load_repo(paths)`` reads a repository into a ``Repo``; ``summarize(repo)`` gives its GPU
summary. Chart knowledge (outcome-changing defaults, known top-level values keys) is in
``chart_defaults`` and ``known_values_keys``.
"""

from __future__ import annotations

from gpushift.gitops._charts import chart_defaults, chart_identity, known_values_keys

# The kustomize subset, tree reader and substitution the model uses, for Flux in the twin.
from gpushift.gitops._kustomize import KUSTOMIZATION_FILES
from gpushift.gitops._kustomize import Builder as KustomizeBuilder
from gpushift.gitops._kustomize import _apply as apply_patch
from gpushift.gitops._kustomize import _parse_patch as parse_patches
from gpushift.gitops._kustomize import _targets as patch_targets
from gpushift.gitops._load import _read_tree as read_tree
from gpushift.gitops._load import _set_path as value_at_target_path
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
    ModelPool,
    ModelPoolMember,
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
from gpushift.gitops._pods import CHART_POD_FIELDS, LLMKUBE_VENDOR_RESOURCES
from gpushift.gitops._subst import substitute
from gpushift.gitops._summary import NVIDIA_PREFIX, summarize, truthy
from gpushift.gitops._timeslicing import parse_config as parse_time_slicing_config

__all__ = [
    "CHART_POD_FIELDS",
    "GPU_RESOURCE",
    "KUSTOMIZATION_FILES",
    "LLMKUBE_VENDOR_RESOURCES",
    "NVIDIA_PREFIX",
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
    "KustomizeBuilder",
    "ModelPool",
    "ModelPoolMember",
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
    "apply_patch",
    "chart_defaults",
    "chart_identity",
    "known_values_keys",
    "load_repo",
    "parse_patches",
    "parse_time_slicing_config",
    "patch_targets",
    "read_tree",
    "substitute",
    "summarize",
    "truthy",
    "value_at_target_path",
]
