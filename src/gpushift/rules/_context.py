"""What every rule family reads: the repository model, the base revision, and shared facts.

Facts several rules need (which allocators are active, which workloads ask for a GPU) are
computed once here, so that the rules agree with each other.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpushift._quantity import QuantityError, parse
from gpushift.gitops import (
    GPU_RESOURCE,
    NVIDIA_PREFIX,
    Claim,
    Container,
    DevicePlugin,
    HelmRelease,
    Manifest,
    PodSpec,
    Repo,
    Source,
    Workload,
    gpu_clusters,
    operator_runs_plugin,
    standalone_runs_plugin,
    truthy,
)
from gpushift.reports import Finding, Severity
from gpushift.rules._registry import rule

#: The DRA driver's name; its DeviceClasses are gpu.nvidia.com, mig.nvidia.com, vfio.gpu.nvidia.com.
NVIDIA_DRIVER = "gpu.nvidia.com"
#: Chart default when ``nvidiaDriverRoot``/``hostPaths.driverInstallDir`` is not set.
DRA_DRIVER_ROOT_DEFAULT = "/"
OPERATOR_DRIVER_DIR_DEFAULT = "/run/nvidia/driver"


def name_of(obj: Manifest) -> str:
    """``Kind/namespace/name`` (or ``Kind/name``) for a finding's ``object``."""
    return f"{obj.kind}/{obj.namespace}/{obj.name}" if obj.namespace else f"{obj.kind}/{obj.name}"


_MISSING = object()


def _dig(data: Any, keys: Sequence[str | int]) -> Any:
    cur = data
    for k in keys:
        if isinstance(cur, Mapping):
            cur = cur.get(k, _MISSING)
        elif isinstance(cur, list) and isinstance(k, int) and 0 <= k < len(cur):
            cur = cur[k]
        else:
            return _MISSING
        if cur is _MISSING:
            return _MISSING
    return cur


def body_at(obj: Manifest, keys: Sequence[str | int]) -> Any:
    """The value at ``keys`` inside the object's document, or None."""
    found = _dig(obj.body, keys)
    return None if found is _MISSING else found


def positive(amount: Any) -> bool:
    """Whether a resource amount is a quantity above zero (unparsable amounts count as asked)."""
    if amount is None:
        return False
    # Fast paths for the usual `nvidia.com/gpu: 1`; Fraction comparison is comparatively slow.
    if isinstance(amount, int) and not isinstance(amount, bool):
        return amount > 0
    if isinstance(amount, str) and amount.isdigit():
        return int(amount) > 0
    try:
        return parse(amount).numerator > 0
    except QuantityError:
        return True


def nvidia_requests(container: Container) -> dict[str, Any]:
    """The NVIDIA extended resources a container asks for (limits win over requests)."""
    out: dict[str, Any] = {}
    for section in (container.requests, container.limits):
        for res, amount in section.items():
            if str(res).startswith(NVIDIA_PREFIX) and positive(amount):
                out[str(res)] = amount
    return out


def request_keys(container: Container, resource: str) -> tuple[str, ...]:
    """The key path (below the container) of the resource request, limits first."""
    if resource in container.limits:
        return ("resources", "limits", resource)
    if resource in container.requests:
        return ("resources", "requests", resource)
    return ("resources",)


class Located(Protocol):
    """A model item written in one object: a HelmRelease, a Kustomization, a claim's object."""

    @property
    def source(self) -> Source: ...
    @property
    def obj(self) -> Manifest: ...


