"""The standalone dcgm-exporter component (allocator ``device-plugin``; gpu-operator ships its
own).
"""

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


def render(cfg: GpushiftConfig) -> Files:
    """dcgm-exporter on the GPU nodes, with a ServiceMonitor if configured, and no GPU request."""
    ns = cfg.cluster.gpu_namespace
    files = Files()
    values: dict[str, Any] = {}
    if cfg.cluster.runtime_class_name:
        values["runtimeClassName"] = Note(
            cfg.cluster.runtime_class_name,
            "Sees every GPU through the nvidia runtime. It must not request nvidia.com/gpu: "
            "that would take one of the shares workloads are meant to have.",
        )
    values["affinity"] = c.gpu_node_affinity(cfg)
    if cfg.cluster.gpu_nodes.tolerations:
        values["tolerations"] = c.tolerations(cfg)
    values["serviceMonitor"] = {"enabled": cfg.observability.service_monitor}
    app: dict[str, list[Mapping[str, Any]]] = {
        "ocirepository.yaml": [
            oci_repository(name=c.DCGM_EXPORTER, chart=cfg.charts.dcgm_exporter)
        ],
        "helmrelease.yaml": [helm_release(name=c.DCGM_EXPORTER, values=values)],
    }
    ks = flux_kustomization(
        cfg=cfg,
        name=c.DCGM_EXPORTER,
        namespace=ns,
        path=f"{ns}/{c.DCGM_EXPORTER}/app",
        depends_on=[Ref(c.DEVICE_PLUGIN)],
    )
    component(files, namespace=ns, name=c.DCGM_EXPORTER, app=app, ks=[ks])
    return files
