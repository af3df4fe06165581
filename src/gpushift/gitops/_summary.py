"""The repository's GPU summary (``summarize``): allocator, sharing, consumers, classes."""

from __future__ import annotations

from typing import Any

from gpushift._sharing import ConsumableSharesError, parse_consumable_shares
from gpushift.gitops._model import (
    ActiveAllocators,
    Claim,
    Consumer,
    DraStack,
    HelmRelease,
    Manifest,
    PluginSharing,
    Repo,
    RequestKind,
    SharingSummary,
    Summary,
    Workload,
)

#: NVIDIA's extended resources all live under this prefix (nvidia.com/gpu, nvidia.com/gpu.shared
#: with renameByDefault, nvidia.com/mig-1g.10gb with the mixed MIG strategy).
NVIDIA_PREFIX = "nvidia.com/"
#: The well-known label a nodeSelector pins one node by (kubernetes.io/hostname).
_HOSTNAME = "kubernetes.io/hostname"
#: The DRA driver's DeviceClasses (gpu.nvidia.com, mig.nvidia.com, vfio.gpu.nvidia.com).
NVIDIA_CLASS_SUFFIX = "nvidia.com"


def truthy(value: Any, *, default: bool) -> bool:
    """A Helm value read as a boolean: None means ``default``; strings as YAML would read them."""
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "0", "no", "off")
    return bool(value)


#: gpu-operator's two stack CRs, by kind (the group is nvidia.com): ClusterPolicy (nvidia.com/v1)
#: runs the device plugin stack, GPUCluster (nvidia.com/v1alpha1, v26.7.0) the DRA stack.
CLUSTER_POLICY_KIND = "ClusterPolicy"
GPU_CLUSTER_KIND = "GPUCluster"


def _operator_crs(repo: Repo, kind: str) -> tuple[Manifest, ...]:
    return tuple(
        o
        for o in repo.objects
        if o.active and o.kind == kind and o.api_version.startswith("nvidia.com/")
    )


def gpu_clusters(repo: Repo) -> tuple[HelmRelease | Manifest, ...]:
    """What deploys gpu-operator's GPUCluster (its DRA stack): active gpu-operator releases
    with ``gpuCluster.deployCR`` (default false), then GPUCluster objects in the tree."""
    releases = tuple(
        hr
        for hr in repo.releases("gpu-operator")
        if truthy(hr.value("gpuCluster", "deployCR"), default=False)
    )
    return releases + _operator_crs(repo, GPU_CLUSTER_KIND)


def cluster_policies(repo: Repo) -> tuple[HelmRelease | Manifest, ...]:
    """What deploys gpu-operator's ClusterPolicy: active gpu-operator releases with
    ``clusterPolicy.deployCR`` (default true), then ClusterPolicy objects in the tree."""
    releases = tuple(
        hr
        for hr in repo.releases("gpu-operator")
        if truthy(hr.value("clusterPolicy", "deployCR"), default=True)
    )
    return releases + _operator_crs(repo, CLUSTER_POLICY_KIND)


def device_plugin_active(repo: Repo) -> bool:
    """Whether an active device plugin runs (``Repo.device_plugins``: gpu-operator's with its
    ClusterPolicy, the standalone chart's, or a DaemonSet manifest)."""
    return any(p.active for p in repo.device_plugins)


def dra_releases(repo: Repo) -> tuple[HelmRelease, ...]:
    """Active releases that run the DRA driver with GPU allocation on.

    The DRA chart counts unless ``resources.gpus.enabled`` (default true) is false;
    gpu-operator counts when it deploys its GPUCluster stack (``gpuCluster.deployCR``).
    """
    charts = tuple(
        hr
        for hr in repo.releases("dra-driver-nvidia-gpu")
        if truthy(hr.value("resources", "gpus", "enabled"), default=True)
    )
    operators = tuple(
        hr
        for hr in repo.releases("gpu-operator")
        if truthy(hr.value("gpuCluster", "deployCR"), default=False)
    )
    return charts + operators


def dra_stack(repo: Repo) -> DraStack | None:
    """Which DRA stack hands out GPUs: gpu-operator's GPUCluster, the DRA driver chart, or
    None. A tree with both names the GPUCluster (the rules report the pair)."""
    if gpu_clusters(repo):
        return "gpucluster"
    if any(hr.chart == "dra-driver-nvidia-gpu" for hr in dra_releases(repo)):
        return "dra-driver"
    return None


def _allocator(dp: bool, dra: bool) -> ActiveAllocators:
    if dp and dra:
        return "both"
    if dp:
        return "device-plugin"
    return "dra" if dra else "none"


def _dra_sharing(hr: HelmRelease) -> SharingSummary:
    if hr.chart == "gpu-operator":
        # GPUCluster has no consumableShares value; it takes CONSUMABLE_SHARES as plugin env.
        env = hr.value("draDriver", "gpus", "kubeletPlugin", "env")
        raw: Any = next(
            (
                e.get("value")
                for e in env or []
                if isinstance(e, dict) and e.get("name") == "CONSUMABLE_SHARES"
            ),
            None,
        )
    else:
        raw = hr.value("consumableShares")
    try:
        mode = parse_consumable_shares("" if raw is None else str(raw).strip())
    except ConsumableSharesError:
        # The plugin refuses it (the rule consumable-shares-invalid says so); nothing is shared.
        return SharingSummary("exclusive")
    if isinstance(mode, int):
        return SharingSummary("consumable-shares", mode)
    return SharingSummary("exclusive" if mode == "disabled" else mode)


