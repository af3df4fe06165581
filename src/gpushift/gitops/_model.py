"""The GitOps repository model: what a Flux repository deploys, as far as GPUs are concerned.

Everything here is read-only data built by ``load_repo``. Every item carries a ``Source``: the
file path relative to the checked directory, the 1-based line where the item starts, and the
document index, so ``Source.line_of(keys)`` can find a nested key's line lazily (only for
findings) with ``gpushift._yaml.locate``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpushift import _yaml
from gpushift.flux import Keys, YamlError
from gpushift.gitops._nodes import NodePool

#: Charts the model understands; everything else is ``other``.
ChartId = Literal[
    "gpu-operator",
    "nvidia-device-plugin",
    "dra-driver-nvidia-gpu",
    "app-template",
    "dcgm-exporter",
    "other",
]

#: Where a workload's pod spec comes from.
WorkloadOrigin = Literal["manifest", "app-template", "llmkube", "dcgm-exporter", "operator"]

#: Where a time-slicing config was found.
TimeSlicingForm = Literal["configmap", "generator", "inline"]

#: Which allocators a repository deploys (``gpushift._sharing.Allocator`` names one).
ActiveAllocators = Literal["device-plugin", "dra", "both", "none"]
#: Who runs DRA: gpu-operator's GPUCluster stack or the dra-driver-nvidia-gpu chart.
DraStack = Literal["gpucluster", "dra-driver"]
#: How a repository shares its cards, as its summary reports it.
SharingSummaryMode = Literal[
    "exclusive", "time-slicing", "mps", "consumable-shares", "memory", "unlimited"
]
RequestKind = Literal["extended", "claim", "bridged", "none"]
#: What deploys a device plugin: one of the two charts, or a DaemonSet written as a manifest.
DevicePluginDeployer = Literal["gpu-operator", "nvidia-device-plugin", "manifest"]

#: The extended resource the NVIDIA device plugin advertises.
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Source:
    """Where an item was written.

    ``path`` is relative to the checked directory (POSIX separators); ``file`` is the real
    file for lazy line lookups; ``doc`` is the document index within the file; ``keys`` is the
    key path of the item inside that document (empty for a whole document, ``("items", 3)``
    for a List item, ``("spec", "values", "controllers", "app")`` for an app-template
    controller, and so on). ``line`` is the item's own line.
    """

    path: str
    line: int
    doc: int
    file: str | Path
    keys: Keys = ()

    def line_of(self, keys: Sequence[str | int] = ()) -> int:
        """The line of ``keys`` below this item's own key path.

        Returns the deepest line found (the parent's line when a key is absent), or
        ``self.line`` when the file cannot be re-read.
        """
        found = _yaml.locate(self.file, self.doc, (*self.keys, *keys))
        return found if found is not None else self.line

    def child(self, keys: Sequence[str | int]) -> Source:
        """A source for a nested item (same file and document, longer key path)."""
        full = (*self.keys, *keys)
        return Source(self.path, self.line, self.doc, self.file, full)


@dataclass(frozen=True, slots=True)
class KsRef:
    """A Flux Kustomization named by namespace and name."""

    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Manifest:
    """One Kubernetes object found in the repository (after kustomize and Flux substitution).

    ``namespace`` is the effective namespace (Flux ``targetNamespace``, else kustomize
    ``namespace``, else the object's own, else the deploying Kustomization's namespace) or
    None: cluster-scoped, or unknown in a partial tree (rules should not compare an unknown
    namespace). ``active`` is True
    when a Flux root reaches the object (or the tree has no Flux root). ``kustomization``
    is the Flux Kustomization that deploys it. ``generated`` is True for objects made by a
    kustomize configMapGenerator/secretGenerator; their ``source`` is the generator entry.
    ``body`` is the parsed document; treat it as read-only.
    """

    api_version: str
    kind: str
    name: str
    namespace: str | None
    body: Mapping[str, Any]
    source: Source
    active: bool
    kustomization: KsRef | None = None
    generated: bool = False


@dataclass(frozen=True, slots=True)
class DependsOn:
    """A ``spec.dependsOn`` entry; ``namespace`` defaults to the Kustomization's own."""

    name: str
    namespace: str


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """A ``spec.healthChecks`` entry (``meta.NamespacedObjectKindReference``)."""

    api_version: str | None
    kind: str
    name: str
    namespace: str | None


@dataclass(frozen=True, slots=True)
class ValuesRef:
    """A ``valuesFrom`` or ``postBuild.substituteFrom`` entry and whether it was found.

    ``values_key`` defaults to ``values.yaml`` as in helm-controller; it is "" for
    substituteFrom (the whole data map is used).
    """

    kind: str
    name: str
    values_key: str
    target_path: str | None
    optional: bool
    found: bool
    source: Source


@dataclass(frozen=True, slots=True)
class FluxKustomization:
    """A ``kustomize.toolkit.fluxcd.io/v1`` Kustomization.

    ``path`` is ``spec.path`` as written; ``directory`` is the directory it resolves to,
    relative to the checked directory, or None when it is not in the checked tree.
    ``substitute`` is ``postBuild.substitute`` (after the Kustomization's own
    substitution); ``substitute_from`` lists ``postBuild.substituteFrom``. ``post_build`` is
    True when ``spec.postBuild`` is present: Flux substitutes only then.
    """

    name: str
    namespace: str
    path: str
    directory: str | None
    depends_on: tuple[DependsOn, ...]
    health_checks: tuple[HealthCheck, ...]
    force: bool
    prune: bool
    suspend: bool
    wait: bool
    target_namespace: str | None
    post_build: bool
    substitute: Mapping[str, str]
    substitute_from: tuple[ValuesRef, ...]
    components: tuple[str, ...]
    obj: Manifest

    @property
    def ref(self) -> KsRef:
        """This Kustomization's namespace and name."""
        return KsRef(self.namespace, self.name)

    @property
    def active(self) -> bool:
        """Whether a Flux root reaches this Kustomization."""
        return self.obj.active

    @property
    def source(self) -> Source:
        """Where the Kustomization is written."""
        return self.obj.source


@dataclass(frozen=True, slots=True)
class ValueLayer:
    """One source of a HelmRelease's user-given values: inline ``values`` or a valuesFrom.

    ``source`` points at the values' root (``spec.values`` of the release, or the data key of a
    ConfigMap/Secret). ``locatable`` is False when the values were embedded as text (a
    ConfigMap key), so keys below can only be placed at the data key's line.
    """

    values: Mapping[str, Any]
    source: Source
    locatable: bool

    def line_of(self, keys: Sequence[str | int]) -> int:
        """The line of ``keys`` (or of their closest written parent) in this layer."""
        return self.source.line_of(keys if self.locatable else ())


@dataclass(frozen=True, slots=True)
class HelmRelease:
    """A ``helm.toolkit.fluxcd.io/v2`` HelmRelease with its chart and values resolved.

    ``chart`` is the normalised chart identity, ``chart_name`` the raw chart (or OCI
    artifact) name, ``chart_version`` the version or tag when written. ``namespace`` is the
    release object's namespace; ``target_namespace`` is where the chart installs
    (``spec.targetNamespace``, else ``namespace``). ``values`` are the effective values
    (outcome-changing chart defaults, then inline ``values``, then ``valuesFrom`` found in
    the repository, merged in Helm's order); ``user_values`` are only what the user gave.
    """

    name: str
    namespace: str | None
    target_namespace: str | None
    release_name: str
    chart: ChartId
    chart_name: str
    chart_version: str | None
    values: Mapping[str, Any]
    user_values: Mapping[str, Any]
    values_from: tuple[ValuesRef, ...]
    suspend: bool
    obj: Manifest
    #: Where the user-given values came from, lowest precedence first.
    layers: tuple[ValueLayer, ...] = field(default=(), repr=False)

    @property
    def active(self) -> bool:
        """Whether a Flux root reaches this release (and it is not suspended)."""
        return self.obj.active and not self.suspend

    @property
    def source(self) -> Source:
        """Where the HelmRelease is written."""
        return self.obj.source

    @property
    def values_source(self) -> Source:
        """Where the values are written as a document (the last locatable layer: Flux
        ``spec.values``, an Argo CD ``valuesObject`` or values file, kustomize
        ``valuesInline``), else the release's ``spec.values``."""
        for layer in reversed(self.layers):
            if layer.locatable:
                return layer.source
        return self.obj.source.child(("spec", "values"))

    def value(self, *keys: str, default: Any = None) -> Any:
        """The effective value at ``keys`` (dotted path as separate keys), or ``default``."""
        return _dig(self.values, keys, default)

    def user_value(self, *keys: str, default: Any = None) -> Any:
        """The user-given value at ``keys``, or ``default`` when the user did not set it."""
        return _dig(self.user_values, keys, default)

    def is_set(self, *keys: str) -> bool:
        """Whether the user gave a value at ``keys`` (inline or through valuesFrom)."""
        missing = object()
        return _dig(self.user_values, keys, missing) is not missing

    def line_of(self, *keys: str) -> int:
        """The line where the user gave ``keys`` (or its deepest given parent).

        Falls back to the HelmRelease's ``spec.values`` (or ``spec``) line when the value is a
        chart default.
        """
        missing = object()
        for n in range(len(keys), 0, -1):
            for layer in reversed(self.layers):
                if _dig(layer.values, keys[:n], missing) is not missing:
                    return layer.line_of(keys[:n])
        return self.values_source.line_of(())


@dataclass(frozen=True, slots=True)
class PodClaim:
    """A pod ``spec.resourceClaims`` entry: exactly one of ``template`` or ``claim``."""

    name: str
    template: str | None
    claim: str | None


@dataclass(frozen=True, slots=True)
class Container:
    """One container of a normalised pod spec.

    ``env`` maps names to literal values (None for ``valueFrom``); ``source`` points at the
    container definition (its key path in the origin document).
    """

    name: str
    init: bool
    resources: Mapping[str, Any]
    env: Mapping[str, str | None]
    security_context: Mapping[str, Any]
    source: Source

    @property
    def limits(self) -> Mapping[str, Any]:
        """``resources.limits`` (empty when absent)."""
        v = self.resources.get("limits")
        return v if isinstance(v, dict) else {}

    @property
    def requests(self) -> Mapping[str, Any]:
        """``resources.requests`` (empty when absent)."""
        v = self.resources.get("requests")
        return v if isinstance(v, dict) else {}

    @property
    def claims(self) -> tuple[str, ...]:
        """Names in ``resources.claims``."""
        v = self.resources.get("claims")
        if not isinstance(v, list):
            return ()
        return tuple(str(c["name"]) for c in v if isinstance(c, dict) and "name" in c)

    def extended(self, resource: str = GPU_RESOURCE) -> Any:
        """The requested amount of an extended resource (limits win, as Kubernetes defaults
        requests to limits for extended resources), or None when not requested."""
        if resource in self.limits:
            return self.limits[resource]
        return self.requests.get(resource)

    @property
    def privileged(self) -> bool:
        """Whether the container runs privileged."""
        return bool(self.security_context.get("privileged"))


@dataclass(frozen=True, slots=True)
class PodSpec:
    """A pod spec normalised from whatever renders it.

    ``options`` holds the pod-level fields as the pod would get them (``runtimeClassName``,
    ``nodeSelector``, ``affinity``, ``tolerations``, ``securityContext``, ...); ``option_sources``
    says where each was written (app-template merges ``defaultPodOptions`` with the
    controller's ``pod``, so the two can differ).
    """

    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    resource_claims: tuple[PodClaim, ...]
    options: Mapping[str, Any]
    option_sources: Mapping[str, Source]
    source: Source

    @property
    def all_containers(self) -> tuple[Container, ...]:
        """Init containers first, then containers."""
        return self.init_containers + self.containers

    @property
    def runtime_class_name(self) -> str | None:
        """``runtimeClassName`` when set."""
        v = self.options.get("runtimeClassName")
        return str(v) if v is not None else None

    @property
    def node_selector(self) -> Mapping[str, Any]:
        """``nodeSelector`` (empty when absent)."""
        v = self.options.get("nodeSelector")
        return v if isinstance(v, dict) else {}

    @property
    def affinity(self) -> Mapping[str, Any]:
        """``affinity`` (empty when absent)."""
        v = self.options.get("affinity")
        return v if isinstance(v, dict) else {}

    def option_source(self, name: str) -> Source:
        """Where the pod option ``name`` was written, else the pod spec's own source."""
        return self.option_sources.get(name, self.source)


@dataclass(frozen=True, slots=True)
class Workload:
    """Something that runs pods, with the pod spec it renders.

    ``kind`` is the rendered kind (Deployment, StatefulSet, DaemonSet, Pod, Job, CronJob) and
    ``name`` the rendered name (app-template: the release name for a single or same-named
    controller, else ``<release>-<controller>``; llmkube: the InferenceService name; operator
    CRDs: the object's kind and name, with ``-<group>`` for Ray groups and training roles);
    ``origin`` is the object that produces it (a HelmRelease for app-template and
    dcgm-exporter charts, an InferenceService for llmkube, the operator's object for
    ``operator``, the manifest itself otherwise).
    ``monitoring`` is True for GPU metrics exporters. ``replicas`` is the pod count when
    written (None: controller default). ``pool`` names the llmkube ModelPool whose one GPU
    slot this InferenceService takes turns on (None: not a pool member).
    """

    kind: str
    namespace: str | None
    name: str
    origin_kind: WorkloadOrigin
    origin: Manifest
    pod: PodSpec
    monitoring: bool = False
    replicas: int | None = None
    pool: str | None = None

    @property
    def active(self) -> bool:
        """Whether the producing object is deployed."""
        return self.origin.active

    @property
    def parked(self) -> bool:
        """Whether the workload is scaled to zero (``replicas: 0``): deployed, but it runs no
        pod and so holds no GPU."""
        return self.replicas == 0

    @property
    def source(self) -> Source:
        """Where the workload (its pod spec) is written."""
        return self.pod.source


@dataclass(frozen=True, slots=True)
class ModelPoolMember:
    """A ModelPool ``spec.members[]`` entry: the InferenceService ``inferenceServiceRef.name``
    names in the pool's namespace.

    ``found`` is False when the repository has no such InferenceService (an active one, for an
    active pool); llmkube then sets the pool's ``MembersValid`` condition False and holds the
    pool ``Degraded``. ``source`` points at the entry.
    """

    name: str
    found: bool
    source: Source


@dataclass(frozen=True, slots=True)
class ModelPool:
    """An llmkube ``inference.llmkube.dev`` ModelPool: InferenceServices that share one
    exclusive GPU slot on one node, at most one of them resident at a time.

    ``members`` are in written order; ``default`` is the member warmed on a cold pool (None
    when unset). ``node_selector`` pins the slot to a node or node class; llmkube does not copy
    it into the member pods, so member workloads keep their own. ``gpu`` is the slot size
    (informational, CRD default 1; members request their own GPUs); ``swap_policy`` and
    ``swap_budget`` are as written or their CRD defaults (``sticky``, ``300s``).
    """

    name: str
    namespace: str | None
    members: tuple[ModelPoolMember, ...]
    default: str | None
    node_selector: Mapping[str, str]
    gpu: int
    swap_policy: str
    swap_budget: str
    obj: Manifest

    @property
    def active(self) -> bool:
        """Whether the pool is deployed."""
        return self.obj.active

    @property
    def source(self) -> Source:
        """Where the ModelPool is written."""
        return self.obj.source

    @property
    def member_names(self) -> tuple[str, ...]:
        """The member InferenceService names, in written order."""
        return tuple(m.name for m in self.members)

    @property
    def missing(self) -> tuple[ModelPoolMember, ...]:
        """Members whose InferenceService is not in the repository."""
        return tuple(m for m in self.members if not m.found)


@dataclass(frozen=True, slots=True)
class TimeSlicingResource:
    """A ``sharing.timeSlicing.resources[]`` entry of the device-plugin config."""

    name: str
    replicas: int | None
    rename: str | None
    devices: Any


@dataclass(frozen=True, slots=True)
class TimeSlicingConfig:
    """One device-plugin config (one ConfigMap key, or one inline map entry).

    ``config_map`` is the ConfigMap name the device plugin would look up (for a generator the
    generated name without the hash suffix, as written in the repository); ``key`` the data
    key. ``error`` is the device plugin's own parse error text (for example "number of
    replicas must be >= 2"), or None. ``strategy`` is ``time-slicing``, ``mps`` or ``none``
    as the device plugin derives it.
    """

    config_map: str
    key: str
    namespace: str | None
    form: TimeSlicingForm
    version: str | None
    rename_by_default: bool
    fail_requests_greater_than_one: bool
    resources: tuple[TimeSlicingResource, ...]
    mig_strategy: str | None
    strategy: Literal["time-slicing", "mps", "none"]
    error: str | None
    active: bool
    source: Source

    @property
    def replicas(self) -> int | None:
        """The ``nvidia.com/gpu`` replicas (or the largest replicas) when time-slicing."""
        best: int | None = None
        for r in self.resources:
            if r.replicas is None:
                continue
            if r.name == GPU_RESOURCE:
                return r.replicas
            best = r.replicas if best is None else max(best, r.replicas)
        return best

    def advertised(self, resource: TimeSlicingResource) -> str:
        """The resource name the plugin advertises for ``resource`` (``<name>.shared`` with
        renameByDefault, ``rename`` when given)."""
        if resource.rename:
            return resource.rename
        return f"{resource.name}.shared" if self.rename_by_default else resource.name


@dataclass(frozen=True, slots=True)
class DevicePluginConfig:
    """Which time-slicing config a device plugin points at.

    ``owner`` is the gpu-operator or nvidia-device-plugin release. ``config_map`` is the
    ConfigMap named by ``devicePlugin.config.name`` / ``config.name`` (None when no config is
    set); ``default`` the default key. ``configs`` are the configs found under that name in
    the release's namespace (inline or ConfigMap). ``missing`` says what does not exist:
    ``configmap`` (the named ConfigMap) or ``default-key`` (the default key in it).
    """

    owner: HelmRelease
    config_map: str | None
    default: str | None
    inline: bool
    configs: tuple[TimeSlicingConfig, ...]
    missing: Literal["configmap", "default-key"] | None
    source: Source

    @property
    def selected(self) -> TimeSlicingConfig | None:
        """The config the plugin uses by default: the ``default`` key, or the only key."""
        if self.default:
            return next((c for c in self.configs if c.key == self.default), None)
        return self.configs[0] if len(self.configs) == 1 else None


@dataclass(frozen=True, slots=True)
class DevicePlugin:
    """One NVIDIA device plugin the repository deploys, on the nodes its pod spec selects.

    ``deployer`` says what runs it: gpu-operator (``devicePlugin.enabled`` with its
    ClusterPolicy), the standalone chart (``devicePlugin.enabled``), or a DaemonSet applied as
    a manifest (the ``k8s-device-plugin`` image running the plugin, or the static manifest's
    ``nvidia-device-plugin`` names). ``release`` is the chart's HelmRelease, ``workload`` the
    manifest's DaemonSet. ``pool`` is the nodes it runs on (unconstrained: every GPU node).
    ``config`` is a chart's config pointer; for a manifest ``config_file`` is the plugin's
    ``--config-file`` (or ``CONFIG_FILE``) path, ``config_map`` and ``config_key`` the
    ConfigMap volume and key it resolves to. ``selected`` is the config the plugin loads, and
    ``missing`` what could not be found (``configmap``, ``default-key`` or ``volume``).
    """

    deployer: DevicePluginDeployer
    obj: Manifest
    pool: NodePool
    release: HelmRelease | None = None
    workload: Workload | None = None
    config: DevicePluginConfig | None = None
    config_file: str | None = None
    config_map: str | None = None
    config_key: str | None = None
    selected: TimeSlicingConfig | None = None
    missing: Literal["configmap", "default-key", "volume"] | None = None

    @property
    def active(self) -> bool:
        """Whether it is deployed (the release active and not suspended, or the manifest)."""
        return self.release.active if self.release is not None else self.obj.active

    @property
    def source(self) -> Source:
        """Where it is written: the HelmRelease or the DaemonSet."""
        return self.obj.source

    @property
    def name(self) -> str:
        """``Kind/namespace/name`` of the release or DaemonSet."""
        o = self.obj
        return f"{o.kind}/{o.namespace}/{o.name}" if o.namespace else f"{o.kind}/{o.name}"

    @property
    def sharing(self) -> SharingSummary:
        """How this plugin shares its cards: its selected config's strategy and replicas, or
        ``exclusive`` (no config, or one the plugin rejects)."""
        cfg = self.selected
        if cfg is not None and cfg.error is None and cfg.strategy != "none":
            return SharingSummary(cfg.strategy, cfg.replicas)
        return SharingSummary("exclusive")


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One device request of a claim spec (``exactly`` or a ``firstAvailable`` entry).

    ``capacity`` is ``capacity.requests`` (e.g. ``{"memory": "4Gi"}``); ``count`` is None
    for the default (1 for ExactCount).
    """

    name: str
    device_class: str
    allocation_mode: str
    count: int | None
    capacity: Mapping[str, Any]
    selectors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Claim:
    """A ResourceClaim or ResourceClaimTemplate (``template`` tells which)."""

    name: str
    namespace: str | None
    template: bool
    requests: tuple[DeviceRequest, ...]
    #: Opaque configs as written (``spec.devices.config``).
    config: tuple[Mapping[str, Any], ...]
    obj: Manifest

    @property
    def drivers(self) -> frozenset[str]:
        """Drivers named by opaque configs."""
        out = set()
        for c in self.config:
            op = c.get("opaque")
            if isinstance(op, dict) and op.get("driver"):
                out.add(str(op["driver"]))
        return frozenset(out)

    @property
    def active(self) -> bool:
        """Whether the claim is deployed."""
        return self.obj.active


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass, written in the repository or rendered by an active chart.

    ``rendered_by`` names the HelmRelease that renders it (None when written as a manifest).
    """

    name: str
    extended_resource_name: str | None
    selectors: tuple[str, ...]
    source: Source
    active: bool
    rendered_by: HelmRelease | None = None


@dataclass(frozen=True, slots=True)
class RuntimeClass:
    """A RuntimeClass written in the repository or installed by gpu-operator."""

    name: str
    handler: str | None
    source: Source
    active: bool
    rendered_by: HelmRelease | None = None


@dataclass(frozen=True, slots=True)
class TalosEvidence:
    """A sign that the cluster runs Talos Linux (machine config, patch or extension label)."""

    reason: str
    source: Source


@dataclass(frozen=True, slots=True)
class DistributionEvidence:
    """A sign that the cluster runs k3s or RKE2 (``name``: ``k3s``, ``RKE2`` or
    ``k3s or RKE2``), with what was seen and where."""

    name: str
    reason: str
    source: Source


@dataclass(frozen=True, slots=True)
class UnexpandedGenerator:
    """An ApplicationSet generator whose parameters come from outside the repository (an SCM
    provider, pull requests, a cluster decision resource, a plugin): the applications it
    stands for are not in the model. ``source`` is the generator's entry."""

    appset: Manifest
    generator: str
    source: Source

    @property
    def active(self) -> bool:
        """Whether the ApplicationSet is deployed."""
        return self.appset.active

    @property
    def obj(self) -> Manifest:
        """The ApplicationSet."""
        return self.appset


@dataclass(frozen=True, slots=True)
class Repo:
    """Everything ``load_repo`` found.

    ``root`` is the checked directory; all ``Source.path`` values are relative to it.
    ``has_flux_root`` is False when no Flux Kustomization was found (then everything is
    taken as deployed to one cluster). Sequences hold active and inactive items alike; use
    ``.active`` to filter.
    """

    root: Path
    has_flux_root: bool
    objects: tuple[Manifest, ...]
    kustomizations: tuple[FluxKustomization, ...]
    helm_releases: tuple[HelmRelease, ...]
    workloads: tuple[Workload, ...]
    time_slicing: tuple[TimeSlicingConfig, ...]
    device_plugin_configs: tuple[DevicePluginConfig, ...]
    claims: tuple[Claim, ...]
    device_classes: tuple[DeviceClass, ...]
    runtime_classes: tuple[RuntimeClass, ...]
    talos: tuple[TalosEvidence, ...]
    errors: tuple[YamlError, ...]
    #: llmkube ModelPools.
    model_pools: tuple[ModelPool, ...] = ()
    #: ApplicationSet generators that cannot be expanded offline.
    unexpanded_generators: tuple[UnexpandedGenerator, ...] = ()
    #: Signs of a k3s or RKE2 cluster (see ``gitops._distribution``).
    distribution: tuple[DistributionEvidence, ...] = ()
    #: Whether the tree holds a cluster root: the flux-system Kustomization, a FluxInstance,
    #: a Flux Kustomization that deploys others, or Argo CD Applications.
    cluster_root: bool = True
    #: Deployed Flux Kustomizations, HelmReleases and Argo CD Applications that nothing in the
    #: tree deploys: the roots the walk started from.
    taken_roots: tuple[Manifest, ...] = ()
    #: Every NVIDIA device plugin the tree defines (charts first, in release order, then
    #: DaemonSet manifests); use ``.active`` to filter.
    device_plugins: tuple[DevicePlugin, ...] = ()

    def find(self, kind: str, name: str, namespace: str | None = None) -> tuple[Manifest, ...]:
        """Objects of ``kind`` named ``name`` (in ``namespace`` when given)."""
        return tuple(
            o
            for o in self.objects
            if o.kind == kind and o.name == name and (namespace is None or o.namespace == namespace)
        )

    def releases(self, chart: ChartId, *, active: bool = True) -> tuple[HelmRelease, ...]:
        """HelmReleases of one chart (only active ones unless ``active=False``)."""
        return tuple(h for h in self.helm_releases if h.chart == chart and (h.active or not active))

    def kustomization(self, ref: KsRef | None) -> FluxKustomization | None:
        """The Flux Kustomization ``ref`` names, if it is in the repository."""
        if ref is None:
            return None
        return next((k for k in self.kustomizations if k.ref == ref), None)


@dataclass(frozen=True, slots=True)
class Consumer:
    """A GPU consumer in the summary."""

    kind: str
    namespace: str | None
    name: str
    request: RequestKind
    workload: Workload

    @property
    def pool(self) -> str | None:
        """The llmkube ModelPool the consumer takes turns in, if any (``Workload.pool``)."""
        return self.workload.pool

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "namespace", "name", "request"}``, with ``"pool"`` for pool members."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "request": self.request,
        }
        if self.pool is not None:
            out["pool"] = self.pool
        return out


