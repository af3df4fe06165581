"""Which pods the kubelet takes for NVIDIA agents, and the config each runs with."""

from __future__ import annotations

from typing import Any

import pytest

from gpushift_twin.cluster._kubelet import PluginConfig, device_plugin_config, dra_mode, role

TS = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - {name: nvidia.com/gpu, replicas: %d}\n"
)


def _pod(containers: list[dict[str, Any]], volumes: list[dict[str, Any]] | None = None) -> Any:
    return {
        "metadata": {"name": "p", "namespace": "gpu-operator", "uid": "u"},
        "spec": {"containers": containers, "volumes": volumes or []},
    }


# gpu-operator assets/state-device-plugin/0500_daemonset.yaml, reduced to what is read.
OPERATOR_PLUGIN = _pod(
    [
        {
            "name": "nvidia-device-plugin",
            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
            "command": ["/bin/bash", "-c"],
            "args": ["/bin/entrypoint.sh"],
            "env": [{"name": "CONFIG_FILE", "value": "/config/config.yaml"}],
        },
        {
            "name": "config-manager",
            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
            "command": ["config-manager"],
            "env": [
                {"name": "DEFAULT_CONFIG", "value": "any"},
                {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
            ],
        },
    ],
    [{"name": "time-slicing-config", "configMap": {"name": "time-slicing-config"}}],
)


def _cms(data: dict[str, str]) -> dict[tuple[str, str], Any]:
    return {("gpu-operator", "time-slicing-config"): {"data": data}}


def test_roles_from_images_commands_and_container_names() -> None:
    assert role(OPERATOR_PLUGIN)[0] == "device-plugin"  # type: ignore[index]
    gfd = _pod(
        [
            {
                "name": "gpu-feature-discovery",
                "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
                "command": ["gpu-feature-discovery"],
            }
        ]
    )
    assert role(gfd)[0] == "gfd"  # type: ignore[index]
    dra = _pod(
        [
            {
                "name": "gpus",
                "image": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0",
                "command": ["bash", "-c"],
                "args": ["exec gpu-kubelet-plugin -v 4"],
            }
        ]
    )
    assert role(dra)[0] == "dra"  # type: ignore[index]
    dcgm = _pod(
        [
            {
                "name": "nvidia-dcgm-exporter",
                "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
            }
        ]
    )
    assert role(dcgm)[0] == "dcgm"  # type: ignore[index]
    # The sidecar alone is not the plugin; an unrelated image is nothing.
    assert role(_pod([OPERATOR_PLUGIN["spec"]["containers"][1]])) is None
    assert role(_pod([{"name": "app", "image": "nginx:1"}])) is None


def test_config_key_from_the_node_label_then_default_then_the_only_key() -> None:
    main = OPERATOR_PLUGIN["spec"]["containers"][0]
    data = {"any": TS % 4, "big": TS % 8}
    got = device_plugin_config(OPERATOR_PLUGIN, main=main, node_labels={}, configmaps=_cms(data))
    assert got == (PluginConfig("nvidia.com/gpu", 4, "time-slicing", False), None)
    labelled = device_plugin_config(
        OPERATOR_PLUGIN,
        main=main,
        node_labels={"nvidia.com/device-plugin.config": "big"},
        configmaps=_cms(data),
    )
    assert labelled[0] is not None and labelled[0].replicas == 8
    # The ConfigMap is not there yet: the pod cannot start (no config, no error).
    assert device_plugin_config(OPERATOR_PLUGIN, main=main, node_labels={}, configmaps={}) == (
        None,
        None,
    )


def test_rename_by_default_and_a_config_the_plugin_rejects() -> None:
    main = OPERATOR_PLUGIN["spec"]["containers"][0]
    renamed = (
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
        "    resources:\n    - {name: nvidia.com/gpu, replicas: 3}\n"
    )
    got = device_plugin_config(
        OPERATOR_PLUGIN, main=main, node_labels={}, configmaps=_cms({"any": renamed})
    )
    assert got == (PluginConfig("nvidia.com/gpu.shared", 3, "time-slicing", True), None)
    bad = device_plugin_config(
        OPERATOR_PLUGIN, main=main, node_labels={}, configmaps=_cms({"any": TS % 1})
    )
    assert bad == (None, "unable to load config: number of replicas must be >= 2")


@pytest.mark.parametrize(
    ("env", "mode"),
    [
        ({}, ("disabled", None)),
        ({"CONSUMABLE_SHARES": "5", "FEATURE_GATES": "ConsumableShares=true,"}, (5, None)),
        (
            {"CONSUMABLE_SHARES": "memory", "FEATURE_GATES": "ConsumableShares=true"},
            ("memory", None),
        ),
        (
            {"CONSUMABLE_SHARES": "unlimited", "FEATURE_GATES": "A=true,ConsumableShares=true"},
            ("unlimited", None),
        ),
        # The gate without a value publishes exclusive devices.
        ({"FEATURE_GATES": "ConsumableShares=true"}, ("disabled", None)),
        (
            {"CONSUMABLE_SHARES": "5"},
            (
                "disabled",
                "--consumable-shares requires feature gate ConsumableShares to be enabled",
            ),
        ),
        (
            {"CONSUMABLE_SHARES": "half", "FEATURE_GATES": "ConsumableShares=true"},
            (
                "disabled",
                "invalid value for --consumable-shares: \"half\" (must be 'disabled', "
                "'memory', 'unlimited', or a positive integer)",
            ),
        ),
    ],
)
def test_dra_mode_from_the_env(env: dict[str, str], mode: tuple[Any, str | None]) -> None:
    container = {"name": "gpus", "env": [{"name": k, "value": v} for k, v in env.items()]}
    assert dra_mode(container) == mode
