"""The dra-driver-nvidia-gpu chart: validation.yaml's refusals, the kubelet-plugin DaemonSet
and the DeviceClasses (kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/…/templates)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift.common import Obj
from gpushift.common import as_dict as d
from gpushift.engine import nvidia_device_classes
from gpushift_twin.charts._common import (
    ChartError,
    Rendered,
    chart_tolerations,
    daemonset,
    env_list,
    extra_env,
    get,
    helm_labels,
)

CHART = "dra-driver-nvidia-gpu"
VERSION = "0.5.0"
IMAGE = f"registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v{VERSION}"

# templates/validation.yaml, verbatim (the `fail` texts and where they are).
_GPUS_WITHOUT_OVERRIDE = (
    "\n\nThe default value of 'resources.gpus.enabled == true'. However, when "
    "'resources.gpus.enabled=true' this DRA driver cannot be deployed alongside the standard GPU "
    "device plugin on the same node. To avoid potential collisions between these two components, "
    "we will not allow this default to take effect until KEP 5004 has reached GA in upstream "
    "Kubernetes.\n"
    "\nIf you are sure you have disabled the deployment of the standard GPU device plugin and "
    "want to remove this error and force 'resources.gpus.enabled=true', you must also:\n"
    "\n    --set 'gpuResourcesEnabledOverride=true'\n"
    "\nOnce KEP 5004 has reached GA, this DRA driver will be able to honour extended resource "
    "requests for 'nvidia.com/gpu' alongside requests made using ResourceClaims, essentially "
    "obsoleting the need for the standard GPU device plugin altogether. If you want to try this "
    "feature now, you can enable it in upstream Kubernetes v1.35+ by setting the "
    "'DRAExtendedResource' feature gate on the 'kube-apiserver', 'kube-scheduler', "
    "'kube-controller-manager', and 'kubelet'."
)
_EXPLICIT_NAMESPACE = (
    "\nValue 'namespace' set to {ns}"
    "\nSetting an explicit 'namespace' in values.yaml or via --set on the command line is no "
    "longer supported."
    "\nUse --namespace (with --create-namespace as necessary) instead."
    "\nSee: https://helm.sh/docs/helm/helm_install/#options"
)
_DEFAULT_NAMESPACE = (
    "\nRunning in the 'default' namespace is not recommended."
    "\nSet 'allowDefaultNamespace=true' to bypass this error."
    "\nOtherwise, use --namespace (with --create-namespace as necessary) to run in a specific "
    "namespace."
    "\nSee: https://helm.sh/docs/helm/helm_install/#options"
)
_CTK_PATH = (
    "\nSetting a user-defined nvidiaCtkPath is no longer supported. It can simply be removed "
    "without consequence."
    "\nIt was previously required to point the DRA driver at the host-path to the nvidia-ctk "
    "binary."
    "\nThis, in turn, was used to execute any CDI hooks injected into containers by the DRA "
    "driver."
    "\nNow a diffent binary is used called nvidia-cdi-hook that is installed by the DRA driver "
    "itself."
    "\nThis renders the need for passing this user-defined flag obsolete."
)


def _fail(*, line: int, text: str) -> ChartError:
    # Helm's error for a template `fail`: where it is, then the message.
    return ChartError(f"execution error at ({CHART}/templates/validation.yaml:{line}:4): {text}")


def validate(*, namespace: str, values: Mapping[str, Any]) -> None:
    """Raise ``ChartError`` as templates/validation.yaml does, first failure first."""
    if values.get("namespace"):
        raise _fail(line=21, text=_EXPLICIT_NAMESPACE.format(ns=values["namespace"]))
    ns = str(values.get("namespaceOverride") or namespace)
    if (
        ns == "default"
        and not values.get("namespaceOverride")
        and not values.get("allowDefaultNamespace")
    ):
        raise _fail(line=30, text=_DEFAULT_NAMESPACE)
    if get(values, "resources", "gpus", "enabled") and not values.get(
        "gpuResourcesEnabledOverride"
    ):
        raise _fail(line=42, text=_GPUS_WITHOUT_OVERRIDE)
    if values.get("nvidiaCtkPath"):
        raise _fail(line=51, text=_CTK_PATH)


def _name(values: Mapping[str, Any]) -> str:
    return str(values.get("nameOverride") or CHART)


def _gates(values: Mapping[str, Any]) -> str:
    # {{- range $k, $v := .Values.featureGates }}{{ $k }}={{ $v }},{{- end }}: sorted keys.
    gates = d(values.get("featureGates"))
    return "".join(
        f"{k}={str(v).lower() if isinstance(v, bool) else v}," for k, v in sorted(gates.items())
    )


def kubelet_plugin(*, namespace: str, values: Mapping[str, Any]) -> Obj:
    """templates/kubeletplugin.yaml: the ``<name>-kubelet-plugin`` DaemonSet (gpu-operator's
    GPUCluster runs the same one)."""
    name = _name(values)
    plugin = d(values.get("kubeletPlugin"))
    root = str(values.get("nvidiaDriverRoot") or "/")
    registrar = str(
        plugin.get("kubeletRegistrarDirectoryPath") or "/var/lib/kubelet/plugins_registry"
    )
    plugins_dir = str(plugin.get("kubeletPluginsDirectoryPath") or "/var/lib/kubelet/plugins")
    gpus = d(get(plugin, "containers", "gpus", default={}))
    env: list[Obj] = []
    if get(plugin, "metrics", "enabled", default=True) is not False:
        env += env_list({"HTTP_ENDPOINT": ":8080", "METRICS_PATH": "/metrics"})
    env += env_list(
        {
            "LOG_VERBOSITY": str(values.get("logVerbosity") or "4"),
            "MASK_NVIDIA_DRIVER_PARAMS": "",
            "NVIDIA_DRIVER_ROOT": root,
            "NVIDIA_VISIBLE_DEVICES": "void",
            "CDI_ROOT": "/var/run/cdi",
            "NVIDIA_MIG_CONFIG_DEVICES": "all",
        }
    )
    env += [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "SERVICE_ACCOUNT_NAME", "value": f"{name}-service-account-kubeletplugin"},
        {"name": "IMAGE_NAME", "value": IMAGE},
        {"name": "IMAGE_PULL_POLICY", "value": "IfNotPresent"},
    ]
    shares = values.get("consumableShares")
    # `if .Values.consumableShares`: 0 and "" render nothing, the string "0" renders.
    if shares not in (None, "", 0, False):
        env.append({"name": "CONSUMABLE_SHARES", "value": str(shares)})
    gates = _gates(values)
    if gates:
        env.append({"name": "FEATURE_GATES", "value": gates})
    env += env_list(
        {
            "KUBELET_REGISTRAR_DIRECTORY_PATH": registrar,
            "KUBELET_PLUGINS_DIRECTORY_PATH": plugins_dir,
            "HEALTHCHECK_PORT": str(gpus.get("healthcheckPort") or 51516),
        }
    )
    env += extra_env(gpus.get("env"))
    parent = "/" if root.rstrip("/") in ("", "/") else (root.rstrip("/").rsplit("/", 1)[0] or "/")
    pod: Obj = {
        "priorityClassName": str(plugin.get("priorityClassName", "system-node-critical") or ""),
        "serviceAccountName": f"{name}-service-account-kubeletplugin",
        "tolerations": chart_tolerations(values, "kubeletPlugin", "tolerations"),
        "affinity": plugin.get("affinity")
        or {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}
                        for k, v in (
                            ("feature.node.kubernetes.io/pci-10de.present", "true"),
                            ("feature.node.kubernetes.io/pci-0302_10de.present", "true"),
                            ("feature.node.kubernetes.io/pci-0300_10de.present", "true"),
                            ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                            ("nvidia.com/gpu.present", "true"),
                        )
                    ]
                }
            }
        },
        "initContainers": [
            {
                "name": "init-container",
                "image": IMAGE,
                "command": ["bash", "/usr/bin/kubelet-plugin-prestart.sh"],
                "env": env_list(
                    {
                        "NVIDIA_DRIVER_ROOT": root,
                        "NVIDIA_VISIBLE_DEVICES": "void",
                        "KUBELET_REGISTRAR_DIRECTORY_PATH": registrar,
                        "KUBELET_PLUGINS_DIRECTORY_PATH": plugins_dir,
                    }
                ),
            }
        ],
        "containers": [
            {
                "name": "gpus",
                "image": IMAGE,
                "command": ["bash", "-c"],
                "args": ["exec gpu-kubelet-plugin -v $(LOG_VERBOSITY)"],
                "env": env,
                "securityContext": {"privileged": True},
                "resources": gpus.get("resources") or {},
            }
        ],
        "volumes": [
            {"name": "plugins-registry", "hostPath": {"path": registrar}},
            {"name": "plugins", "hostPath": {"path": plugins_dir}},
            {"name": "cdi", "hostPath": {"path": "/var/run/cdi"}},
            {
                "name": "driver-root-parent",
                "hostPath": {"path": parent, "type": "DirectoryOrCreate"},
            },
            {"name": "driver-root", "hostPath": {"path": root, "type": "DirectoryOrCreate"}},
        ],
    }
    if plugin.get("nodeSelector"):
        pod["nodeSelector"] = plugin["nodeSelector"]
    selector = {f"{name}-component": "kubelet-plugin"}
    labels = helm_labels(name=name, release=name, chart=CHART, version=VERSION)
    ds = daemonset(
        name=f"{name}-kubelet-plugin",
        namespace=namespace,
        labels=labels,
        selector=selector,
        pod_spec=pod,
    )
    ds["spec"]["updateStrategy"] = plugin.get("updateStrategy") or {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "100%"},
    }
    return ds


def render(*, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """The chart's objects, or ``ChartError`` with validation.yaml's message.

    Renders for ``resource.k8s.io/v1`` (the twin serves it), so ``gpu.nvidia.com`` maps
    ``nvidia.com/gpu``.
    """
    validate(namespace=namespace, values=values)
    objects: list[Obj] = []
    gpus = bool(get(values, "resources", "gpus", "enabled"))
    domains = bool(get(values, "resources", "computeDomains", "enabled"))
    if gpus:
        objects += [dict(c) for c in nvidia_device_classes(api_version="resource.k8s.io/v1")]
    if gpus or domains:
        objects.append(kubelet_plugin(namespace=namespace, values=values))
    del release  # the chart names its objects after the chart, not the release
    return Rendered(objects)