@dataclass(frozen=True, slots=True)
class SharingSummary:
    """How a GPU is shared: ``replicas`` is the time-slicing or MPS replicas, or consumable
    shares N."""

    mode: SharingSummaryMode
    replicas: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"mode": …, "replicas": N}`` (replicas omitted when not applicable)."""
        out: dict[str, Any] = {"mode": self.mode}
        if self.replicas is not None:
            out["replicas"] = self.replicas
        return out


@dataclass(frozen=True, slots=True)
class PluginSharing:
    """One active device plugin in the summary: what it is, the nodes it runs on, and how it
    shares their cards (one entry per node pool when a DaemonSet runs per pool)."""

    plugin: str
    nodes: str
    sharing: SharingSummary

    def to_dict(self) -> dict[str, Any]:
        """``{"plugin", "nodes", "sharing": {"mode", "replicas"}}``."""
        return {"plugin": self.plugin, "nodes": self.nodes, "sharing": self.sharing.to_dict()}


@dataclass(frozen=True, slots=True)
class Summary:
    """The repository's GPU summary (issue §2)."""

    allocator: ActiveAllocators
    sharing: SharingSummary
    consumers: tuple[Consumer, ...]
    device_classes: tuple[str, ...]
    claim_templates: tuple[str, ...]
    #: Consumers scaled to ``replicas: 0``: deployed, asking for a GPU, holding none.
    parked: tuple[Consumer, ...] = ()
    #: Nodes the repository names as GPU nodes (the ``kubernetes.io/hostname`` nodeSelector
    #: of GPU consumers), sorted; empty when unknown.
    gpu_nodes: tuple[str, ...] = ()
    #: Which DRA stack is active (None without DRA).
    dra_stack: DraStack | None = None
    #: Whether the tree holds a cluster root (``Repo.cluster_root``).
    cluster_root: bool = True
    #: (kind, namespace, name) of what nothing in the tree deploys, taken as roots because
    #: the tree holds no cluster root; empty when it does.
    taken_roots: tuple[tuple[str, str | None, str], ...] = ()
    #: The active device plugins, each with its nodes and sharing (empty without one).
    device_plugins: tuple[PluginSharing, ...] = ()

    @property
    def gpu_stack(self) -> bool:
        """Whether the repository holds any NVIDIA GPU stack: an allocator, a GPU consumer
        (active or parked), a DeviceClass, a ResourceClaimTemplate or a named GPU node."""
        return self.allocator != "none" or any(
            (self.consumers, self.parked, self.device_classes, self.claim_templates, self.gpu_nodes)
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of ``summary`` in ``gpushift check -o json``."""
        return {
            "gpu_stack": self.gpu_stack,
            "allocator": self.allocator,
            "dra_stack": self.dra_stack,
            "sharing": self.sharing.to_dict(),
            "device_plugins": [p.to_dict() for p in self.device_plugins],
            "consumers": [c.to_dict() for c in self.consumers],
            "parked": [c.to_dict() for c in self.parked],
            "gpu_nodes": list(self.gpu_nodes),
            "device_classes": list(self.device_classes),
            "claim_templates": list(self.claim_templates),
            "roots": {
                "cluster_root": self.cluster_root,
                "taken": [{"kind": k, "namespace": ns, "name": n} for k, ns, n in self.taken_roots],
            },
        }


def _dig(values: Mapping[str, Any], keys: Sequence[str], default: Any) -> Any:
    cur: Any = values
    for k in keys:
        if not isinstance(cur, dict) or k not in cur:
            return default
        cur = cur[k]
    return cur
