"""The chart models against what the charts' templates render (nvidia.md, k8s-dra-flux.md §7-8)."""

from __future__ import annotations

from typing import Any

import pytest

from gpushift_twin.charts import ChartError, render
from gpushift_twin.charts._gpu_operator import operands
from gpushift_twin.charts._llmkube import inference_deployment

DRA = "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"


def _by(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def test_dra_chart_refuses_gpus_without_the_override() -> None:
    with pytest.raises(ChartError) as err:
        render(DRA, release="dra", namespace="gpu-operator", values={})
    text = str(err.value)
    assert text.startswith(
        "execution error at (dra-driver-nvidia-gpu/templates/validation.yaml:42:4): \n\n"
        "The default value of 'resources.gpus.enabled == true'."
    )
    assert text.endswith("'kube-controller-manager', and 'kubelet'.")


def test_dra_chart_refuses_the_default_namespace_first() -> None:
    with pytest.raises(ChartError, match=r"validation.yaml:30:4\): \nRunning in the 'default'"):
        render(
            DRA, release="dra", namespace="default", values={"gpuResourcesEnabledOverride": True}
        )


def test_dra_chart_renders_the_kubelet_plugin_and_device_classes() -> None:
    values = {
        "gpuResourcesEnabledOverride": True,
        "resources": {"computeDomains": {"enabled": False}},
        "featureGates": {"ConsumableShares": True},
        "consumableShares": 5,
        "nvidiaDriverRoot": "/usr/local",
    }
    out = render(DRA, release="dra", namespace="gpu-operator", values=values).objects
    classes = {o["metadata"]["name"]: o for o in out if o["kind"] == "DeviceClass"}
    assert sorted(classes) == ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"]
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in classes["mig.nvidia.com"]["spec"]
    ds = _by(out, "DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin")
    assert ds["spec"]["selector"]["matchLabels"] == {
        "dra-driver-nvidia-gpu-component": "kubelet-plugin"
    }
    gpus = ds["spec"]["template"]["spec"]["containers"][0]
    assert gpus["name"] == "gpus"
    env = _env(gpus)
    assert env["CONSUMABLE_SHARES"] == "5"
    assert env["FEATURE_GATES"] == "ConsumableShares=true,"
    assert env["NVIDIA_DRIVER_ROOT"] == "/usr/local"
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["driver-root-parent"]["hostPath"]["path"] == "/usr"


@pytest.mark.parametrize(("shares", "rendered"), [(0, None), ("", None), ("0", "0")])
def test_consumable_shares_renders_only_when_truthy(shares: Any, rendered: str | None) -> None:
    values = {"gpuResourcesEnabledOverride": True, "consumableShares": shares}
    out = render(DRA, release="dra", namespace="gpu", values=values).objects
    ds = _by(out, "DaemonSet", "dra-driver-nvidia-gpu-kubelet-plugin")
    assert (
        _env(ds["spec"]["template"]["spec"]["containers"][0]).get("CONSUMABLE_SHARES") == rendered
    )


def test_gpu_operator_policy_and_time_slicing_operand() -> None:
    values = {"devicePlugin": {"config": {"name": "time-slicing-config", "default": "any"}}}
    out = render("gpu-operator", release="gpu-operator", namespace="gpu-operator", values=values)
    policy = _by(out.objects, "ClusterPolicy", "cluster-policy")
    assert policy["spec"]["devicePlugin"]["enabled"] is True  # the chart's default
    want, gone = operands(namespace="gpu-operator", spec=policy["spec"], service_monitors=False)
    assert gone == []
    ds = _by(want, "DaemonSet", "nvidia-device-plugin-daemonset")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}
    main = pod["containers"][0]
    assert main["image"].startswith("nvcr.io/nvidia/k8s-device-plugin:")
    assert _env(main)["CONFIG_FILE"] == "/config/config.yaml"
    assert _env(pod["containers"][1])["DEFAULT_CONFIG"] == "any"
    assert {"name": "available-configs", "configMap": {"name": "time-slicing-config"}} in pod[
        "volumes"
    ]
    assert _by(want, "RuntimeClass", "nvidia")["handler"] == "nvidia"


def test_gpu_operator_without_device_plugin_deletes_it_and_the_validator_step() -> None:
    spec = {"devicePlugin": {"enabled": False}}
    want, gone = operands(namespace="gpu-operator", spec=spec, service_monitors=False)
    assert ("DaemonSet", "nvidia-device-plugin-daemonset") in gone
    assert not [o for o in want if o["metadata"]["name"] == "nvidia-device-plugin-daemonset"]
    validator = _by(want, "DaemonSet", "nvidia-operator-validator")
    inits = [c["name"] for c in validator["spec"]["template"]["spec"]["initContainers"]]
    assert inits == ["driver-validation", "toolkit-validation", "cuda-validation"]


