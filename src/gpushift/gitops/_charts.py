"""What gpushift knows about the charts it understands: identity, defaults, top-level keys.

Defaults listed here are only those that change an outcome gpushift checks; they are merged
under the user's values so that a key the user left out reads as the chart would render it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gpushift.gitops._model import ChartId, HelmRelease

# Chart (or OCI artifact) names, lower-case, to identity. Mirrors carry the upstream name,
# sometimes with a prefix (ghcr.io/home-operations/charts-mirror/nvidia-gpu-operator).
_NAMES: tuple[tuple[str, ChartId], ...] = (
    ("dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu"),
    ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu"),  # chart name before v0.4.0
    ("k8s-dra-driver-gpu", "dra-driver-nvidia-gpu"),
    ("gpu-operator", "gpu-operator"),
    ("nvidia-device-plugin", "nvidia-device-plugin"),
    ("k8s-device-plugin", "nvidia-device-plugin"),
    ("dcgm-exporter", "dcgm-exporter"),
    ("app-template", "app-template"),
)


def chart_identity(name: str) -> ChartId:
    """The normalised identity of a chart or OCI artifact name (``other`` when unknown).

    Only the upstream names count, and the ``nvidia-`` prefix mirrors add
    (``nvidia-gpu-operator``); a chart merely ending in a known name (``my-app-template``) is
    another chart, about which nothing chart-specific is claimed.
    """
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    for key, ident in _NAMES:
        if base == key or base == "nvidia-" + key:
            return ident
    return "other"


def _freeze(d: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(d)


# kubernetes-sigs/dra-driver-nvidia-gpu@main:deployments/helm/dra-driver-nvidia-gpu/values.yaml
_DRA_DEFAULTS: dict[str, Any] = {
    "nvidiaDriverRoot": "/",
    "gpuResourcesEnabledOverride": False,
    "consumableShares": "",
    "featureGates": {},
    "resourceApiVersion": "",
    "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": True}},
}

# NVIDIA/gpu-operator@v26.7.0:deployments/gpu-operator/values.yaml
_OPERATOR_DEFAULTS: dict[str, Any] = {
    "cdi": {"enabled": True},
    "driver": {"enabled": True},
    "toolkit": {"enabled": True},
    "hostPaths": {"driverInstallDir": "/run/nvidia/driver"},
    "devicePlugin": {
        "enabled": True,
        "config": {"create": False, "name": "", "default": "", "data": {}},
    },
    "gfd": {"enabled": True},
    "dcgmExporter": {"enabled": True},
    "mig": {"strategy": "single"},
    "operator": {"runtimeClass": "nvidia", "defaultRuntime": "docker"},
    "clusterPolicy": {"deployCR": True},
    "gpuCluster": {"deployCR": False},
}

# NVIDIA/k8s-device-plugin@v0.20.0:deployments/helm/nvidia-device-plugin/values.yaml
_PLUGIN_DEFAULTS: dict[str, Any] = {
    "config": {"name": "", "map": {}, "default": "", "fallbackStrategies": ["named", "single"]},
    "migStrategy": "none",
    "nvidiaDriverRoot": "/",
    "devicePlugin": {"enabled": True},
    "gfd": {"enabled": False},
    "runtimeClassName": None,
}

# NVIDIA/dcgm-exporter@HEAD:deployment/values.yaml
_DCGM_DEFAULTS: dict[str, Any] = {
    "kubernetesDRA": {"enabled": False},
    "runtimeClassName": "",
    "resources": {},
}

_DEFAULTS: dict[ChartId, Mapping[str, Any]] = {
    "dra-driver-nvidia-gpu": _freeze(_DRA_DEFAULTS),
    "gpu-operator": _freeze(_OPERATOR_DEFAULTS),
    "nvidia-device-plugin": _freeze(_PLUGIN_DEFAULTS),
    "dcgm-exporter": _freeze(_DCGM_DEFAULTS),
}

#: The gpu-operator values the chart copies into its ClusterPolicy's spec, in the order of
#: NVIDIA/gpu-operator deployments/gpu-operator/templates/clusterpolicy.yaml.
GPU_OPERATOR_POLICY_KEYS: tuple[str, ...] = (
    "operator",
    "daemonsets",
    "validator",
    "mig",
    "psa",
    "cdi",
    "driver",
    "toolkit",
    "devicePlugin",
    "dcgm",
    "dcgmExporter",
    "gfd",
    "migManager",
    "nodeStatusExporter",
    "gds",
    "gdrcopy",
    "hostPaths",
    "sandboxWorkloads",
    "vgpuManager",
    "vfioManager",
)

_KNOWN: dict[ChartId, frozenset[str]] = {
    # kubernetes-sigs/dra-driver-nvidia-gpu@main values.yaml; plus keys the templates read
    # (maskNvidiaDriverParams) or reject on purpose (namespace, nvidiaCtkPath).
    "dra-driver-nvidia-gpu": frozenset(
        {
            "nvidiaDriverRoot",
            "nvidiaCDIHookPath",
            "altProcDevices",
            "nameOverride",
            "fullnameOverride",
            "namespaceOverride",
            "selectorLabelsOverride",
            "gpuResourcesEnabledOverride",
            "consumableShares",
            "allowDefaultNamespace",
            "resourceApiVersion",
            "imagePullSecrets",
            "image",
            "serviceAccount",
            "resources",
            "featureGates",
            "logVerbosity",
            "webhook",
            "controller",
            "kubeletPlugin",
            "maskNvidiaDriverParams",
            "namespace",
            "nvidiaCtkPath",
        }
    ),
    # NVIDIA/gpu-operator@v26.7.0 values.yaml
    "gpu-operator": frozenset(
        {
            *GPU_OPERATOR_POLICY_KEYS,
            "platform",
            "nfd",
            "vgpuDeviceManager",
            "kataManager",
            "sandboxDevicePlugin",
            "ccManager",
            "node-feature-discovery",
            "nameOverride",
            "fullnameOverride",
            "clusterPolicy",
            "gpuCluster",
            "draDriver",
        }
    ),
    # NVIDIA/k8s-device-plugin@v0.20.0 values.yaml
    "nvidia-device-plugin": frozenset(
        {
            "config",
            "legacyDaemonsetAPI",
            "compatWithCPUManager",
            "migStrategy",
            "failOnInitError",
            "deviceListStrategy",
            "deviceIDStrategy",
            "nvidiaDriverRoot",
            "gdsEnabled",
            "mofedEnabled",
            "deviceDiscoveryStrategy",
            "nameOverride",
            "fullnameOverride",
            "namespaceOverride",
            "selectorLabelsOverride",
            "allowDefaultNamespace",
            "imagePullSecrets",
            "image",
            "updateStrategy",
            "podAnnotations",
            "podSecurityContext",
            "securityContext",
            "resources",
            "nodeSelector",
            "affinity",
            "tolerations",
            "priorityClassName",
            "runtimeClassName",
            "devicePlugin",
            "gfd",
            "mps",
            "cdi",
            "nfd",
            "node-feature-discovery",
        }
    ),
    # bjw-s-labs/helm-charts common library values.yaml (app-template 4.x/5.x; the other
    # majors are in _APP_TEMPLATE_KNOWN)
    "app-template": frozenset(
        {
            "global",
            "defaultPodOptionsStrategy",
            "defaultPodOptions",
            "controllers",
            "serviceAccount",
            "secrets",
            "configMaps",
            "configMapsFromFolder",
            "service",
            "ingress",
            "route",
            "serviceMonitor",
            "networkpolicies",
            "persistence",
            "rbac",
            "rawResources",
            "enforceServiceAccountCreation",
        }
    ),
}


#: app-template's top-level values by major version, before 4.x (4.x and later: ``_KNOWN``).
#: 1.x: the common library 1.x values.yaml: one main container at the top level (``image``,
#: ``env``, ``resources``, ``securityContext``), pod fields at the top level (``nodeSelector``,
#: ``podSecurityContext``, ...), ``controller`` singular, extra containers in
#: ``additionalContainers``/``sidecars``/``initContainers`` (bjw-s/helm-charts
#: docs/app-template/upgrade-instructions.md, "From 1.x.x to 2.0.x"). Both spellings of the
#: ConfigMap and Secret maps are kept, as the 1.x line renamed them.
#: 2.x and 3.x: common 3.7.3 values.schema.json (2.x's values.yaml is a subset): ``controllers``
#: and ``defaultPodOptions``, no ``defaultPodOptionsStrategy``, ``rbac`` or
#: ``configMapsFromFolder`` yet.
_APP_TEMPLATE_KNOWN: dict[int, frozenset[str]] = {
    1: frozenset(
        {
            "global",
            "controller",
            "image",
            "command",
            "args",
            "env",
            "envFrom",
            "probes",
            "resources",
            "securityContext",
            "podSecurityContext",
            "lifecycle",
            "termination",
            "additionalContainers",
            "sidecars",
            "initContainers",
            "nodeSelector",
            "affinity",
            "tolerations",
            "topologySpreadConstraints",
            "runtimeClassName",
            "priorityClassName",
            "schedulerName",
            "hostNetwork",
            "hostPID",
            "hostIPC",
            "hostname",
            "hostAliases",
            "dnsPolicy",
            "dnsConfig",
            "enableServiceLinks",
            "automountServiceAccountToken",
            "imagePullSecrets",
            "podAnnotations",
            "podLabels",
            "serviceAccount",
            "service",
            "ingress",
            "route",
            "persistence",
            "configMaps",
            "configmap",
            "secrets",
            "secret",
            "serviceMonitor",
            "networkpolicies",
            "addons",
            "autoscaling",
            "volumeClaimTemplates",
        }
    ),
    2: frozenset(
        {
            "global",
            "defaultPodOptions",
            "controllers",
            "enforceServiceAccountCreation",
            "serviceAccount",
            "configMaps",
            "secrets",
            "ingress",
            "route",
            "service",
            "serviceMonitor",
            "networkpolicies",
            "persistence",
            "rawResources",
        }
    ),
}
_APP_TEMPLATE_KNOWN[3] = _APP_TEMPLATE_KNOWN[2]


_MAJOR = re.compile(r"^[=v~^]*\s*v?(\d+)")
#: Keys only app-template 1.x has at the top level: a tree that sets them without
#: ``controllers`` is written for 1.x.
_V1_ONLY = frozenset({"controller", "image", "podSecurityContext", "additionalContainers"})


def version_major(version: str | None) -> int | None:
    """The major version a chart version or Flux semver constraint pins, or None: ``3.7.3``,
    ``v3.7.3``, ``3.x``, ``~3.7``, ``^3.1``, ``>=3.0.0 <4.0.0`` pin 3; ``*``, ``>=3.0.0`` (the
    newest release wins) and alternatives of different majors pin none."""
    if version is None:
        return None
    majors = set()
    for alt in version.split("||"):
        tokens = [t for t in re.split(r"[\s,]+", alt.strip()) if t]
        if not tokens:
            return None
        if any(t.startswith(">") for t in tokens) and not any(t.startswith("<") for t in tokens):
            return None
        m = _MAJOR.match(tokens[0].lstrip("><"))
        if m is None:
            return None
        majors.add(int(m.group(1)))
    return majors.pop() if len(majors) == 1 else None


def app_template_major(hr: HelmRelease) -> int | None:
    """The app-template major a release uses: its chart version's, else 1 when its values are
    written in 1.x's layout (1.x-only keys and no ``controllers``), else None (unknown: the
    current layout is read)."""
    major = version_major(hr.chart_version)
    if major is not None:
        return major
    values = hr.user_values
    if "controllers" not in values and any(k in values for k in _V1_ONLY):
        return 1
    return None


def app_template_keys(major: int | None) -> frozenset[str]:
    """app-template's top-level values keys for chart major ``major``; for an unknown version
    the union of the majors with ``controllers`` (2.x and later)."""
    if major is not None and major in _APP_TEMPLATE_KNOWN:
        return _APP_TEMPLATE_KNOWN[major]
    newest = _KNOWN["app-template"]
    if major is not None:
        return newest
    return newest | _APP_TEMPLATE_KNOWN[2]


@dataclass(frozen=True, slots=True)
class AgentTolerations:
    """Where a chart takes its GPU allocator agent's pod tolerations from: the values key, what
    the agent gets when the key is not given, and whether an empty list gets that too."""

    path: tuple[str, ...]
    default: tuple[Mapping[str, Any], ...]
    empty_is_default: bool = False


_GPU_TOLERATION: Mapping[str, Any] = _freeze(
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
)
_CRITICAL_ADDONS: Mapping[str, Any] = _freeze({"key": "CriticalAddonsOnly", "operator": "Exists"})

#: The allocator agents' tolerations of the charts that deploy one: the DRA driver's kubelet
#: plugin, the standalone device plugin and the gpu-operator's device plugin.
AGENT_TOLERATIONS: Mapping[ChartId, AgentTolerations] = MappingProxyType(
    {
        # kubernetes-sigs/dra-driver-nvidia-gpu values.yaml kubeletPlugin.tolerations
        "dra-driver-nvidia-gpu": AgentTolerations(
            ("kubeletPlugin", "tolerations"), (_GPU_TOLERATION,)
        ),
        # NVIDIA/k8s-device-plugin values.yaml tolerations
        "nvidia-device-plugin": AgentTolerations(
            ("tolerations",), (_CRITICAL_ADDONS, _GPU_TOLERATION)
        ),
        # NVIDIA/gpu-operator values.yaml daemonsets.tolerations, copied into the ClusterPolicy;
        # the operator sets them on its operands only when not empty (the asset's otherwise).
        "gpu-operator": AgentTolerations(
            ("daemonsets", "tolerations"), (_GPU_TOLERATION,), empty_is_default=True
        ),
    }
)


def chart_defaults(chart: ChartId) -> Mapping[str, Any]:
    """Outcome-changing defaults of ``chart`` (empty for charts without such defaults)."""
    return _DEFAULTS.get(chart, _freeze({}))


def known_values_keys(chart: ChartId) -> frozenset[str] | None:
    """The top-level keys of ``chart``'s values.yaml, or None when gpushift does not know them
    (then no key can be called unknown)."""
    return _KNOWN.get(chart)
