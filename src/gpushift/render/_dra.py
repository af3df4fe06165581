"""The dra-driver-nvidia-gpu component (allocator ``dra``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift._yamlout import Note
from gpushift.render import _common as c
from gpushift.render._config import GpushiftConfig
from gpushift.render._flux import (
    Files,
    Ref,
    component,
    flux_kustomization,
    helm_release,
    oci_repository,
)
from gpushift.render._gpu_operator import DRA_PLUGIN_NODE_LABEL


def render(cfg: GpushiftConfig) -> Files:
    """The DRA driver: OCIRepository, HelmRelease and a ks.yaml that waits for gpu-operator."""
    ns = cfg.cluster.gpu_namespace
    app: dict[str, list[Mapping[str, Any]]] = {
        "ocirepository.yaml": [oci_repository(name=c.DRA_DRIVER, chart=cfg.charts.dra_driver)],
        "helmrelease.yaml": [helm_release(name=c.DRA_DRIVER, values=_values(cfg))],
    }
    ks = flux_kustomization(
        cfg=cfg,
        name=c.DRA_DRIVER,
        namespace=ns,
        path=f"{ns}/{c.DRA_DRIVER}/app",
        depends_on=[
            Note(
                Ref(c.GPU_OPERATOR),
                "The device plugin must be gone before the kubelet plugin advertises the "
                "GPUs, or two allocators hand out the same card. The operator deletes its "
                "device plugin asynchronously, so drain GPU pods during the switch as well.",
            )
        ],
        health_checks=[c.DRA_DRIVER],
        health_note="Claim templates and consumers depend on this release being Ready.",
    )
    files = Files()
    component(files, namespace=ns, name=c.DRA_DRIVER, app=app, ks=[ks])
    return files


def _values(cfg: GpushiftConfig) -> dict[str, Any]:
    cluster = cfg.cluster
    root = cluster.effective_driver_root
    if cluster.talos:
        root_why = (
            f"Talos ships the driver as a system extension rooted at {root}, not at the host "
            "root; the kubelet plugin finds nvidia-smi and libnvidia-ml there."
        )
    elif cluster.driver_is_preinstalled:
        root_why = "The driver is preinstalled on the hosts."
    else:
        root_why = "gpu-operator's driver container exposes the driver it installs here."
    values: dict[str, Any] = {
        "nvidiaDriverRoot": Note(root, root_why),
        "gpuResourcesEnabledOverride": Note(
            True,
            "Acknowledges that the device plugin is off (gpu-operator devicePlugin.enabled: "
            "false). The chart refuses to advertise GPUs without it, as a guard against two "
            "allocators handing out the same card.",
        ),
        "resources": {
            "gpus": {"enabled": True},
            "computeDomains": Note(
                {"enabled": False},
                "Multi-node NVLink (IMEX) domains; not needed for sharing GPUs, and off keeps "
                "the chart to the kubelet plugin DaemonSet.",
            ),
        },
    }
    sharing = cfg.sharing
    if sharing != "exclusive":
        values["featureGates"] = Note(
            {"ConsumableShares": True},
            "consumableShares needs this gate (alpha, driver 0.5); without it the kubelet "
            "plugin exits at start.",
        )
        values["consumableShares"] = Note(sharing, _shares_why(cfg))
    plugin: dict[str, Any] = {}
    if not cluster.driver_is_preinstalled:
        plugin["nodeSelector"] = Note(
            {DRA_PLUGIN_NODE_LABEL: "true"},
            "Label GPU nodes with this; gpu-operator's driver manager clears it to evict the "
            "plugin during driver upgrades.",
        )
    if cluster.gpu_nodes.tolerations:
        plugin["tolerations"] = Note(
            c.with_default_tolerations(cfg, c.DRA_DEFAULT_TOLERATIONS),
            "The chart's default toleration plus the GPU nodes' taints (a list replaces the "
            "default).",
        )
    if plugin:
        values["kubeletPlugin"] = plugin
    return values


def _shares_why(cfg: GpushiftConfig) -> str:
    sharing = cfg.sharing
    if isinstance(sharing, int):
        return (
            f"Stands in for the device plugin's time-slicing replicas: {sharing}. Each GPU is "
            f"published with allowMultipleAllocations and {sharing} consumable shares, and a "
            "claim takes one by default, so each card still admits the same number of pods."
        )
    if sharing == "memory":
        return (
            "Each claim takes the GPU memory it requests (capacity.requests.memory, see the "
            "any-nvidia-gpu templates); a claim that asks for none takes the whole card."
        )
    return (
        "Any number of claims may share a card. Memory requests are accounted, but nothing "
        "caps the number of claims per card, and spreading is only advisory."
    )
