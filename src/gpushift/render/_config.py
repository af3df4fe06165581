"""The ``gpushift.yaml`` config: one description of a cluster's GPU setup.

The pydantic model is the single definition: validation, defaults and the published JSON
Schema (``docs/gpushift.schema.json``) all come from it. Field names are camelCase, as in the
Kubernetes and Helm values the config is turned into.
"""

from __future__ import annotations

import re
from enum import StrEnum
from fractions import Fraction
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from gpushift import _quantity, _sharing
from gpushift._errors import InputError
from gpushift._sharing import Allocator, SharingMode, sharing_problem

#: The DeviceClass the DRA driver's chart creates for full GPUs.
GPU_DEVICE_CLASS = "gpu.nvidia.com"
#: Under gpucluster: a DeviceClass of gpushift's own that maps nvidia.com/gpu onto the same GPUs,
#: because the GPUCluster's gpu.nvidia.com class has no extendedResourceName.
BRIDGE_DEVICE_CLASS = "nvidia-gpu-extended-resource"
#: The first gpu-operator release with the GPUCluster (technology preview).
GPUCLUSTER_OPERATOR_VERSION = (26, 7, 0)
#: Label the GPU Operator sets on GPU nodes (from NFD's PCI labels); only it sets this label.
OPERATOR_GPU_LABEL = "nvidia.com/gpu.present"
#: NFD's label for a node with an NVIDIA (PCI vendor 10de) device.
NFD_GPU_LABEL = "feature.node.kubernetes.io/pci-10de.present"
#: Where Talos (1.13 and later) installs the NVIDIA driver system extension.
TALOS_DRIVER_ROOT = "/usr/local"
#: Where the GPU Operator's driver container exposes the driver it installs.
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"


class ConsumerStyle(StrEnum):
    """How a GPU consumer is deployed."""

    APP_TEMPLATE = "app-template"
    DEPLOYMENT = "deployment"
    INFERENCE_SERVICE = "inference-service"


#: ``gpushift._sharing.Sharing`` as the config model validates it.
Sharing = SharingMode | Annotated[int, Field(ge=1, le=_sharing.INT64_MAX)]

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: Folder and Kustomization names the renderer uses itself; consumers cannot take them.
RESERVED_NAMES = frozenset(
    {
        "gpu-operator",
        "dra-driver-nvidia-gpu",
        "nvidia-device-plugin",
        "dcgm-exporter",
        "gpu-claim-templates",
        "llmkube",
        "llmkube-models",
        "kustomization",
        "namespace",
    }
)
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )


