"""The NVIDIA GPU Operator component (allocators ``gpu-operator``, ``dra`` and ``gpucluster``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift._sharing import Allocator
from gpushift._yamlout import Note
from gpushift.render import _common as c
from gpushift.render._config import (
    BRIDGE_DEVICE_CLASS,
    GPU_DEVICE_CLASS,
    ConsumerStyle,
    GpushiftConfig,
)
from gpushift.render._flux import (
    Files,
    api_version,
    component,
    flux_kustomization,
    helm_release,
    oci_repository,
)

#: The ServiceAccount of the operator's dcgm-exporter DaemonSet.
# Source: NVIDIA/gpu-operator assets/state-dcgm-exporter/0100_service_account.yaml.
DCGM_SERVICE_ACCOUNT = "nvidia-dcgm-exporter"
DCGM_DRA_RBAC = "nvidia-dcgm-exporter-dra"
#: Node label the driver manager clears to evict the DRA kubelet plugin during driver upgrades.
# Source: NVIDIA/cloud-native-docs gpu-operator/dra-intro-install.rst (v26.3.3).
DRA_PLUGIN_NODE_LABEL = "nvidia.com/dra-kubelet-plugin"


def render(cfg: GpushiftConfig) -> Files:
    """The gpu-operator component: OCIRepository, HelmRelease, ks.yaml and extras.

    Extras: the time-slicing ConfigMap (allocator gpu-operator with N-way sharing), the
    RuntimeClass when the operator does not create one, and under ``dra`` the RBAC that lets
    dcgm-exporter read ResourceSlices.
    """
    ns = cfg.cluster.gpu_namespace
    dra = cfg.allocator is Allocator.DRA
    app: dict[str, list[Mapping[str, Any]]] = {
        "ocirepository.yaml": [oci_repository(name=c.GPU_OPERATOR, chart=cfg.charts.gpu_operator)],
        "helmrelease.yaml": [helm_release(name=c.GPU_OPERATOR, values=_values(cfg))],
    }
    if cfg.allocator is Allocator.GPU_OPERATOR and isinstance(cfg.sharing, int):
        app["time-slicing-config.yaml"] = [
            _time_slicing_configmap(namespace=ns, replicas=cfg.sharing)
        ]
    if cfg.runtime_class and not cfg.installs_runtime_class:
        app["runtimeclass.yaml"] = [c.runtime_class(cfg.runtime_class)]
    if dra and cfg.observability.dcgm_exporter:
        app["dcgm-exporter-rbac.yaml"] = [*_dcgm_dra_rbac(ns)]
    gpucluster = cfg.allocator is Allocator.GPUCLUSTER
    if gpucluster and any(x.style is ConsumerStyle.INFERENCE_SERVICE for x in cfg.consumers):
        app["deviceclass-extended-resource.yaml"] = [bridge_device_class()]
    if gpucluster:
        health_note = (
            "Claim templates and consumers depend on this release being Ready: its GPUCluster "
            "runs the DRA driver and creates the gpu.nvidia.com DeviceClass."
        )
    elif dra:
        health_note = (
            "The DRA driver's Kustomization depends on this one; checking the HelmRelease makes "
            'that mean "the operator reconciled with devicePlugin off", not merely "applied".'
        )
    else:
        health_note = (
            "Consumers depend on this Kustomization; wait for the release, not just the apply."
        )
    ks = flux_kustomization(
        cfg=cfg,
        name=c.GPU_OPERATOR,
        namespace=ns,
        path=f"{ns}/{c.GPU_OPERATOR}/app",
        health_checks=[c.GPU_OPERATOR],
        health_note=health_note,
    )
    files = Files()
    component(files, namespace=ns, name=c.GPU_OPERATOR, app=app, ks=[ks])
    return files


def bridge_device_class() -> dict[str, Any]:
    """The DeviceClass that bridges ``nvidia.com/gpu`` to the GPUCluster's GPUs."""
    driver = GPU_DEVICE_CLASS
    return {
        "apiVersion": api_version("DeviceClass"),
        "kind": "DeviceClass",
        "metadata": {"name": BRIDGE_DEVICE_CLASS},
        "spec": {
            "extendedResourceName": Note(
                c.GPU_RESOURCE,
                "The GPUCluster's gpu.nvidia.com class maps no extended resource, so pods that "
                "still ask for nvidia.com/gpu are served from this class (DRAExtendedResource).",
            ),
            # kubernetes-sigs/dra-driver-nvidia-gpu templates/deviceclass-gpu.yaml
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{driver}' && "
                        f"device.attributes['{driver}'].type == 'gpu'"
                    }
                }
            ],
        },
    }