def test_gpu_operator_dcgm_exporter_keeps_the_dra_env() -> None:
    spec = {"dcgmExporter": {"env": [{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}]}}
    want, _ = operands(namespace="gpu-operator", spec=spec, service_monitors=False)
    ds = _by(want, "DaemonSet", "nvidia-dcgm-exporter")
    assert _env(ds["spec"]["template"]["spec"]["containers"][0])["KUBERNETES_ENABLE_DRA"] == "true"


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _tolerations(objects: list[dict[str, Any]], name: str) -> Any:
    return _by(objects, "DaemonSet", name)["spec"]["template"]["spec"]["tolerations"]


def test_gpu_operator_daemonsets_tolerations_go_onto_every_operand_when_given() -> None:
    wide = [{"operator": "Exists"}]
    out = render(
        "gpu-operator", release="gpu-operator", namespace="gpu-operator",
        values={"daemonsets": {"tolerations": wide}},
    )  # fmt: skip
    policy = _by(out.objects, "ClusterPolicy", "cluster-policy")
    want, _ = operands(namespace="gpu-operator", spec=policy["spec"], service_monitors=False)
    for name in (
        "nvidia-device-plugin-daemonset",
        "gpu-feature-discovery",
        "nvidia-dcgm-exporter",
        "nvidia-operator-validator",
    ):
        assert _tolerations(want, name) == wide
    # An empty list leaves each operand its own (the operator sets them only when not empty).
    want, _ = operands(
        namespace="gpu-operator", spec={"daemonsets": {"tolerations": []}}, service_monitors=False
    )
    assert _tolerations(want, "nvidia-device-plugin-daemonset") == [GPU_TOLERATION]


CRITICAL = {"key": "CriticalAddonsOnly", "operator": "Exists"}


@pytest.mark.parametrize(
    ("given", "rendered", "plugin_rendered"),
    [
        (None, [GPU_TOLERATION], [CRITICAL, GPU_TOLERATION]),  # each chart's default
        ([], [], []),  # `with` renders nothing for an empty list
        ([{"operator": "Exists"}], [{"operator": "Exists"}], [{"operator": "Exists"}]),
    ],
)
def test_the_charts_agent_tolerations_as_given(
    given: Any, rendered: Any, plugin_rendered: Any
) -> None:
    dra: dict[str, Any] = {"gpuResourcesEnabledOverride": True}
    plugin: dict[str, Any] = {}
    if given is not None:
        dra["kubeletPlugin"] = {"tolerations": given}
        plugin["tolerations"] = given
    out = render(DRA, release="dra", namespace="gpu-operator", values=dra).objects
    assert _tolerations(out, "dra-driver-nvidia-gpu-kubelet-plugin") == rendered
    out = render("nvidia-device-plugin", release="ndp", namespace="x", values=plugin).objects
    assert _tolerations(out, "ndp-nvidia-device-plugin") == plugin_rendered


def test_standalone_device_plugin_with_config_map() -> None:
    values = {"config": {"map": {"default": "version: v1\n"}}}
    out = render(
        "nvidia-device-plugin",
        release="nvidia-device-plugin",
        namespace="kube-system",
        values=values,
    ).objects
    cm = _by(out, "ConfigMap", "nvidia-device-plugin-configs")
    assert cm["data"] == {"default": "version: v1\n"}
    ds = _by(out, "DaemonSet", "nvidia-device-plugin")
    pod = ds["spec"]["template"]["spec"]
    assert _env(pod["containers"][1])["DEFAULT_CONFIG"] == "default"
    assert {
        "name": "available-configs",
        "configMap": {"name": "nvidia-device-plugin-configs"},
    } in pod["volumes"]


def test_standalone_device_plugin_with_external_config_name() -> None:
    values = {"config": {"name": "ts", "default": "any"}}
    out = render("k8s-device-plugin", release="ndp", namespace="kube-system", values=values).objects
    assert not [o for o in out if o["kind"] == "ConfigMap"]
    ds = _by(out, "DaemonSet", "ndp-nvidia-device-plugin")
    assert {"name": "available-configs", "configMap": {"name": "ts"}} in ds["spec"]["template"][
        "spec"
    ]["volumes"]


def test_app_template_controllers() -> None:
    values = {
        "defaultPodOptions": {"runtimeClassName": "nvidia", "nodeSelector": {"a": "b"}},
        "controllers": {
            "plex": {
                "pod": {
                    "nodeSelector": {"c": "d"},
                    "resourceClaims": [
                        {"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}
                    ],
                },
                "containers": {
                    "app": {
                        "image": {"repository": "ghcr.io/x/plex", "tag": "1"},
                        "env": {"TZ": "UTC"},
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                },
            },
            "worker": {
                "type": "statefulset",
                "containers": {"app": {"image": {"repository": "w", "tag": "2"}}},
            },
        },
    }
    out = render("app-template", release="plex", namespace="media", values=values).objects
    dep = _by(out, "Deployment", "plex")
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    # The controller's pod options replace the defaults key by key.
    assert pod["nodeSelector"] == {"c": "d"}
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}]
    app = pod["containers"][0]
    assert app["image"] == "ghcr.io/x/plex:1"
    assert app["env"] == [{"name": "TZ", "value": "UTC"}]
    assert app["resources"] == {"claims": [{"name": "gpu"}]}
    sts = _by(out, "StatefulSet", "plex-worker")
    assert sts["spec"]["serviceName"] == "plex-worker"