def _plugin_sharing(repo: Repo) -> SharingSummary:
    """The sharing of the first active device plugin that shares (``exclusive`` when none
    does); per-plugin sharing is ``Summary.device_plugins``."""
    for plugin in repo.device_plugins:
        if plugin.active and plugin.sharing.mode != "exclusive":
            return plugin.sharing
    return SharingSummary("exclusive")


def _plugin_pools(repo: Repo) -> tuple[PluginSharing, ...]:
    return tuple(
        PluginSharing(p.name, p.pool.describe(), p.sharing) for p in repo.device_plugins if p.active
    )


def _nvidia_claim(claim: Claim) -> bool:
    return any(r.device_class.endswith(NVIDIA_CLASS_SUFFIX) for r in claim.requests) or any(
        d.endswith(NVIDIA_CLASS_SUFFIX) for d in claim.drivers
    )


#: NVIDIA's own node agents reach every GPU by design; they are the stack, not consumers.
_STACK_PREFIXES = (
    "nvidia-device-plugin",
    "gpu-feature-discovery",
    "nvidia-container-toolkit",
    "nvidia-driver",
    "nvidia-operator-validator",
    "nvidia-mig-manager",
)


def _request_kind(w: Workload, repo: Repo, *, dp: bool, dra: bool) -> RequestKind | None:
    """How ``w`` asks for an NVIDIA GPU, or None when it has nothing to do with one."""
    if w.origin_kind == "manifest" and w.name.startswith(_STACK_PREFIXES):
        return None
    if any(p.workload is w for p in repo.device_plugins):
        return None
    for pc in w.pod.resource_claims:
        name = pc.template or pc.claim
        found = [
            c
            for c in repo.claims
            if c.name == name
            and c.template == (pc.template is not None)
            and (w.namespace is None or c.namespace in (None, w.namespace))
        ]
        if not found or any(_nvidia_claim(c) for c in found):
            return "claim"
    asks = any(
        str(res).startswith(NVIDIA_PREFIX)
        for c in w.pod.all_containers
        for res in (*c.limits, *c.requests)
    )
    if asks:
        return "bridged" if (dra and not dp) else "extended"
    if w.monitoring or w.pod.runtime_class_name == "nvidia":
        return "none"
    if any(c.env.get("NVIDIA_VISIBLE_DEVICES") == "all" for c in w.pod.all_containers):
        return "none"
    return None


def summarize(repo: Repo) -> Summary:
    """The GPU summary of ``repo``.

    ``allocator`` counts a DRA release with GPUs enabled (even if its install would fail for
    a missing ``gpuResourcesEnabledOverride``; that is a finding of its own). ``sharing`` is
    the DRA driver's consumable-shares mode when DRA is active and configures one, else the
    device plugin's selected time-slicing config, else ``exclusive``. Consumers are active
    workloads that request an NVIDIA GPU (an ``nvidia.com/`` extended resource or a claim on
    an NVIDIA DeviceClass) or reach one without asking (``runtimeClassName: nvidia``,
    ``NVIDIA_VISIBLE_DEVICES=all``, GPU exporters); those at ``replicas: 0`` are ``parked``
    instead. Node labels never count as requests. ``gpu_nodes`` are the hostnames GPU
    consumers pin themselves to.
    """
    dp = device_plugin_active(repo)
    dras = dra_releases(repo)
    stack = dra_stack(repo)
    # A GPUCluster object without a release that sets its sharing: the driver's default.
    dra = stack is not None
    sharing = SharingSummary("exclusive")
    if dras:
        sharing = _dra_sharing(dras[0])
    if sharing.mode == "exclusive" and dp:
        sharing = _plugin_sharing(repo)
    consumers: list[Consumer] = []
    parked: list[Consumer] = []
    nodes: set[str] = set()
    for w in repo.workloads:
        if not w.active:
            continue
        kind = _request_kind(w, repo, dp=dp, dra=dra)
        if kind is not None:
            consumer = Consumer(w.kind, w.namespace, w.name, kind, w)
            (parked if w.parked else consumers).append(consumer)
            host = w.pod.node_selector.get(_HOSTNAME)
            if host is not None:
                nodes.add(str(host))
    consumers.sort(key=lambda c: (c.namespace or "", c.name, c.kind))
    parked.sort(key=lambda c: (c.namespace or "", c.name, c.kind))
    classes = sorted({d.name for d in repo.device_classes if d.active})
    templates = sorted(
        {
            f"{c.namespace}/{c.name}" if c.namespace else c.name
            for c in repo.claims
            if c.active and c.template
        }
    )
    return Summary(
        allocator=_allocator(dp, dra),
        sharing=sharing,
        consumers=tuple(consumers),
        device_classes=tuple(classes),
        claim_templates=tuple(templates),
        parked=tuple(parked),
        gpu_nodes=tuple(sorted(nodes)),
        dra_stack=stack,
        cluster_root=repo.cluster_root,
        taken_roots=(
            ()
            if repo.cluster_root
            else tuple((o.kind, o.namespace, o.name) for o in repo.taken_roots)
        ),
        device_plugins=_plugin_pools(repo),
    )