def _values(cfg: GpushiftConfig) -> dict[str, Any]:
    if cfg.allocator is Allocator.GPUCLUSTER:
        return _gpucluster_values(cfg)
    cluster = cfg.cluster
    dra = cfg.allocator is Allocator.DRA
    values: dict[str, Any] = {}
    if cluster.driver_is_preinstalled:
        why = (
            "Talos ships the NVIDIA driver as a system extension."
            if cluster.talos
            else "The NVIDIA driver is installed on the hosts."
        )
        values["driver"] = Note({"enabled": False}, why)
    elif dra:
        values["driver"] = {
            "enabled": True,
            "manager": {
                "env": Note(
                    [{"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": DRA_PLUGIN_NODE_LABEL}],
                    "The driver manager does not know the DRA kubelet plugin; this label is "
                    "how it evicts the plugin before a driver upgrade.",
                )
            },
        }
    if cluster.toolkit_is_preinstalled:
        why = (
            "Talos ships the container toolkit as a system extension."
            if cluster.talos
            else "The NVIDIA container toolkit is installed on the hosts."
        )
        values["toolkit"] = Note({"enabled": False}, why)
    if cluster.talos or cluster.driver_root is not None:
        root = cluster.effective_driver_root
        why = (
            f"Talos (1.13 and later) installs the driver under {root}, not at the host root; "
            "must equal the DRA driver's nvidiaDriverRoot."
            if cluster.talos
            else "Where the preinstalled driver lives; must equal the DRA driver's "
            "nvidiaDriverRoot."
        )
        values["hostPaths"] = {"driverInstallDir": Note(root, why)}
    values["cdi"] = {"enabled": cluster.cdi, "default": cluster.cdi}
    values["devicePlugin"] = _device_plugin_values(cfg)
    values["gfd"] = {"enabled": True}
    values["dcgmExporter"] = _dcgm_values(cfg)
    if cluster.gpu_nodes.tolerations:
        values["daemonsets"] = {
            "tolerations": Note(
                c.with_default_tolerations(cfg, c.OPERATOR_DEFAULT_TOLERATIONS),
                "The chart's default toleration plus the GPU nodes' taints (a list replaces "
                "the default).",
            )
        }
    return values


def _gpucluster_values(cfg: GpushiftConfig) -> dict[str, Any]:
    """gpu-operator 26.7 with its GPUCluster (DRA) stack and no ClusterPolicy.

    Source: NVIDIA/gpu-operator@v26.7.0 deployments/gpu-operator/values.yaml and
    templates/validations.yaml.
    """
    cluster = cfg.cluster
    values: dict[str, Any] = {}
    if cluster.driver_is_preinstalled:
        values["driver"] = Note({"enabled": False}, "The NVIDIA driver is installed on the hosts.")
    else:
        values["driver"] = {
            "enabled": True,
            "nvidiaDriverCRD": Note(
                {"enabled": True},
                "With a GPUCluster the driver is managed through NVIDIADriver CRs; the chart's "
                "validation fails a GPUCluster with driver.enabled but not this.",
            ),
        }
    if cluster.driver_root is not None:
        values["hostPaths"] = {"driverInstallDir": cluster.effective_driver_root}
    values["clusterPolicy"] = {
        "deployCR": Note(
            False,
            "The ClusterPolicy (device plugin stack) and the GPUCluster exclude each other; the "
            "chart refuses both.",
        )
    }
    values["gpuCluster"] = {
        "deployCR": Note(True, "The operator's own DRA stack: DRA driver, validator, DCGM.")
    }
    dra: dict[str, Any] = {}
    sharing = cfg.sharing
    if sharing != "exclusive":
        dra["featureGates"] = Note(
            {"ConsumableShares": True},
            "CONSUMABLE_SHARES needs this gate (alpha); without it the kubelet plugin exits "
            "at start.",
        )
        dra["gpus"] = {
            "kubeletPlugin": {
                "env": Note(
                    [{"name": "CONSUMABLE_SHARES", "value": str(sharing)}],
                    "The GPUCluster has no consumableShares value; the kubelet plugin reads "
                    "the env. " + _shares_why(cfg),
                )
            }
        }
    dra["computeDomains"] = Note(
        {"enabled": False},
        "Multi-node NVLink (IMEX) domains; not needed for sharing GPUs.",
    )
    values["draDriver"] = dra
    obs = cfg.observability
    dcgm: dict[str, Any] = {"enabled": obs.dcgm_exporter}
    if obs.dcgm_exporter:
        dcgm["serviceMonitor"] = {"enabled": obs.service_monitor}
    # The GPUCluster's exporter sets KUBERNETES_ENABLE_DRA and reads ResourceSlices itself.
    values["dcgmExporter"] = dcgm
    if cluster.gpu_nodes.tolerations:
        values["daemonsets"] = {
            "tolerations": Note(
                c.with_default_tolerations(cfg, c.OPERATOR_DEFAULT_TOLERATIONS),
                "The chart's default toleration plus the GPU nodes' taints (a list replaces "
                "the default).",
            )
        }
    return values


