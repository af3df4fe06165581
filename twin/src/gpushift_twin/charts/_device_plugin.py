"""The NVIDIA device plugin's DaemonSets: the GPU Operator's operand and the standalone chart.

The kubelet model recognises a device-plugin pod by its ``k8s-device-plugin`` image and reads
its time-slicing config from ``CONFIG_FILE``/``DEFAULT_CONFIG`` and the mounted ConfigMap, as
the plugin and its config-manager do; these templates set exactly those fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from gpushift.common import Obj
from gpushift.common import as_dict as d
from gpushift_twin.charts._common import (
    Rendered,
    chart_tolerations,
    daemonset,
    env_list,
    extra_env,
    get,
    gpu_toleration,
    helm_labels,
    operand_tolerations,
)

PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"
VALIDATOR_IMAGE = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.1"
#: NVIDIA/k8s-device-plugin: per-node config selection label.
CONFIG_LABEL = "nvidia.com/device-plugin.config"


def _config_manager(*, name: str, oneshot: bool, default: str, fallback: str) -> Obj:
    env = {
        "ONESHOT": "true" if oneshot else "false",
        "KUBECONFIG": "",
        "NODE_LABEL": CONFIG_LABEL,
        "CONFIG_FILE_SRCDIR": "/available-configs",
        "CONFIG_FILE_DST": "/config/config.yaml",
        "DEFAULT_CONFIG": default,
        "FALLBACK_STRATEGIES": fallback,
        "SEND_SIGNAL": "false" if oneshot else "true",
        "SIGNAL": "1",
        "PROCESS_TO_SIGNAL": "nvidia-device-plugin",
    }
    container: Obj = {
        "name": name,
        "image": PLUGIN_IMAGE,
        "command": ["config-manager"],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            *env_list(env),
        ],
        "volumeMounts": [
            {"name": "available-configs", "mountPath": "/available-configs"},
            {"name": "config", "mountPath": "/config"},
        ],
    }
    return container


def operand_daemonset(*, namespace: str, spec: Mapping[str, Any], runtime_class: str | None) -> Obj:
    """``nvidia-device-plugin-daemonset`` as the operator renders it from the ClusterPolicy.

    Mirrors NVIDIA/gpu-operator assets/state-device-plugin/0500_daemonset.yaml and
    ``TransformDevicePlugin`` (config-manager containers only when ``config.name`` is set).
    """
    plugin = d(spec.get("devicePlugin"))
    config = d(plugin.get("config"))
    cm_name = str(config.get("name") or "")
    env: dict[str, str] = {
        "PASS_DEVICE_SPECS": "true",
        "FAIL_ON_INIT_ERROR": "true",
        "DEVICE_LIST_STRATEGY": "envvar",
        "DEVICE_ID_STRATEGY": "uuid",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "all",
        "MIG_STRATEGY": str(get(spec, "mig", "strategy", default="single")),
    }
    if cm_name:
        env["CONFIG_FILE"] = "/config/config.yaml"
    main: Obj = {
        "name": "nvidia-device-plugin",
        "image": PLUGIN_IMAGE,
        "command": ["/bin/bash", "-c"],
        "args": [
            "[[ -f /run/nvidia/validations/host-driver-ready ]] && "
            "driver_root=/ || driver_root=/run/nvidia/driver; "
            "export NVIDIA_DRIVER_ROOT=$driver_root; exec nvidia-device-plugin;"
        ],
        "env": [*env_list(env), *extra_env(plugin.get("env"))],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
            {"name": "run-nvidia-validations", "mountPath": "/run/nvidia/validations"},
        ],
    }
    inits: list[Obj] = [
        {
            "name": "toolkit-validation",
            "image": VALIDATOR_IMAGE,
            "command": ["sh", "-c"],
            "args": [
                "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for "
                "nvidia container stack to be setup; sleep 5; done"
            ],
        }
    ]
    containers = [main]
    volumes: list[Obj] = [
        {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
        {
            "name": "run-nvidia-validations",
            "hostPath": {"path": "/run/nvidia/validations", "type": "DirectoryOrCreate"},
        },
    ]
    if cm_name:
        default = str(config.get("default") or "")
        inits.append(
            _config_manager(
                name="config-manager-init", oneshot=True, default=default, fallback="empty"
            )
        )
        containers.append(
            _config_manager(name="config-manager", oneshot=False, default=default, fallback="empty")
        )
        main["volumeMounts"].append({"name": "config", "mountPath": "/config"})
        volumes += [
            {"name": "available-configs", "configMap": {"name": cm_name}},
            {"name": "config", "emptyDir": {}},
        ]
    pod: Obj = {
        "nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
        "tolerations": operand_tolerations(spec),
        "priorityClassName": "system-node-critical",
        "serviceAccountName": "nvidia-device-plugin",
        "initContainers": inits,
        "containers": containers,
        "volumes": volumes,
    }
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    name = "nvidia-device-plugin-daemonset"
    return daemonset(
        name=name,
        namespace=namespace,
        labels={"app": name, "app.kubernetes.io/part-of": "nvidia-gpu"},
        selector={"app": name},
        pod_spec=pod,
    )


def _fullname(*, release: str, values: Mapping[str, Any], chart: str) -> str:
    # Helm's conventional fullname: the release name when it already contains the chart's.
    if values.get("fullnameOverride"):
        return str(values["fullnameOverride"])
    name = str(values.get("nameOverride") or chart)
    return release if name in release else f"{release}-{name}"


def render_standalone(*, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """The nvidia-device-plugin chart: its DaemonSet, and the config ConfigMap from
    ``config.map`` (or the external ``config.name``).

    Mirrors NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin templates
    (daemonset-device-plugin.yml, configmap.yml, _helpers.tpl).
    """
    chart = "nvidia-device-plugin"
    full = _fullname(release=release, values=values, chart=chart)
    labels = helm_labels(name=chart, release=release, chart=chart, version="0.17.4")
    selector = {"app.kubernetes.io/name": chart, "app.kubernetes.io/instance": release}
    config = d(values.get("config"))
    cmap = d(config.get("map"))
    external = str(config.get("name") or "")
    objects: list[Obj] = []
    cm_name = ""
    if external:
        cm_name = external
    elif cmap:
        cm_name = f"{full}-configs"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": cm_name, "namespace": namespace, "labels": labels},
                "data": {
                    str(k): v if isinstance(v, str) else yaml.safe_dump(v, sort_keys=False)
                    for k, v in cmap.items()
                },
            }
        )
    main: Obj = {
        "name": "nvidia-device-plugin-ctr",
        "image": PLUGIN_IMAGE,
        "command": ["nvidia-device-plugin"],
        "env": env_list(
            {
                "MPS_ROOT": "/run/nvidia/mps",
                "MIG_STRATEGY": str(values.get("migStrategy") or "none"),
                "NVIDIA_MIG_MONITOR_DEVICES": "all",
                "NVIDIA_VISIBLE_DEVICES": "all",
                "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
            }
        ),
        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
        "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}],
    }
    containers = [main]
    inits: list[Obj] = []
    volumes: list[Obj] = [
        {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}
    ]
    if cm_name:
        default = str(config.get("default") or "")
        if not default and len(cmap) == 1:
            default = str(next(iter(cmap)))
        fallback = ",".join(str(s) for s in config.get("fallbackStrategies") or ["named", "single"])
        main["env"].append({"name": "CONFIG_FILE", "value": "/config/config.yaml"})
        main["volumeMounts"].append({"name": "config", "mountPath": "/config"})
        inits.append(
            _config_manager(
                name="nvidia-device-plugin-init", oneshot=True, default=default, fallback=fallback
            )
        )
        containers.append(
            _config_manager(
                name="nvidia-device-plugin-sidecar",
                oneshot=False,
                default=default,
                fallback=fallback,
            )
        )
        volumes += [
            {"name": "available-configs", "configMap": {"name": cm_name}},
            {"name": "config", "emptyDir": {}},
        ]
    pod: Obj = {
        "priorityClassName": str(values.get("priorityClassName") or "system-node-critical"),
        # NVIDIA/k8s-device-plugin values.yaml: CriticalAddonsOnly (deprecated) and nvidia.com/gpu.
        "tolerations": chart_tolerations(
            values,
            "tolerations",
            default=[{"key": "CriticalAddonsOnly", "operator": "Exists"}, gpu_toleration()],
        ),
        "containers": containers,
        "volumes": volumes,
    }
    if inits:
        pod["initContainers"] = inits
    for key in ("nodeSelector", "affinity", "runtimeClassName"):
        if values.get(key):
            pod[key] = values[key]
    if get(values, "devicePlugin", "enabled", default=True) is not False:
        objects.append(
            daemonset(
                name=full, namespace=namespace, labels=labels, selector=selector, pod_spec=pod
            )
        )
    return Rendered(objects)