@dataclass(frozen=True)
class Context:
    """The inputs of one check run.

    ``repo`` is the checked tree; ``base`` is the same tree at ``--base`` (None without it);
    ``kubernetes_version`` the cluster's release, for rules whose upstream behaviour changed.
    """

    repo: Repo
    base: Repo | None = None
    #: The cluster's Kubernetes minor (``check --kubernetes-version``).
    kubernetes_version: tuple[int, int] = (1, 37)

    def finding(
        self,
        rule_id: str,
        *,
        source: Source,
        line: int | None,
        obj: str,
        msg: str,
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of ``rule_id`` at ``source.path``, with the rule's default severity unless
        ``severity`` calibrates this case (docs/rules.md, "Severities")."""
        sev = severity if severity is not None else rule(rule_id).severity
        return Finding(rule_id, sev, source.path, line, obj, msg)

    def about(
        self,
        rule_id: str,
        item: Located,
        *,
        line: int | None,
        msg: str,
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of ``rule_id`` about a written object (a release, a Kustomization, a
        config): in its file, naming its object."""
        return self.finding(
            rule_id,
            source=item.source,
            line=line,
            obj=name_of(item.obj),
            msg=msg,
            severity=severity,
        )

    def in_workload(
        self,
        rule_id: str,
        w: Workload,
        *,
        source: Source,
        line: int | None,
        msg: str,
        severity: Severity | None = None,
    ) -> Finding:
        """A finding of ``rule_id`` at ``source`` (a container, a pod field) of workload ``w``,
        naming the object that produces the workload."""
        return self.finding(
            rule_id, source=source, line=line, obj=name_of(w.origin), msg=msg, severity=severity
        )

    # -- allocators ----------------------------------------------------------------------

    @functools.cached_property
    def operators(self) -> tuple[HelmRelease, ...]:
        """Active gpu-operator releases."""
        return self.repo.releases("gpu-operator")

    @functools.cached_property
    def drivers(self) -> tuple[HelmRelease, ...]:
        """Active DRA driver releases (either chart name)."""
        return self.repo.releases("dra-driver-nvidia-gpu")

    @functools.cached_property
    def plugin_advertisers(self) -> tuple[DevicePlugin, ...]:
        """Active device plugins, which advertise ``nvidia.com/gpu``: the model's
        ``Repo.device_plugins`` (charts and DaemonSet manifests), as the summary counts them."""
        return tuple(p for p in self.repo.device_plugins if p.active)

    @functools.cached_property
    def plugin_workloads(self) -> frozenset[int]:
        """``id`` of the workloads that are device plugins (the GPU stack, not consumers)."""
        return frozenset(id(p.workload) for p in self.repo.device_plugins if p.workload)

    @functools.cached_property
    def dra_advertisers(self) -> tuple[HelmRelease, ...]:
        """Active DRA driver releases that publish GPUs (``resources.gpus.enabled``)."""
        return tuple(d for d in self.drivers if dra_gpus_on(d))

    @functools.cached_property
    def gpu_clusters(self) -> tuple[HelmRelease | Manifest, ...]:
        """What deploys gpu-operator's GPUCluster (releases with ``gpuCluster.deployCR``, then
        GPUCluster objects): the operator's own DRA stack, which always publishes GPUs."""
        return gpu_clusters(self.repo)

    @functools.cached_property
    def dra_on(self) -> bool:
        """Whether a DRA stack publishes GPUs: the DRA chart or gpu-operator's GPUCluster."""
        return bool(self.dra_advertisers or self.gpu_clusters)

    @functools.cached_property
    def bridging_classes(self) -> tuple[str, ...]:
        """Active DeviceClasses mapping ``extendedResourceName: nvidia.com/gpu``, sorted."""
        return tuple(
            sorted(
                {
                    c.name
                    for c in self.repo.device_classes
                    if c.active and c.extended_resource_name == GPU_RESOURCE
                }
            )
        )

    # -- workloads and claims ------------------------------------------------------------

    @functools.cached_property
    def workloads(self) -> tuple[Workload, ...]:
        """Active workloads."""
        return tuple(w for w in self.repo.workloads if w.active)

    @functools.cached_property
    def running(self) -> tuple[Workload, ...]:
        """Active workloads that run pods (not parked at ``replicas: 0``): only these can be
        left Pending."""
        return tuple(w for w in self.workloads if not w.parked)

    def claim_for(self, workload: Workload, *, name: str, template: bool) -> Claim | None:
        """The active claim or template a pod names, in the workload's namespace."""
        for c in self.repo.claims:
            if c.template != template or c.name != name or not c.active:
                continue
            if c.namespace is None or workload.namespace is None:
                return c
            if c.namespace == workload.namespace:
                return c
        return None

    def workload_claims(self, workload: Workload) -> tuple[Claim, ...]:
        """The claims and templates a workload's pod refers to that exist in the repository."""
        out: list[Claim] = []
        for pc in workload.pod.resource_claims:
            if pc.template:
                c = self.claim_for(workload, name=pc.template, template=True)
            elif pc.claim:
                c = self.claim_for(workload, name=pc.claim, template=False)
            else:
                c = None
            if c is not None:
                out.append(c)
        return tuple(out)


#: gpu-operator runs the device plugin unless ``devicePlugin.enabled`` is false or it deploys
#: no ClusterPolicy; the standalone chart unless ``devicePlugin.enabled`` is false (the model's
#: own tests, so rules and summary agree).
operator_plugin_on = operator_runs_plugin
standalone_plugin_on = standalone_runs_plugin


def dra_gpus_on(driver: HelmRelease) -> bool:
    """The DRA chart publishes GPUs unless ``resources.gpus.enabled`` is false."""
    return truthy(driver.value("resources", "gpus", "enabled"), default=True)


def is_nvidia_claim(claim: Claim) -> bool:
    """Whether a claim asks NVIDIA's DRA driver (by DeviceClass name or opaque config)."""
    if NVIDIA_DRIVER in claim.drivers:
        return True
    return any(r.device_class.endswith("nvidia.com") for r in claim.requests)


def option_line(pod: PodSpec, option: str) -> tuple[Source, int]:
    """Where a pod-level option (``runtimeClassName``, ``resourceClaims`` …) was written."""
    src = pod.option_sources.get(option)
    if src is not None:
        return src, src.line_of(())
    return pod.source, pod.source.line_of((option,))