def _shares_why(cfg: GpushiftConfig) -> str:
    sharing = cfg.sharing
    if isinstance(sharing, int):
        return f"Each GPU takes {sharing} claims, as time-slicing replicas: {sharing} did."
    if sharing == "memory":
        return "Each claim takes the GPU memory it requests."
    return "Any number of claims may share a card; nothing caps them."


def _device_plugin_values(cfg: GpushiftConfig) -> dict[str, Any]:
    if cfg.allocator is Allocator.DRA:
        return {
            "enabled": Note(
                False,
                "dra-driver-nvidia-gpu advertises the GPUs instead. Two advertisers keep "
                "separate ledgers and hand out the same card twice, so this flips together "
                "with the DRA chart's resources.gpus.enabled and gpuResourcesEnabledOverride.",
            )
        }
    out: dict[str, Any] = {"enabled": True}
    if isinstance(cfg.sharing, int):
        out["config"] = Note(
            {"name": c.TIME_SLICING_CONFIGMAP, "default": c.TIME_SLICING_KEY},
            f"Time-slicing: each GPU is advertised as {cfg.sharing} nvidia.com/gpu.",
        )
    return out


def _dcgm_values(cfg: GpushiftConfig) -> dict[str, Any]:
    obs = cfg.observability
    out: dict[str, Any] = {"enabled": obs.dcgm_exporter}
    if not obs.dcgm_exporter:
        return out
    if cfg.allocator is Allocator.DRA:
        out["env"] = Note(
            [{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}],
            "Attribute GPU metrics to pods through their ResourceClaims; the operator grants "
            "no ResourceSlice access, see dcgm-exporter-rbac.yaml.",
        )
    out["serviceMonitor"] = {"enabled": obs.service_monitor}
    return out


def _time_slicing_configmap(*, namespace: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": c.TIME_SLICING_CONFIGMAP, "namespace": namespace},
        "data": {c.TIME_SLICING_KEY: c.time_slicing_config(replicas)},
    }


def _dcgm_dra_rbac(namespace: str) -> list[dict[str, Any]]:
    rbac = api_version("ClusterRole")
    role = {
        "apiVersion": rbac,
        "kind": "ClusterRole",
        "metadata": {"name": DCGM_DRA_RBAC},
        "rules": Note(
            [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceslices"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
            "dcgm-exporter maps devices to claims through ResourceSlices "
            "(KUBERNETES_ENABLE_DRA); the operator's own role covers pods only.",
        ),
    }
    binding = {
        "apiVersion": rbac,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": DCGM_DRA_RBAC},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": DCGM_DRA_RBAC,
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": DCGM_SERVICE_ACCOUNT, "namespace": namespace}
        ],
    }
    return [role, binding]
