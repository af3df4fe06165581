"""The GPU Operator: its chart (ClusterPolicy and the operator Deployment) and the operands the
operator renders from the ClusterPolicy (device plugin, GFD, dcgm-exporter, validator,
RuntimeClass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift.common import Obj
from gpushift.common import as_dict as d
from gpushift.engine import nvidia_device_classes
from gpushift.gitops import GPU_OPERATOR_POLICY_KEYS
from gpushift_twin.charts._common import (
    ChartError,
    Rendered,
    daemonset,
    env_list,
    extra_env,
    get,
    helm_labels,
    operand_tolerations,
)
from gpushift_twin.charts._device_plugin import PLUGIN_IMAGE, VALIDATOR_IMAGE, operand_daemonset
from gpushift_twin.charts._dra import kubelet_plugin

OPERATOR_IMAGE = "nvcr.io/nvidia/gpu-operator:v25.10.1"
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.6.0-ubuntu22.04"
#: NVIDIA/gpu-operator deployments/gpu-operator/templates/clusterpolicy.yaml
POLICY_NAME = "cluster-policy"
#: NVIDIA/gpu-operator assets/*: operand DaemonSet names.
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
DRIVER = "nvidia-driver-daemonset"
TOOLKIT = "nvidia-container-toolkit-daemonset"
DRIVER_IMAGE = "nvcr.io/nvidia/driver:580.95.05"
TOOLKIT_IMAGE = "nvcr.io/nvidia/k8s/container-toolkit:v1.18.0"
DRIVER_MANAGER_IMAGE = "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.9.0"
GFD = "gpu-feature-discovery"
DCGM_EXPORTER = "nvidia-dcgm-exporter"
VALIDATOR = "nvidia-operator-validator"
#: NVIDIA/gpu-operator v26.7.0 (nvidia.md §6.4): the GPUCluster singleton and its operands.
GPU_CLUSTER_NAME = "gpu-cluster"
GPU_CLUSTER_FINALIZER = "nvidia.com/gpu-cluster"
DRA_KUBELET_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
DCGM_EXPORTER_DRA = "nvidia-dcgm-exporter-dra"
DCGM_EXPORTER_DRA_ROLE = "nvidia-dcgm-exporter-dra-read-pods"
DRA_DRIVER_IMAGE = "nvcr.io/nvidia/dra-driver-nvidia-gpu:v0.5.0"
#: The chart values the GPUCluster spec carries (the DRA stack's operands).
GPU_CLUSTER_KEYS = ("operator", "daemonsets", "validator", "dcgm", "dcgmExporter", "draDriver")
#: controllers: the DRA stack's node deploy labels (nvidia.md §6.4).
GPU_CLUSTER_DEPLOY_LABELS = (
    "nvidia.com/gpu.deploy.dra-driver",
    "nvidia.com/gpu.deploy.dcgm-exporter-dra",
)


def render(*, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """The gpu-operator chart: the operator Deployment and (``clusterPolicy.deployCR``) the
    ClusterPolicy ``cluster-policy`` carrying the operand values."""
    chart = "gpu-operator"
    labels = helm_labels(name=chart, release=release, chart=chart, version="v25.10.1")
    objects: list[Obj] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "gpu-operator", "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/component": "gpu-operator"}},
                "template": {
                    "metadata": {
                        "labels": {**labels, "app.kubernetes.io/component": "gpu-operator"}
                    },
                    "spec": {
                        "serviceAccountName": "gpu-operator",
                        "priorityClassName": "system-node-critical",
                        "containers": [
                            {
                                "name": "gpu-operator",
                                "image": OPERATOR_IMAGE,
                                "command": ["gpu-operator"],
                                "args": ["--leader-elect", "--zap-time-encoding=epoch"],
                                "env": env_list({"OPERATOR_NAMESPACE": namespace}),
                            }
                        ],
                    },
                },
            },
        }
    ]
    objects += _config_maps(namespace=namespace, values=values, labels=labels)
    if get(values, "clusterPolicy", "deployCR", default=True) is not False:
        spec = {
            k: values[k] for k in GPU_OPERATOR_POLICY_KEYS if isinstance(values.get(k), Mapping)
        }
        objects.append(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": POLICY_NAME, "labels": labels},
                "spec": spec,
            }
        )
    if get(values, "gpuCluster", "deployCR", default=False) is True:
        _validate_gpu_cluster(values)
        objects.append(
            {
                "apiVersion": "nvidia.com/v1alpha1",
                "kind": "GPUCluster",
                "metadata": {"name": GPU_CLUSTER_NAME, "labels": labels},
                "spec": {
                    k: values[k] for k in GPU_CLUSTER_KEYS if isinstance(values.get(k), Mapping)
                },
            }
        )
    return Rendered(objects)


def _validate_gpu_cluster(values: Mapping[str, Any]) -> None:
    """templates/validations.yaml (v26.7.0) for a GPUCluster: not beside a ClusterPolicy, and
    an operator-installed driver only through an NVIDIADriver CR (nvidia.md §6.1)."""
    if get(values, "clusterPolicy", "deployCR", default=True) is not False:
        raise ChartError(
            "execution error at (gpu-operator/templates/validations.yaml): clusterPolicy.deployCR "
            "and gpuCluster.deployCR cannot both be true: a cluster has either a ClusterPolicy "
            "or a GPUCluster"
        )
    if get(values, "driver", "enabled", default=True) is not False and (
        get(values, "driver", "nvidiaDriverCRD", "enabled", default=False) is not True
    ):
        raise ChartError(
            "execution error at (gpu-operator/templates/validations.yaml): a GPUCluster with "
            "driver.enabled needs driver.nvidiaDriverCRD.enabled"
        )


def _config_maps(*, namespace: str, values: Mapping[str, Any], labels: Obj) -> list[Obj]:
    """The ConfigMaps the chart creates from its values: ``devicePlugin.config``
    (templates/plugin_config.yaml) and ``migManager.config`` (templates/mig_config.yaml),
    each when ``create`` is set and ``data`` is not empty, named by ``name``."""
    out: list[Obj] = []
    plugin = d(get(values, "devicePlugin", "config", default={}))
    if plugin.get("create") is True and plugin.get("data"):
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": str(plugin.get("name") or ""), "namespace": namespace},
                # toYaml of the values as given: a data map of the configs' YAML texts.
                "data": plugin["data"],
            }
        )
    mig = d(get(values, "migManager", "config", default={}))
    if mig.get("create") is True and mig.get("data"):
        body = str(mig["data"]).strip("\n")
        indented = "\n".join(f"  {line}" if line else line for line in body.splitlines())
        out.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": str(mig.get("name") or ""),
                    "namespace": namespace,
                    "labels": dict(labels),
                },
                "data": {"config.yaml": f"version: v1\nmig-configs:\n{indented}\n"},
            }
        )
    return out


def _enabled(spec: Mapping[str, Any], key: str, default: bool = True) -> bool:
    return get(spec, key, "enabled", default=default) is not False


def _gfd(*, namespace: str, spec: Mapping[str, Any], runtime_class: str | None) -> Obj:
    config = d(get(spec, "devicePlugin", "config", default={}))
    env = {"GFD_SLEEP_INTERVAL": "60s", "GFD_FAIL_ON_INIT_ERROR": "true"}
    pod: Obj = {
        "nodeSelector": {"nvidia.com/gpu.deploy.gpu-feature-discovery": "true"},
        "tolerations": operand_tolerations(spec),
        "priorityClassName": "system-node-critical",
        "serviceAccountName": "nvidia-gpu-feature-discovery",
        "containers": [
            {
                "name": "gpu-feature-discovery",
                "image": PLUGIN_IMAGE,
                "command": ["gpu-feature-discovery"],
                "env": [*env_list(env), *extra_env(get(spec, "gfd", "env"))],
            }
        ],
    }
    if config.get("name"):
        # handleDevicePluginConfig runs for GFD whether or not the device plugin is enabled.
        cm = str(config["name"])
        pod["containers"][0]["env"].append({"name": "CONFIG_FILE", "value": "/config/config.yaml"})
        pod["containers"][0]["env"].append(
            {"name": "DEFAULT_CONFIG", "value": str(config.get("default") or "")}
        )
        pod["volumes"] = [{"name": "available-configs", "configMap": {"name": cm}}]
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    return daemonset(
        name=GFD, namespace=namespace, labels={"app": GFD}, selector={"app": GFD}, pod_spec=pod
    )


def _dcgm_exporter(*, namespace: str, spec: Mapping[str, Any], runtime_class: str | None) -> Obj:
    env = {
        "DCGM_EXPORTER_LISTEN": ":9400",
        "DCGM_EXPORTER_KUBERNETES": "true",
        "DCGM_EXPORTER_COLLECTORS": "/etc/dcgm-exporter/dcp-metrics-included.csv",
    }
    pod: Obj = {
        "nodeSelector": {"nvidia.com/gpu.deploy.dcgm-exporter": "true"},
        "tolerations": operand_tolerations(spec),
        "priorityClassName": "system-node-critical",
        "serviceAccountName": DCGM_EXPORTER,
        "containers": [
            {
                "name": DCGM_EXPORTER,
                "image": DCGM_EXPORTER_IMAGE,
                "env": [*env_list(env), *extra_env(get(spec, "dcgmExporter", "env"))],
                "ports": [{"name": "metrics", "containerPort": 9400}],
            }
        ],
    }
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    return daemonset(
        name=DCGM_EXPORTER,
        namespace=namespace,
        labels={"app": DCGM_EXPORTER},
        selector={"app": DCGM_EXPORTER},
        pod_spec=pod,
    )


def _driver(*, namespace: str, spec: Mapping[str, Any]) -> Obj:
    """``nvidia-driver-daemonset`` (assets/state-driver): k8s-driver-manager first, which on
    a node whose driver is already on the host labels it ``nvidia.com/gpu.deploy.driver=
    pre-installed`` and so takes the node out of this DaemonSet."""
    pod: Obj = {
        "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
        "tolerations": operand_tolerations(spec),
        "priorityClassName": "system-node-critical",
        "serviceAccountName": "nvidia-driver",
        "initContainers": [
            {
                "name": "k8s-driver-manager",
                "image": DRIVER_MANAGER_IMAGE,
                "command": ["driver-manager"],
                "args": ["uninstall_driver"],
            }
        ],
        "containers": [
            {
                "name": "nvidia-driver-ctr",
                "image": DRIVER_IMAGE,
                "command": ["nvidia-driver"],
                "args": ["init"],
                "securityContext": {"privileged": True},
            }
        ],
    }
    return daemonset(
        name=DRIVER,
        namespace=namespace,
        labels={"app": DRIVER},
        selector={"app": DRIVER},
        pod_spec=pod,
    )


def _toolkit(*, namespace: str, spec: Mapping[str, Any], runtime_class: str | None) -> Obj:
    """``nvidia-container-toolkit-daemonset`` (assets/state-container-toolkit): waits for the
    driver (``driver-validation``), then installs the runtime and writes ``toolkit-ready``."""
    pod: Obj = {
        "nodeSelector": {"nvidia.com/gpu.deploy.container-toolkit": "true"},
        "tolerations": operand_tolerations(spec),
        "priorityClassName": "system-node-critical",
        "serviceAccountName": "nvidia-container-toolkit",
        "initContainers": [
            {
                "name": "driver-validation",
                "image": VALIDATOR_IMAGE,
                "command": ["sh", "-c"],
                "args": ["nvidia-validator"],
                "env": env_list({"COMPONENT": "driver"}),
            }
        ],
        "containers": [
            {
                "name": "nvidia-container-toolkit-ctr",
                "image": TOOLKIT_IMAGE,
                "command": ["/bin/bash", "-c"],
                "args": ["nvidia-toolkit"],
                "env": [*extra_env(get(spec, "toolkit", "env"))],
                "securityContext": {"privileged": True},
            }
        ],
    }
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    return daemonset(
        name=TOOLKIT,
        namespace=namespace,
        labels={"app": TOOLKIT},
        selector={"app": TOOLKIT},
        pod_spec=pod,
    )


def _validator(*, namespace: str, spec: Mapping[str, Any], runtime_class: str | None) -> Obj:
    inits = ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]
    if not _enabled(spec, "devicePlugin"):
        # object_controls.go: the plugin init container goes with the device plugin.
        inits.remove("plugin-validation")
    pod: Obj = {
        "nodeSelector": {"nvidia.com/gpu.deploy.operator-validator": "true"},
        "tolerations": operand_tolerations(spec),
        "priorityClassName": "system-node-critical",
        "serviceAccountName": VALIDATOR,
        "initContainers": [
            {
                "name": n,
                "image": VALIDATOR_IMAGE,
                "command": ["sh", "-c"],
                "args": [f"nvidia-validator --component={n.removesuffix('-validation')}"],
            }
            for n in inits
        ],
        "containers": [
            {
                "name": VALIDATOR,
                "image": VALIDATOR_IMAGE,
                "command": ["sh", "-c"],
                "args": ["echo all validations are successful; sleep infinity"],
            }
        ],
    }
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    return daemonset(
        name=VALIDATOR,
        namespace=namespace,
        labels={"app": VALIDATOR},
        selector={"app": VALIDATOR},
        pod_spec=pod,
    )


def operands(
    *, namespace: str, spec: Mapping[str, Any], service_monitors: bool
) -> tuple[list[Obj], list[tuple[str, str]]]:
    """What the operator deploys for a ClusterPolicy ``spec``, and the operand DaemonSets a
    disabled state deletes (``(kind, name)``).

    The RuntimeClass ``operator.runtimeClass`` comes from the pre-requisites state, which is
    always on; the ServiceMonitor only when its CRD is served (``service_monitors``).
    """
    runtime_class = str(get(spec, "operator", "runtimeClass", default="nvidia") or "") or None
    want: list[Obj] = []
    gone: list[tuple[str, str]] = []
    if runtime_class:
        want.append(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": runtime_class},
                "handler": "nvidia",
            }
        )
    # driver.enabled and toolkit.enabled default to true (deployments/gpu-operator values.yaml).
    if _enabled(spec, "driver"):
        want.append(_driver(namespace=namespace, spec=spec))
    else:
        gone.append(("DaemonSet", DRIVER))
    if _enabled(spec, "toolkit"):
        want.append(_toolkit(namespace=namespace, spec=spec, runtime_class=runtime_class))
    else:
        gone.append(("DaemonSet", TOOLKIT))
    want.append(_validator(namespace=namespace, spec=spec, runtime_class=runtime_class))
    if _enabled(spec, "devicePlugin"):
        want.append(operand_daemonset(namespace=namespace, spec=spec, runtime_class=runtime_class))
    else:
        gone.append(("DaemonSet", DEVICE_PLUGIN))
    if _enabled(spec, "gfd"):
        want.append(_gfd(namespace=namespace, spec=spec, runtime_class=runtime_class))
    else:
        gone.append(("DaemonSet", GFD))
    if _enabled(spec, "dcgmExporter"):
        want.append(_dcgm_exporter(namespace=namespace, spec=spec, runtime_class=runtime_class))
        want.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": DCGM_EXPORTER,
                    "namespace": namespace,
                    "labels": {"app": DCGM_EXPORTER},
                },
                "spec": {
                    "selector": {"app": DCGM_EXPORTER},
                    "ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400}],
                },
            }
        )
        if service_monitors and get(spec, "dcgmExporter", "serviceMonitor", "enabled"):
            want.append(
                {
                    "apiVersion": "monitoring.coreos.com/v1",
                    "kind": "ServiceMonitor",
                    "metadata": {"name": DCGM_EXPORTER, "namespace": namespace},
                    "spec": {
                        "selector": {"matchLabels": {"app": DCGM_EXPORTER}},
                        "endpoints": [{"port": "gpu-metrics", "path": "/metrics"}],
                    },
                }
            )
    else:
        gone += [("DaemonSet", DCGM_EXPORTER), ("Service", DCGM_EXPORTER)]
    return want, gone


def gpu_cluster_operands(*, namespace: str, spec: Mapping[str, Any]) -> list[Obj]:
    """What the operator deploys for a GPUCluster ``spec``: the DRA driver's DeviceClasses
    (``gpu.nvidia.com`` without ``extendedResourceName``), its kubelet plugin and a
    dcgm-exporter that attributes metrics through ResourceSlices. No device plugin, GFD or
    toolkit (nvidia.md §6.4, field-2026.md §3)."""
    dra = d(spec.get("draDriver"))
    classes: list[Obj] = []
    for cls in nvidia_device_classes(api_version="resource.k8s.io/v1"):
        obj = dict(cls)
        obj["spec"] = {k: v for k, v in d(obj.get("spec")).items() if k != "extendedResourceName"}
        classes.append(obj)
    # The standalone chart's kubelet plugin, with the values the operator passes it: the
    # driver root the validator assumes, the GPUCluster's gates and env, its own node label.
    values: Obj = {
        "nameOverride": DRA_KUBELET_PLUGIN.removesuffix("-kubelet-plugin"),
        "nvidiaDriverRoot": "/",
        "featureGates": d(dra.get("featureGates")),
        "kubeletPlugin": {
            "nodeSelector": {GPU_CLUSTER_DEPLOY_LABELS[0]: "true"},
            "tolerations": operand_tolerations(spec),
            "containers": {"gpus": {"env": get(dra, "gpus", "kubeletPlugin", "env", default=[])}},
        },
    }
    plugin = kubelet_plugin(namespace=namespace, values=values)
    plugin["metadata"]["labels"] = {"app": DRA_KUBELET_PLUGIN}
    pod = plugin["spec"]["template"]["spec"]
    pod["serviceAccountName"] = DRA_KUBELET_PLUGIN
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        c["image"] = str(dra.get("image") or DRA_DRIVER_IMAGE)
        for e in c.get("env") or []:
            if e.get("name") == "IMAGE_NAME":
                e["value"] = c["image"]
    exporter = _dcgm_exporter(namespace=namespace, spec=spec, runtime_class=None)
    exporter["metadata"]["name"] = DCGM_EXPORTER_DRA
    exporter["metadata"]["labels"] = {"app": DCGM_EXPORTER_DRA}
    exporter["spec"]["selector"] = {"matchLabels": {"app": DCGM_EXPORTER_DRA}}
    epod = exporter["spec"]["template"]
    epod["metadata"]["labels"] = {"app": DCGM_EXPORTER_DRA}
    epod["spec"]["nodeSelector"] = {GPU_CLUSTER_DEPLOY_LABELS[1]: "true"}
    epod["spec"]["serviceAccountName"] = DCGM_EXPORTER_DRA
    # internal/state/testdata/golden/gpucluster-dcgm-exporter-*.yaml (nvidia.md §6.5).
    epod["spec"]["containers"][0]["env"].append({"name": "KUBERNETES_ENABLE_DRA", "value": "true"})
    # The ClusterRole of internal/state's GPUCluster dcgm-exporter assets (nvidia.md §6.5).
    role: Obj = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": DCGM_EXPORTER_DRA_ROLE},
        "rules": [
            {
                "apiGroups": ["", "resource.k8s.io"],
                "resources": ["pods", "resourceslices"],
                "verbs": ["get", "list", "watch"],
            }
        ],
    }
    binding: Obj = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": DCGM_EXPORTER_DRA_ROLE},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": DCGM_EXPORTER_DRA_ROLE,
        },
        "subjects": [{"kind": "ServiceAccount", "name": DCGM_EXPORTER_DRA, "namespace": namespace}],
    }
    return [*classes, plugin, exporter, role, binding]


def gpu_cluster_operand_names() -> list[tuple[str, str, bool]]:
    """``(kind, name, namespaced)`` of what :func:`gpu_cluster_operands` deploys: what the
    GPUCluster's finalizer waits to see gone."""
    return [
        ("DaemonSet", DRA_KUBELET_PLUGIN, True),
        ("DaemonSet", DCGM_EXPORTER_DRA, True),
        *[("DeviceClass", str(c["metadata"]["name"]), False) for c in nvidia_device_classes()],
        ("ClusterRole", DCGM_EXPORTER_DRA_ROLE, False),
        ("ClusterRoleBinding", DCGM_EXPORTER_DRA_ROLE, False),
    ]
