"""The standalone nvidia-device-plugin component (allocator ``device-plugin``).

The values mirror the documented Talos setup of the standalone chart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift._yamlout import Note
from gpushift.render import _common as c
from gpushift.render._config import GpushiftConfig
from gpushift.render._flux import (
    Files,
    component,
    flux_kustomization,
    helm_release,
    oci_repository,
)


def render(cfg: GpushiftConfig) -> Files:
    """nvidia-device-plugin (with NFD and GFD): OCIRepository, HelmRelease, ks.yaml and the
    RuntimeClass its pods and the consumers name."""
    ns = cfg.cluster.gpu_namespace
    files = Files()
    app: dict[str, list[Mapping[str, Any]]] = {
        "ocirepository.yaml": [
            oci_repository(name=c.DEVICE_PLUGIN, chart=cfg.charts.device_plugin)
        ],
        "helmrelease.yaml": [helm_release(name=c.DEVICE_PLUGIN, values=_plugin_values(cfg))],
    }
    if cfg.cluster.runtime_class_name:
        app["runtimeclass.yaml"] = [c.runtime_class(cfg.cluster.runtime_class_name)]
    ks = flux_kustomization(
        cfg=cfg,
        name=c.DEVICE_PLUGIN,
        namespace=ns,
        path=f"{ns}/{c.DEVICE_PLUGIN}/app",
        health_checks=[c.DEVICE_PLUGIN],
        health_note="Consumers depend on this Kustomization; wait for the release, not the apply.",
    )
    component(files, namespace=ns, name=c.DEVICE_PLUGIN, app=app, ks=[ks])
    return files


def _plugin_values(cfg: GpushiftConfig) -> dict[str, Any]:
    talos = cfg.cluster.talos
    values: dict[str, Any] = {}
    if isinstance(cfg.sharing, int):
        values["config"] = Note(
            {
                "default": c.TIME_SLICING_KEY,
                "map": {c.TIME_SLICING_KEY: c.time_slicing_config(cfg.sharing)},
            },
            f"Time-slicing: each GPU is advertised as {cfg.sharing} nvidia.com/gpu.",
        )
    values["deviceDiscoveryStrategy"] = Note(
        "nvml",
        "The auto probe looks for files at paths Talos does not have; NVML works everywhere "
        "the driver does."
        if talos
        else "Discover GPUs through NVML (no Tegra probing).",
    )
    values["deviceListStrategy"] = Note(
        "envvar",
        "CDI hostPath mounts fail on Talos's driver library paths; the nvidia runtime "
        "injects devices from NVIDIA_VISIBLE_DEVICES instead."
        if talos
        else "The nvidia runtime injects devices from NVIDIA_VISIBLE_DEVICES.",
    )
    if cfg.cluster.runtime_class_name:
        values["runtimeClassName"] = cfg.cluster.runtime_class_name
    values["nfd"] = {"enabled": True}
    values["gfd"] = Note(
        {"enabled": True}, "GPU Feature Discovery labels GPU nodes (product, memory, count)."
    )
    if cfg.cluster.gpu_nodes.tolerations:
        values["tolerations"] = Note(
            c.with_default_tolerations(cfg, c.DEVICE_PLUGIN_DEFAULT_TOLERATIONS),
            "The chart's default tolerations plus the GPU nodes' taints (a list replaces the "
            "default).",
        )
    return values
