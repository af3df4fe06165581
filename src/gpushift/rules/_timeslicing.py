"""Rules about the device plugin's time-slicing config (``sharing.timeSlicing``)."""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import (
    GPU_RESOURCE,
    DevicePlugin,
    DevicePluginConfig,
    TimeSlicingConfig,
    truthy,
)
from gpushift.reports import Finding
from gpushift.rules._context import Context


def config_problem(config: TimeSlicingConfig) -> str | None:
    """Why the device plugin would reject ``config``, in its own words, or None.

    Texts from NVIDIA/k8s-device-plugin api/config/v1 (replicas.go). Only a ``sharing`` block
    that is present is checked: ``version: v1`` with ``flags`` alone is a whole-card config.
    MPS shares only full GPUs (the plugin's README, "With CUDA MPS": MPS is applied to the
    ``nvidia.com/gpu`` resource and is not supported with MIG devices).
    """
    if config.error:
        return config.error
    if config.strategy == "mps":
        others = sorted({r.name for r in config.resources if r.name != GPU_RESOURCE})
        if others:
            return f"MPS sharing is only supported for {GPU_RESOURCE}, not {', '.join(others)}"
    return None


def check(*, ctx: Context) -> Iterator[Finding]:
    """time-slicing-invalid and time-slicing-config-missing."""
    for config in ctx.repo.time_slicing:
        if not config.active:
            continue
        problem = config_problem(config)
        if problem is None:
            continue
        yield ctx.finding(
            "time-slicing-invalid",
            source=config.source,
            line=_config_line(config),
            obj=f"ConfigMap/{config.namespace}/{config.config_map}"
            if config.namespace
            else f"ConfigMap/{config.config_map}",
            msg=(f"time-slicing config {config.key!r} is rejected by the device plugin: {problem}"),
        )
    for dp in ctx.repo.device_plugin_configs:
        if dp.missing is None or not dp.owner.active or not _consumed(dp):
            continue
        yield _missing(ctx, dp)
    for plugin in ctx.plugin_advertisers:
        if plugin.deployer == "manifest" and plugin.missing in ("configmap", "default-key"):
            yield _manifest_missing(ctx, plugin)


def _config_line(config: TimeSlicingConfig) -> int:
    """The data key of a ConfigMap form; the config's own line otherwise."""
    if config.form == "configmap":
        return config.source.line_of(("data", config.key))
    return config.source.line


def _consumed(dp: DevicePluginConfig) -> bool:
    """Whether anything reads the config: the device plugin, or GFD (which reads it even with
    the plugin off, NVIDIA/gpu-operator controllers/object_controls.go)."""
    owner = dp.owner
    if owner.chart != "gpu-operator":
        return True
    plugin = truthy(owner.value("devicePlugin", "enabled"), default=True)
    gfd = truthy(owner.value("gfd", "enabled"), default=True)
    return plugin or gfd


def _missing(ctx: Context, dp: DevicePluginConfig) -> Finding:
    owner = dp.owner
    prefix = ("devicePlugin", "config") if owner.chart == "gpu-operator" else ("config",)
    shown = ".".join(prefix)
    ns = owner.target_namespace or owner.namespace
    where = f" in namespace {ns}" if ns else ""
    if dp.missing == "configmap":
        line = owner.line_of(*prefix, "name")
        msg = f"{shown}.name names ConfigMap {dp.config_map!r}, which does not exist{where}"
    else:
        line = owner.line_of(*prefix, "default")
        keys = ", ".join(sorted(c.key for c in dp.configs)) or "none"
        msg = (
            f"{shown}.default is {dp.default!r}, which is not a key of ConfigMap "
            f"{dp.config_map!r} (keys: {keys}); the plugin cannot load its default config"
        )
    return ctx.about(
        "time-slicing-config-missing",
        owner,
        line=line,
        msg=msg,
    )


def _manifest_missing(ctx: Context, plugin: DevicePlugin) -> Finding:
    """A DaemonSet's plugin loads its config from a ConfigMap volume the tree cannot serve:
    the ConfigMap is missing, or it has no such key."""
    w = plugin.workload
    src = plugin.source
    line = src.line
    if w is not None and "volumes" in w.pod.option_sources:
        src = w.pod.option_source("volumes")
        line = src.line_of(())
    where = f" in namespace {plugin.obj.namespace}" if plugin.obj.namespace else ""
    if plugin.missing == "configmap":
        msg = (
            f"the device plugin loads {plugin.config_file} from ConfigMap "
            f"{plugin.config_map!r}, which does not exist{where}: the volume cannot be "
            "mounted and the plugin does not start"
        )
    else:
        msg = (
            f"the device plugin loads {plugin.config_file} from key {plugin.config_key!r} of "
            f"ConfigMap {plugin.config_map!r}, which has no such key: the plugin cannot load "
            "its config"
        )
    return ctx.finding(
        "time-slicing-config-missing", source=src, line=line, obj=plugin.name, msg=msg
    )
