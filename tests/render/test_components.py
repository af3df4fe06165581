"""Hand-derived expectations for the key values of each rendered component.

Expected values come from the upstream facts (chart values, the documented Talos setups) and
from the LukeEvansTech fixture's before (gpu-operator, replicas 5) and after (DRA, 5 shares)
states, not from the renderer's own output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

Tree = dict[str, str]
TreeFor = Callable[..., Tree]
Docs = Callable[[Tree, str], list[Any]]

GPU_PRESENT_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                    ]
                }
            ]
        }
    }
}
FLUX_SOURCE = {"kind": "GitRepository", "name": "flux-system", "namespace": "flux-system"}
MEDIA_APPS = ("dispatcharr", "jellyfin", "pinchflat", "plex", "tdarr", "whisper")


def values(docs: Docs, tree: Tree, path: str) -> dict[str, Any]:
    (release,) = docs(tree, path)
    assert release["kind"] == "HelmRelease"
    result: dict[str, Any] = release["spec"]["values"]
    return result


# --- gpu-operator, time-slicing 5: the fixture's before state -------------------------------


def test_gpu_operator_time_slicing_values(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("gpu-operator", 5)
    v = values(docs, tree, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    # Talos: driver and toolkit come from system extensions, driver under /usr/local.
    assert v["driver"] == {"enabled": False}
    assert v["toolkit"] == {"enabled": False}
    assert v["hostPaths"] == {"driverInstallDir": "/usr/local"}
    assert v["cdi"] == {"enabled": True, "default": True}
    assert v["devicePlugin"] == {
        "enabled": True,
        "config": {"name": "time-slicing-config", "default": "any"},
    }
    assert v["gfd"] == {"enabled": True}
    assert v["dcgmExporter"] == {"enabled": True, "serviceMonitor": {"enabled": True}}


def test_gpu_operator_time_slicing_configmap(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("gpu-operator", 5)
    (cm,) = docs(tree, "gpu-operator/gpu-operator/app/time-slicing-config.yaml")
    assert cm["metadata"] == {"name": "time-slicing-config", "namespace": "gpu-operator"}
    assert yaml.safe_load(cm["data"]["any"]) == {
        "version": "v1",
        "sharing": {
            "timeSlicing": {
                "renameByDefault": False,
                "resources": [{"name": "nvidia.com/gpu", "replicas": 5}],
            }
        },
    }
    (kust,) = docs(tree, "gpu-operator/gpu-operator/app/kustomization.yaml")
    assert kust["resources"] == [
        "./ocirepository.yaml",
        "./helmrelease.yaml",
        "./time-slicing-config.yaml",
        "./runtimeclass.yaml",
    ]


def test_gpu_operator_source_and_flux_kustomization(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("gpu-operator", 5)
    (oci,) = docs(tree, "gpu-operator/gpu-operator/app/ocirepository.yaml")
    assert oci["spec"]["url"] == "oci://ghcr.io/home-operations/charts-mirror/nvidia-gpu-operator"
    assert oci["spec"]["ref"] == {"tag": "26.3.3"}
    assert oci["spec"]["layerSelector"] == {
        "mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
        "operation": "copy",
    }
    (ks,) = docs(tree, "gpu-operator/gpu-operator/ks.yaml")
    assert ks["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert ks["metadata"] == {"name": "gpu-operator", "namespace": "gpu-operator"}
    assert ks["spec"]["path"] == "./kubernetes/apps/gpu-operator/gpu-operator/app"
    assert ks["spec"]["sourceRef"] == FLUX_SOURCE
    assert ks["spec"]["targetNamespace"] == "gpu-operator"
    assert ks["spec"]["healthChecks"] == [
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "name": "gpu-operator",
            "namespace": "gpu-operator",
        }
    ]
    (rc,) = docs(tree, "gpu-operator/gpu-operator/app/runtimeclass.yaml")
    assert rc == {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"},
        "handler": "nvidia",
    }


def test_gpu_operator_consumers_request_the_extended_resource(
    tree_for: TreeFor, docs: Docs
) -> None:
    tree = tree_for("gpu-operator", 5)
    for app in MEDIA_APPS:
        v = values(docs, tree, f"media/{app}/app/helmrelease.yaml")
        container = v["controllers"][app]["containers"]["app"]
        assert container["resources"] == {
            "requests": {"nvidia.com/gpu": 1},
            "limits": {"nvidia.com/gpu": 1},
        }
        assert "pod" not in v["controllers"][app]
        assert v["defaultPodOptions"] == {
            "runtimeClassName": "nvidia",
            "affinity": GPU_PRESENT_AFFINITY,
        }
        (ks,) = docs(tree, f"media/{app}/ks.yaml")
        assert ks["spec"]["dependsOn"] == [{"name": "gpu-operator", "namespace": "gpu-operator"}]
    assert not any("gpu-claim-templates" in p or "dra-driver" in p for p in tree)


def test_gpu_operator_exclusive_has_no_time_slicing(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("gpu-operator", "exclusive")
    v = values(docs, tree, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    assert v["devicePlugin"] == {"enabled": True}
    assert "kubernetes/apps/gpu-operator/gpu-operator/app/time-slicing-config.yaml" not in tree


# --- dra, 5 consumable shares: the fixture's after state -------------------------------------


def test_dra_driver_values_match_the_fixture_after_state(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("dra", 5)
    v = values(docs, tree, "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    # LukeEvansTech__talos-cluster__later-dra dra-driver-nvidia-gpu/app/helmrelease.yaml
    assert v == {
        "nvidiaDriverRoot": "/usr/local",
        "gpuResourcesEnabledOverride": True,
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "featureGates": {"ConsumableShares": True},
        "consumableShares": 5,
    }
    (oci,) = docs(tree, "gpu-operator/dra-driver-nvidia-gpu/app/ocirepository.yaml")
    assert oci["spec"]["url"] == (
        "oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"
    )
    assert oci["spec"]["ref"] == {"tag": "0.5.0"}


def test_dra_driver_waits_for_gpu_operator(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("dra", 5)
    (ks,) = docs(tree, "gpu-operator/dra-driver-nvidia-gpu/ks.yaml")
    assert ks["spec"]["dependsOn"] == [{"name": "gpu-operator"}]
    assert ks["spec"]["healthChecks"] == [
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "name": "dra-driver-nvidia-gpu",
            "namespace": "gpu-operator",
        }
    ]
    (op_ks,) = docs(tree, "gpu-operator/gpu-operator/ks.yaml")
    assert op_ks["spec"]["healthChecks"][0]["name"] == "gpu-operator"


def test_dra_turns_the_device_plugin_off_and_attributes_dcgm(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("dra", 5)
    v = values(docs, tree, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    assert v["devicePlugin"] == {"enabled": False}
    assert v["dcgmExporter"]["env"] == [{"name": "KUBERNETES_ENABLE_DRA", "value": "true"}]
    assert "kubernetes/apps/gpu-operator/gpu-operator/app/time-slicing-config.yaml" not in tree
    role, binding = docs(tree, "gpu-operator/gpu-operator/app/dcgm-exporter-rbac.yaml")
    assert role["kind"] == "ClusterRole"
    assert role["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceslices"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert binding["kind"] == "ClusterRoleBinding"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "nvidia-dcgm-exporter", "namespace": "gpu-operator"}
    ]


def test_dra_claim_template_per_consumer_namespace(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("dra", 5)
    (rct,) = docs(tree, "media/gpu-claim-templates/app/resourceclaimtemplate.yaml")
    # LukeEvansTech__talos-cluster__later-dra media/gpu-claim-templates/app/...
    assert rct == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "any-nvidia-gpu", "namespace": "media"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "nvidia-gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                    ]
                }
            }
        },
    }
    (ks,) = docs(tree, "media/gpu-claim-templates/ks.yaml")
    assert ks["spec"]["force"] is True
    assert ks["spec"]["dependsOn"] == [
        {"name": "dra-driver-nvidia-gpu", "namespace": "gpu-operator"}
    ]
    # The ai namespace only holds a bridged InferenceService: no template there.
    assert not any(p.startswith("kubernetes/apps/ai/gpu-claim-templates") for p in tree)


def test_dra_consumers_use_claims(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("dra", 5)
    for app in MEDIA_APPS:
        v = values(docs, tree, f"media/{app}/app/helmrelease.yaml")
        controller = v["controllers"][app]
        assert controller["containers"]["app"]["resources"] == {"claims": [{"name": "gpu"}]}
        assert controller["pod"] == {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}]
        }
        assert v["defaultPodOptions"]["runtimeClassName"] == "nvidia"
        (ks,) = docs(tree, f"media/{app}/ks.yaml")
        assert ks["spec"]["dependsOn"] == [{"name": "gpu-claim-templates"}]
    assert not any("nvidia.com/gpu:" in text for p, text in tree.items() if "/media/" in p)


def test_dra_inference_service_stays_on_the_extended_resource(
    tree_for: TreeFor, docs: Docs
) -> None:
    tree = tree_for("dra", 5)
    model, service = docs(tree, "ai/llmkube/models/llama-nvidia.yaml")
    assert model["kind"] == "Model"
    assert model["spec"]["hardware"]["gpu"] == {"enabled": True, "vendor": "nvidia", "count": 1}
    assert service["kind"] == "InferenceService"
    assert service["spec"]["modelRef"] == "llama-nvidia"
    assert service["spec"]["resources"] == {"gpu": 1}
    assert service["spec"]["runtimeClassName"] == "nvidia"
    assert service["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    operator_ks, models_ks = docs(tree, "ai/llmkube/ks.yaml")
    assert operator_ks["metadata"]["name"] == "llmkube"
    assert models_ks["spec"]["dependsOn"] == [
        {"name": "llmkube"},
        {"name": "dra-driver-nvidia-gpu", "namespace": "gpu-operator"},
    ]


def test_dra_exclusive_and_unlimited_shares(tree_for: TreeFor, docs: Docs) -> None:
    path = "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"
    exclusive = values(docs, tree_for("dra", "exclusive"), path)
    assert "featureGates" not in exclusive
    assert "consumableShares" not in exclusive
    unlimited = values(docs, tree_for("dra", "unlimited"), path)
    assert unlimited["featureGates"] == {"ConsumableShares": True}
    assert unlimited["consumableShares"] == "unlimited"


def test_dra_memory_claims_ask_for_memory(
    tree_for: TreeFor, docs: Docs, homelab_data: dict[str, Any]
) -> None:
    media_only = [c for c in homelab_data["consumers"] if c["namespace"] == "media"]
    tree = tree_for("dra", "memory", consumers=media_only, memoryPerClaim="6Gi")
    v = values(docs, tree, "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    assert v["consumableShares"] == "memory"
    (rct,) = docs(tree, "media/gpu-claim-templates/app/resourceclaimtemplate.yaml")
    (request,) = rct["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {
        "deviceClassName": "gpu.nvidia.com",
        "capacity": {"requests": {"memory": "6Gi"}},
    }


def comment_above(text: str, key: str) -> str:
    """The comment lines directly above the first ``key:`` line, joined."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
    above = []
    for line in reversed(lines[:at]):
        if not line.strip().startswith("#"):
            break
        above.append(line.strip().lstrip("# "))
    return " ".join(reversed(above))