class Toleration(_Model):
    """A pod toleration (core/v1 Toleration), e.g. for a ``dedicated=ai:NoSchedule`` taint."""

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The toleration as Kubernetes writes it (unset fields left out)."""
        out: dict[str, Any] = {}
        if self.key is not None:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value is not None:
            out["value"] = self.value
        if self.effect is not None:
            out["effect"] = self.effect
        return out


class GpuModel(_Model):
    """The GPU model fitted in every GPU node."""

    product: str = Field(default="NVIDIA L4", description="Product name as NVML reports it.")
    memory: str = Field(
        default="23034Mi", description="Memory per GPU as NVML reports it (a quantity)."
    )
    per_node: int = Field(default=1, ge=1, description="GPUs per node.")

    @field_validator("memory")
    @classmethod
    def _is_quantity(cls, value: str) -> str:
        try:
            _quantity.parse(value)
        except InputError as err:
            raise ValueError(err.message) from None
        return value


class GpuNodes(_Model):
    """How GPU nodes are recognised and what they need tolerated."""

    label: str | None = Field(
        default=None,
        description=(
            'Node label (value "true") consumers select on. Default: nvidia.com/gpu.present '
            "where the GPU Operator runs (it sets that label), NFD's "
            "feature.node.kubernetes.io/pci-10de.present with the standalone device plugin."
        ),
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        description="Tolerations for the GPU nodes' taints, given to the GPU stack and consumers.",
    )
    names: list[str] = Field(default_factory=list, description="GPU node names (informative).")
    gpu: GpuModel = Field(default_factory=lambda: GpuModel())


class FluxSource(_Model):
    """The Flux source every rendered Kustomization reads from."""

    kind: Literal["GitRepository", "OCIRepository", "Bucket"] = "GitRepository"
    name: str = "flux-system"
    namespace: str = "flux-system"


class Cluster(_Model):
    """The cluster the manifests are for."""

    talos: bool = Field(
        default=False, description="Talos Linux nodes (driver and toolkit from extensions)."
    )
    preinstalled_driver: bool | None = Field(
        default=None,
        description="The NVIDIA driver is on the host. Default: true on Talos, else false.",
    )
    preinstalled_toolkit: bool | None = Field(
        default=None,
        description="nvidia-container-toolkit is on the host. Default: as preinstalledDriver.",
    )
    driver_root: str | None = Field(
        default=None,
        description=(
            "Host path of the driver installation. Default: /usr/local on Talos, / for another "
            "preinstalled driver, /run/nvidia/driver for the operator's driver."
        ),
    )
    cdi: bool = Field(default=True, description="Container Device Interface in gpu-operator.")
    runtime_class_name: str | None = Field(
        default="nvidia", description="RuntimeClass of GPU pods; null to leave it unset."
    )
    gpu_namespace: str = Field(default="gpu-operator", pattern=_DNS_LABEL)
    apps_path: str = Field(
        default="./kubernetes/apps",
        pattern=r"^(\./)?[A-Za-z0-9_-][A-Za-z0-9._/-]*$",
        description="Repository path of the apps tree, relative to the repository root.",
    )
    source: FluxSource = Field(default_factory=lambda: FluxSource())
    flux_namespace: str | None = Field(
        default=None,
        pattern=_DNS_LABEL,
        description=(
            "Namespace of every rendered Flux Kustomization, for trees that keep them all in "
            "one (flux-system); their targetNamespace stays the app's. Default: each app's own "
            "namespace."
        ),
    )
    gpu_nodes: GpuNodes = Field(default_factory=lambda: GpuNodes())

    @field_validator("apps_path")
    @classmethod
    def _inside_repository(cls, value: str) -> str:
        parts = value.removeprefix("./").rstrip("/").split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"must be a relative path inside the repository, got {value!r}")
        return value

    @property
    def driver_is_preinstalled(self) -> bool:
        """Whether the host provides the driver (so gpu-operator must not install one)."""
        return self.talos if self.preinstalled_driver is None else self.preinstalled_driver

    @property
    def toolkit_is_preinstalled(self) -> bool:
        """Whether the host provides the container toolkit."""
        if self.preinstalled_toolkit is None:
            return self.driver_is_preinstalled
        return self.preinstalled_toolkit

    @property
    def effective_driver_root(self) -> str:
        """The driver root the DRA driver and gpu-operator are given."""
        if self.driver_root is not None:
            return self.driver_root
        if self.talos:
            return TALOS_DRIVER_ROOT
        return "/" if self.driver_is_preinstalled else OPERATOR_DRIVER_ROOT


class Consumer(_Model):
    """A workload that uses GPUs."""

    namespace: str = Field(pattern=_DNS_LABEL)
    name: str = Field(pattern=_DNS_LABEL)
    style: ConsumerStyle
    image: str = Field(
        default="ghcr.io/example/app:latest",
        description="Container image, repository:tag[@digest].",
    )
    gpus: int = Field(default=1, ge=1, description="GPUs (or shares) per pod.")
    model: str | None = Field(
        default=None,
        description="inference-service: the llmkube Model source (e.g. hf://org/repo).",
    )


class Observability(_Model):
    """GPU metrics."""

    dcgm_exporter: bool = True
    service_monitor: bool = Field(
        default=True, description="A prometheus-operator ServiceMonitor for dcgm-exporter."
    )


def _chart_schema(schema: dict[str, Any]) -> None:
    # In a config file either field may be left out: Charts fills in that chart's default.
    schema.pop("required", None)


class Chart(_Model):
    """Where a Helm chart comes from (an OCI artifact) and which version."""

    model_config = ConfigDict(json_schema_extra=_chart_schema)

    url: str = Field(pattern=r"^oci://")
    version: str = Field(pattern=r"^v?\d+\.\d+(\.\d+)?([-+].*)?$")

    def version_tuple(self) -> tuple[int, int, int]:
        """``(major, minor, patch)`` of the version."""
        nums = re.findall(r"\d+", self.version.split("-")[0].split("+")[0])
        parts = [int(n) for n in nums[:3]] + [0, 0, 0]
        return (parts[0], parts[1], parts[2])


class Charts(_Model):
    """Chart sources and versions; each defaults to a current release."""

    gpu_operator: Chart = Chart(
        url="oci://ghcr.io/home-operations/charts-mirror/nvidia-gpu-operator", version="26.3.3"
    )
    dra_driver: Chart = Chart(
        url="oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu", version="0.5.0"
    )
    device_plugin: Chart = Chart(
        url="oci://ghcr.io/home-operations/charts-mirror/nvidia-device-plugin", version="0.19.3"
    )
    dcgm_exporter: Chart = Chart(
        url="oci://ghcr.io/home-operations/charts-mirror/dcgm-exporter", version="4.8.3"
    )
    app_template: Chart = Chart(url="oci://ghcr.io/bjw-s-labs/helm/app-template", version="5.3.0")
    llmkube: Chart = Chart(url="oci://ghcr.io/defilantech/charts/llmkube", version="0.9.19")

    @model_validator(mode="before")
    @classmethod
    def _partial_charts(cls, data: Any) -> Any:
        # A chart given with only a version (or only a URL) keeps the default for the other.
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, field in cls.model_fields.items():
            key = field.alias or name
            given = out.get(key, out.get(name))
            default = field.default
            if isinstance(given, dict) and isinstance(default, Chart):
                merged = {"url": default.url, "version": default.version, **given}
                out[key if key in out else name] = merged
        return out


class GpushiftConfig(_Model):
    """A ``gpushift.yaml`` file."""

    model_config = ConfigDict(title="gpushift.yaml")

    cluster: Cluster = Field(default_factory=lambda: Cluster())
    allocator: Allocator
    sharing: Sharing = Field(
        default="exclusive",
        description=(
            "exclusive, N (time-slicing replicas or consumable shares), memory or unlimited "
            "(the last two: DRA only)."
        ),
    )
    memory_per_claim: str | None = Field(
        default=None,
        description="GPU memory each claim asks for under sharing memory (a quantity).",
    )
    consumers: list[Consumer] = Field(default_factory=list)
    observability: Observability = Field(default_factory=lambda: Observability())
    charts: Charts = Field(default_factory=lambda: Charts())

    @model_validator(mode="before")
    @classmethod
    def _device_plugin_hosts_have_the_driver(cls, data: Any) -> Any:
        # Without gpu-operator nothing installs a driver, so the hosts must already have one.
        if not isinstance(data, dict) or data.get("allocator") != Allocator.DEVICE_PLUGIN.value:
            return data
        cluster = data.get("cluster")
        if cluster is None:
            return {**data, "cluster": {"preinstalledDriver": True}}
        given = isinstance(cluster, dict) and (
            "preinstalledDriver" in cluster or "preinstalled_driver" in cluster
        )
        if isinstance(cluster, dict) and not given:
            return {**data, "cluster": {**cluster, "preinstalledDriver": True}}
        return data

    @property
    def uses_operator(self) -> bool:
        """Whether gpu-operator is part of the stack (allocators gpu-operator and dra)."""
        return self.allocator is not Allocator.DEVICE_PLUGIN

    @property
    def gpu_label(self) -> str:
        """The node label consumers select GPU nodes by."""
        if self.cluster.gpu_nodes.label is not None:
            return self.cluster.gpu_nodes.label
        return OPERATOR_GPU_LABEL if self.uses_operator else NFD_GPU_LABEL

    @property
    def runtime_class(self) -> str | None:
        """The RuntimeClass GPU pods name. Under gpucluster none unless the config names one:
        the GPUCluster runs no container toolkit, and the DRA driver injects devices through
        CDI without a runtime handler."""
        if self.allocator is Allocator.GPUCLUSTER and (
            "runtime_class_name" not in self.cluster.model_fields_set
        ):
            return None
        return self.cluster.runtime_class_name

    @property
    def installs_runtime_class(self) -> bool:
        """Whether gpu-operator creates the RuntimeClass itself (its toolkit does; the toolkit
        is a ClusterPolicy operand, which a GPUCluster does not manage)."""
        return (
            self.uses_operator
            and self.allocator is not Allocator.GPUCLUSTER
            and not self.cluster.toolkit_is_preinstalled
        )

    @model_validator(mode="after")
    def _combinations(self) -> Self:
        problems = _combination_problems(self)
        if problems:
            # One line per problem, each "field: why"; the loader splits them again.
            raise ValueError("\n".join(problems))
        return self


def _combination_problems(cfg: GpushiftConfig) -> list[str]:
    """Every reason the combination of fields is invalid, as ``field: why`` lines."""
    problems: list[str] = []
    sharing = cfg.sharing
    dra = cfg.allocator.is_dra
    problem = sharing_problem(allocator=cfg.allocator, sharing=sharing)
    if problem is not None:
        problems.append(problem)
    if (
        cfg.allocator is Allocator.DRA
        and sharing != "exclusive"
        and cfg.charts.dra_driver.version_tuple() < (0, 5, 0)
    ):
        problems.append(
            f"charts.draDriver.version: consumable shares need dra-driver-nvidia-gpu 0.5.0 or "
            f"later, got {cfg.charts.dra_driver.version}"
        )
    app_template_users = any(c.style is ConsumerStyle.APP_TEMPLATE for c in cfg.consumers)
    if dra and app_template_users and cfg.charts.app_template.version_tuple() < (5, 0, 0):
        problems.append(
            f"charts.appTemplate.version: app-template {cfg.charts.app_template.version} "
            "has no pod.resourceClaims; DRA consumers need 5.0.0 or later"
        )
    if cfg.allocator is Allocator.GPUCLUSTER:
        problems.extend(_gpucluster_problems(cfg))
    if cfg.cluster.talos and cfg.cluster.driver_root not in (None, TALOS_DRIVER_ROOT):
        problems.append(
            f"cluster.driverRoot: Talos installs the NVIDIA driver under {TALOS_DRIVER_ROOT}, "
            f"got {cfg.cluster.driver_root}"
        )
    if cfg.cluster.talos and cfg.cluster.preinstalled_driver is False:
        problems.append(
            "cluster.preinstalledDriver: Talos provides the driver as a system extension; "
            "gpu-operator cannot install one on Talos"
        )
    if not cfg.uses_operator and cfg.cluster.gpu_nodes.label == OPERATOR_GPU_LABEL:
        problems.append(
            f"cluster.gpuNodes.label: {OPERATOR_GPU_LABEL} is set by the GPU Operator, which "
            f"allocator device-plugin does not run; select on {NFD_GPU_LABEL} (NFD) instead"
        )
    if not cfg.uses_operator and not cfg.cluster.driver_is_preinstalled:
        problems.append(
            "cluster.preinstalledDriver: the standalone device plugin installs no driver; "
            "use allocator gpu-operator or dra to have one installed"
        )
    problems.extend(_consumer_problems(cfg))
    problems.extend(_memory_problems(cfg))
    return problems


def _gpucluster_problems(cfg: GpushiftConfig) -> list[str]:
    problems: list[str] = []
    version = cfg.charts.gpu_operator.version_tuple()
    if version < GPUCLUSTER_OPERATOR_VERSION:
        problems.append(
            "charts.gpuOperator.version: the GPUCluster needs gpu-operator 26.7.0 or later, got "
            f"{cfg.charts.gpu_operator.version}"
        )
    # nicolerenee/infra#2394: the GPUCluster's DRA driver got no driverInstallDir.
    why = "the GPUCluster derives the driver root from the validator, which assumes /"
    if cfg.cluster.talos:
        problems.append(
            f"cluster.talos: Talos installs the NVIDIA driver under {TALOS_DRIVER_ROOT}, and "
            f"{why}; use allocator dra, whose nvidiaDriverRoot can say so"
        )
    elif cfg.cluster.driver_is_preinstalled and cfg.cluster.effective_driver_root != "/":
        problems.append(
            f"cluster.driverRoot: the driver is preinstalled under "
            f"{cfg.cluster.effective_driver_root}, and {why}; use allocator dra"
        )
    return problems


def _consumer_problems(cfg: GpushiftConfig) -> list[str]:
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(cfg.consumers):
        where = f"consumers[{i}]"
        if c.name in RESERVED_NAMES:
            problems.append(
                f"{where}.name: {c.name!r} is the name of a component gpushift renders itself"
            )
        if (c.namespace, c.name) in seen:
            problems.append(f"{where}.name: {c.namespace}/{c.name} is listed twice")
        seen.add((c.namespace, c.name))
        if c.style is ConsumerStyle.INFERENCE_SERVICE and not c.model:
            problems.append(f"{where}.model: an inference-service needs the Model source")
        if cfg.allocator.is_dra and c.style is not ConsumerStyle.INFERENCE_SERVICE and c.gpus != 1:
            problems.append(
                f"{where}.gpus: under {cfg.allocator.value} each pod gets one claim from the "
                "namespace's any-nvidia-gpu template, which asks for one device; got {c.gpus}"
            )
    return problems


def _memory_problems(cfg: GpushiftConfig) -> list[str]:
    problems: list[str] = []
    if cfg.memory_per_claim is not None:
        try:
            wanted = _quantity.parse(cfg.memory_per_claim)
        except InputError as err:
            return [f"memoryPerClaim: {err.message}"]
        card = _card_memory(cfg)
        if wanted <= 0:
            problems.append(f"memoryPerClaim: must be positive, got {cfg.memory_per_claim}")
        elif card is not None and wanted > card:
            problems.append(
                f"memoryPerClaim: {cfg.memory_per_claim} is more than one GPU has "
                f"({cfg.cluster.gpu_nodes.gpu.memory})"
            )
    if cfg.allocator.is_dra and cfg.sharing == "memory":
        if cfg.memory_per_claim is None:
            problems.append(
                "memoryPerClaim: sharing memory needs the GPU memory each claim asks for; "
                "without it every claim takes the whole card"
            )
        for i, c in enumerate(cfg.consumers):
            if c.style is ConsumerStyle.INFERENCE_SERVICE:
                problems.append(
                    f"consumers[{i}].style: {c.namespace}/{c.name} is an llmkube "
                    "inference-service, served by bridging nvidia.com/gpu, which cannot ask "
                    "for memory, so under sharing memory it would take a whole card"
                )
    return problems


def _card_memory(cfg: GpushiftConfig) -> Fraction | None:
    try:
        return _quantity.parse(cfg.cluster.gpu_nodes.gpu.memory)
    except InputError:
        return None