def _isvc(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "llama", "namespace": "ai", "uid": "u1"}, "spec": spec}


def test_llmkube_deployment_limits_and_recreate() -> None:
    model = {"spec": {"hardware": {"gpu": {"enabled": True, "vendor": "nvidia", "count": 1}}}}
    dep = inference_deployment(_isvc(resources={"gpu": 2}, replicas=1), model)
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    # Model.hardware.gpu.count (> 0) wins over resources.gpu; limits only.
    assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]


def test_llmkube_deployment_with_claims() -> None:
    claims = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    model = {"spec": {"hardware": {"gpu": {"count": 1, "resourceClaims": claims}}}}
    pod = inference_deployment(_isvc(), model)["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == claims
    assert pod["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert "tolerations" not in pod


def test_standalone_dcgm_exporter_with_dra() -> None:
    values = {"kubernetesDRA": {"enabled": True}}
    out = render("dcgm-exporter", release="dcgm-exporter", namespace="mon", values=values).objects
    ds = _by(out, "DaemonSet", "dcgm-exporter")
    assert _env(ds["spec"]["template"]["spec"]["containers"][0])["KUBERNETES_ENABLE_DRA"] == "true"
    role = _by(out, "ClusterRole", "dcgm-exporter")
    assert role["rules"][0]["resources"] == ["pods", "resourceslices"]


def test_unknown_chart_renders_nothing_and_says_so() -> None:
    out = render(
        "oci://ghcr.io/home-operations/charts/cert-manager", release="cm", namespace="x", values={}
    )
    assert out.objects == []
    assert out.message is not None and "not modelled" in out.message


def test_llmkube_pod_labels_reach_the_pods() -> None:
    dep = inference_deployment(_isvc(podLabels={"llm-gpu-model": "true"}), None)
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert labels["llm-gpu-model"] == "true"
    assert labels["app"] == "llama"


def test_app_template_config_maps_and_persistence() -> None:
    # bjw-s common: with two configMaps each is <release>-<identifier>; persistence of type
    # configMap by identifier or by a tpl name (one made elsewhere is left out), hostPath
    # mounted at its own path by default, an item without mounts at /<identifier>,
    # advancedMounts for one container only.
    values = {
        "configMaps": {
            "config": {"data": {"config.yaml": "devices: []\n"}},
            "scripts": {"data": {"run.sh": "exit 0\n"}},
        },
        "controllers": {
            "main": {
                "containers": {
                    "app": {"image": {"repository": "ghcr.io/example/app", "tag": "1"}},
                    "sidecar": {"image": {"repository": "ghcr.io/example/side", "tag": "1"}},
                }
            }
        },
        "persistence": {
            "config": {
                "type": "configMap",
                "identifier": "config",
                "globalMounts": [{"path": "/config/config.yaml", "subPath": "config.yaml"}],
            },
            "scripts": {
                "type": "configMap",
                "name": "{{ .Release.Name }}-scripts",
                "advancedMounts": {"main": {"sidecar": [{"path": "/scripts"}]}},
            },
            "dev": {"type": "hostPath", "hostPath": "/dev", "globalMounts": [{"readOnly": True}]},
            "cache": {"type": "emptyDir"},
            "data": {"existingClaim": "app-data"},
            "other": {"type": "configMap", "name": "made-by-an-operator"},
        },
    }
    out = render("app-template", release="tun", namespace="net", values=values).objects
    config, scripts, deploy = out
    assert (config["kind"], config["metadata"]["name"], config["data"]) == (
        "ConfigMap",
        "tun-config",
        {"config.yaml": "devices: []\n"},
    )
    assert scripts["metadata"]["name"] == "tun-scripts"
    pod = deploy["spec"]["template"]["spec"]
    # In identifier order, as Go templates range over the persistence map.
    assert pod["volumes"] == [
        {"name": "cache", "emptyDir": {}},
        {"name": "config", "configMap": {"name": "tun-config"}},
        {"name": "dev", "hostPath": {"path": "/dev"}},
        {"name": "scripts", "configMap": {"name": "tun-scripts"}},
    ]
    app, sidecar = pod["containers"]
    everywhere = [
        {"name": "cache", "mountPath": "/cache"},
        {"name": "config", "mountPath": "/config/config.yaml", "subPath": "config.yaml"},
        {"name": "dev", "mountPath": "/dev", "readOnly": True},
    ]
    assert app["volumeMounts"] == everywhere
    assert sidecar["volumeMounts"] == [*everywhere, {"name": "scripts", "mountPath": "/scripts"}]