def test_dra_why_comments(tree_for: TreeFor) -> None:
    tree = tree_for("dra", 5)
    dra = tree["kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"]
    assert "device plugin is off" in comment_above(dra, "gpuResourcesEnabledOverride")
    assert "Talos" in comment_above(dra, "nvidiaDriverRoot")
    assert "/usr/local" in comment_above(dra, "nvidiaDriverRoot")
    assert "replicas: 5" in comment_above(dra, "consumableShares")
    assert "exits at start" in comment_above(dra, "featureGates")
    ks = tree["kubernetes/apps/media/gpu-claim-templates/ks.yaml"]
    assert "immutable" in comment_above(ks, "force")
    op = tree["kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"]
    assert "same card twice" in comment_above(op.split("devicePlugin:")[1], "enabled")


# --- standalone device plugin ---------------------------------------------------------------


def test_device_plugin_mirrors_the_talos_setup(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("device-plugin", 5)
    v = values(docs, tree, "gpu-operator/nvidia-device-plugin/app/helmrelease.yaml")
    assert v["deviceDiscoveryStrategy"] == "nvml"
    assert v["deviceListStrategy"] == "envvar"
    assert v["runtimeClassName"] == "nvidia"
    assert v["nfd"] == {"enabled": True}
    assert v["gfd"] == {"enabled": True}
    assert v["config"]["default"] == "any"
    assert yaml.safe_load(v["config"]["map"]["any"])["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 5}
    ]
    assert not any("/gpu-operator/gpu-operator/" in p for p in tree)
    assert "kubernetes/apps/gpu-operator/nvidia-device-plugin/app/runtimeclass.yaml" in tree


def test_device_plugin_dcgm_exporter_takes_no_share(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("device-plugin", 5)
    v = values(docs, tree, "gpu-operator/dcgm-exporter/app/helmrelease.yaml")
    assert "resources" not in v
    assert v["serviceMonitor"] == {"enabled": True}
    assert v["runtimeClassName"] == "nvidia"
    term = v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # No GPU Operator: NFD's PCI label marks GPU nodes, not nvidia.com/gpu.present.
    assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == (
        "feature.node.kubernetes.io/pci-10de.present"
    )
    (ks,) = docs(tree, "gpu-operator/dcgm-exporter/ks.yaml")
    assert ks["spec"]["dependsOn"] == [{"name": "nvidia-device-plugin"}]


def test_device_plugin_consumers(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("device-plugin", "exclusive")
    v = values(docs, tree, "gpu-operator/nvidia-device-plugin/app/helmrelease.yaml")
    assert "config" not in v
    jellyfin = values(docs, tree, "media/jellyfin/app/helmrelease.yaml")
    resources = jellyfin["controllers"]["jellyfin"]["containers"]["app"]["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": 1}
    (ks,) = docs(tree, "media/jellyfin/ks.yaml")
    assert ks["spec"]["dependsOn"] == [
        {"name": "nvidia-device-plugin", "namespace": "gpu-operator"}
    ]


# --- cluster variations ---------------------------------------------------------------------


def test_tolerations_reach_the_stack_and_consumers(
    tree_for: TreeFor, docs: Docs, homelab_data: dict[str, Any]
) -> None:
    cluster = homelab_data["cluster"]
    cluster["gpuNodes"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "ai", "effect": "NoSchedule"}
    ]
    dedicated = {"key": "dedicated", "operator": "Equal", "value": "ai", "effect": "NoSchedule"}
    chart_default = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    tree = tree_for("dra", 5, cluster=cluster)
    dra = values(docs, tree, "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    assert dra["kubeletPlugin"]["tolerations"] == [chart_default, dedicated]
    op = values(docs, tree, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    assert op["daemonsets"]["tolerations"] == [chart_default, dedicated]
    jellyfin = values(docs, tree, "media/jellyfin/app/helmrelease.yaml")
    assert jellyfin["defaultPodOptions"]["tolerations"] == [dedicated]
    _, service = docs(tree, "ai/llmkube/models/llama-nvidia.yaml")
    assert service["spec"]["tolerations"] == [dedicated]


def test_operator_managed_driver_under_dra(
    tree_for: TreeFor, docs: Docs, homelab_data: dict[str, Any]
) -> None:
    cluster = homelab_data["cluster"]
    cluster["talos"] = False
    tree = tree_for("dra", 5, cluster=cluster)
    op = values(docs, tree, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    # The documented operator + standalone DRA driver recipe (operator-managed driver).
    assert op["driver"]["enabled"] is True
    assert op["driver"]["manager"]["env"] == [
        {"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": "nvidia.com/dra-kubelet-plugin"}
    ]
    assert "toolkit" not in op
    assert "hostPaths" not in op
    dra = values(docs, tree, "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    assert dra["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert dra["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/dra-kubelet-plugin": "true"}
    # The operator's own toolkit creates the RuntimeClass.
    assert "kubernetes/apps/gpu-operator/gpu-operator/app/runtimeclass.yaml" not in tree


def test_deployment_consumer(tree_for: TreeFor, docs: Docs) -> None:
    consumers = [
        {"namespace": "lab", "name": "cuda-job", "style": "deployment", "image": "nvcr.io/x:1"}
    ]
    tree = tree_for("dra", 5, consumers=consumers)
    (deploy,) = docs(tree, "lab/cuda-job/app/deployment.yaml")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}]
    assert pod["containers"] == [
        {"name": "app", "image": "nvcr.io/x:1", "resources": {"claims": [{"name": "gpu"}]}}
    ]
    assert pod["runtimeClassName"] == "nvidia"
    assert "kubernetes/apps/lab/gpu-claim-templates/app/resourceclaimtemplate.yaml" in tree
    plain = tree_for("gpu-operator", 5, consumers=consumers)
    (deploy,) = docs(plain, "lab/cuda-job/app/deployment.yaml")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "requests": {"nvidia.com/gpu": 1},
        "limits": {"nvidia.com/gpu": 1},
    }


def test_namespace_kustomizations_list_every_app(tree_for: TreeFor, docs: Docs) -> None:
    tree = tree_for("dra", 5)
    (media,) = docs(tree, "media/kustomization.yaml")
    assert media["namespace"] == "media"
    assert media["resources"] == [
        "./namespace.yaml",
        *sorted(f"./{app}/ks.yaml" for app in (*MEDIA_APPS, "gpu-claim-templates")),
    ]
    (gpu,) = docs(tree, "gpu-operator/kustomization.yaml")
    assert gpu["resources"] == [
        "./namespace.yaml",
        "./dra-driver-nvidia-gpu/ks.yaml",
        "./gpu-operator/ks.yaml",
    ]
    (ns,) = docs(tree, "media/namespace.yaml")
    assert ns["metadata"]["name"] == "media"
    assert ns["metadata"]["annotations"] == {"kustomize.toolkit.fluxcd.io/prune": "disabled"}


# --- agreement with the engine's NVIDIA facts -------------------------------------------------


def test_claim_template_class_is_the_chart_class_that_bridges_nvidia_gpu() -> None:
    from gpushift.engine import nvidia_device_classes
    from gpushift.render._config import GPU_DEVICE_CLASS

    bridging = [
        c["metadata"]["name"]
        for c in nvidia_device_classes()
        if c["spec"].get("extendedResourceName") == "nvidia.com/gpu"
    ]
    assert bridging == [GPU_DEVICE_CLASS]


def test_rendered_consumable_shares_are_what_the_kubelet_plugin_accepts(
    tree_for: TreeFor, docs: Docs, homelab_data: dict[str, Any]
) -> None:
    from gpushift.engine import parse_consumable_shares

    media = [c for c in homelab_data["consumers"] if c["namespace"] == "media"]
    path = "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"
    for sharing, extra in ((1, {}), (5, {}), ("unlimited", {}), ("memory", {"consumers": media})):
        v = values(docs, tree_for("dra", sharing, **extra), path)
        assert parse_consumable_shares(v["consumableShares"]) == sharing
        assert v["featureGates"] == {"ConsumableShares": True}


def test_observability_off(tree_for: TreeFor, docs: Docs) -> None:
    off = {"dcgmExporter": False, "serviceMonitor": False}
    tree = tree_for("dra", 5, observability=off)
    op = values(docs, tree, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    assert op["dcgmExporter"] == {"enabled": False}
    assert "kubernetes/apps/gpu-operator/gpu-operator/app/dcgm-exporter-rbac.yaml" not in tree
    plugin = tree_for("device-plugin", 5, observability=off)
    assert not any("/dcgm-exporter/" in p for p in plugin)
    no_monitor = tree_for("gpu-operator", 5, observability={"serviceMonitor": False})
    op = values(docs, no_monitor, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    assert op["dcgmExporter"] == {"enabled": True, "serviceMonitor": {"enabled": False}}


def test_cdi_off_and_no_runtime_class(
    tree_for: TreeFor, docs: Docs, homelab_data: dict[str, Any]
) -> None:
    cluster = homelab_data["cluster"]
    cluster["cdi"] = False
    cluster["runtimeClassName"] = None
    tree = tree_for("gpu-operator", 5, cluster=cluster)
    op = values(docs, tree, "gpu-operator/gpu-operator/app/helmrelease.yaml")
    assert op["cdi"] == {"enabled": False, "default": False}
    assert not any(p.endswith("runtimeclass.yaml") for p in tree)
    assert not any("runtimeClassName" in text for text in tree.values())
