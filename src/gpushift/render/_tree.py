"""Assembling the whole Flux tree for one config."""

from __future__ import annotations

from gpushift._sharing import Allocator
from gpushift.render import _consumers, _dcgm_exporter, _device_plugin, _dra, _gpu_operator
from gpushift.render._config import GpushiftConfig
from gpushift.render._flux import Files, apps_path, kustomization, namespace_object


def render_tree(config: GpushiftConfig) -> dict[str, str]:
    """Every file of the rendered tree: path relative to the output directory → YAML text.

    Paths start with the config's apps path (``kubernetes/apps/…``) and are sorted. Equal
    configs give equal trees, byte for byte.
    """
    files = Files()
    if config.allocator is Allocator.DEVICE_PLUGIN:
        files.update(_device_plugin.render(config))
        if config.observability.dcgm_exporter:
            files.update(_dcgm_exporter.render(config))
    else:
        files.update(_gpu_operator.render(config))
    if config.allocator is Allocator.DRA:
        # Under gpucluster the operator runs the DRA driver itself.
        files.update(_dra.render(config))
    files.update(_consumers.render(config))
    _add_namespaces(files)
    root = apps_path(config).removeprefix("./")
    return {f"{root}/{path}": files.files[path] for path in sorted(files.files)}


def _add_namespaces(files: Files) -> None:
    """Per namespace: the Namespace and a kustomization.yaml listing its apps' ks.yaml."""
    by_ns: dict[str, list[str]] = {}
    for path in files.files:
        ns, _, rest = path.partition("/")
        if rest.count("/") == 1 and rest.endswith("/ks.yaml"):
            by_ns.setdefault(ns, []).append(f"./{rest}")
    for ns, ks_paths in sorted(by_ns.items()):
        files.add(f"{ns}/namespace.yaml", [namespace_object(ns)])
        files.add(
            f"{ns}/kustomization.yaml",
            [kustomization(["./namespace.yaml", *sorted(ks_paths)], namespace=ns)],
        )
