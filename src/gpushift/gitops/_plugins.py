"""The NVIDIA device plugins a repository deploys, whatever deploys them.

One list serves the summary and every rule, so that they agree on whether the device plugin
allocates and how it shares: gpu-operator's plugin (``devicePlugin.enabled``, default true, run
by its ClusterPolicy), the standalone chart's (``devicePlugin.enabled``, default true), and
DaemonSets written as manifests. A manifest is the plugin when a container runs the
``k8s-device-plugin`` image (NVIDIA's and gpu-operator's: ``nvcr.io/nvidia/k8s-device-plugin``)
as the plugin, not as ``gpu-feature-discovery``, ``mps-control-daemon`` or ``config-manager``
(the same image's other binaries), or, for a mirrored image, when the DaemonSet or a container
carries the static manifest's ``nvidia-device-plugin`` names.

A manifest's sharing config is read the way the plugin reads it: the ``--config-file`` flag,
else the ``CONFIG_FILE`` env (NVIDIA/k8s-device-plugin cmd/nvidia-device-plugin/main.go),
a path that a volume mount puts inside a ConfigMap volume (``items`` map keys to paths,
``subPath`` names one file), whose data key holds the same config file as the chart's.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gpushift.gitops._model import (
    DevicePlugin,
    DevicePluginConfig,
    DevicePluginDeployer,
    HelmRelease,
    Manifest,
    TimeSlicingConfig,
    Workload,
)
from gpushift.gitops._nodes import NodePool, node_pool
from gpushift.gitops._summary import truthy
from gpushift.gitops._timeslicing import parse_config

#: The image every NVIDIA device plugin runs (the standalone chart, the static manifest and
#: gpu-operator's ``devicePlugin.image``).
PLUGIN_IMAGE = "k8s-device-plugin"
#: The image's other binaries: these containers are not the plugin.
_OTHER_BINARIES = frozenset({"gpu-feature-discovery", "mps-control-daemon", "config-manager"})
#: The static manifest's names (DaemonSet nvidia-device-plugin-daemonset, container
#: nvidia-device-plugin-ctr).
_STATIC_PREFIX = "nvidia-device-plugin"
_FLAG = "config-file"
_ENV = "CONFIG_FILE"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def operator_runs_plugin(hr: HelmRelease) -> bool:
    """gpu-operator runs the device plugin unless ``devicePlugin.enabled`` is false or it
    deploys no ClusterPolicy (``clusterPolicy.deployCR``, default true), whose operand it is."""
    return truthy(hr.value("devicePlugin", "enabled"), default=True) and truthy(
        hr.value("clusterPolicy", "deployCR"), default=True
    )


def standalone_runs_plugin(hr: HelmRelease) -> bool:
    """The standalone chart runs its plugin unless ``devicePlugin.enabled`` is false (a copy
    with it off runs only GFD)."""
    return truthy(hr.value("devicePlugin", "enabled"), default=True)


def config_file_flag(tokens: Sequence[str]) -> str | None:
    """The ``--config-file`` value of a command line, as Go's flag parsing reads it: ``-`` or
    ``--``, ``=value`` or the next token; the last one given wins; ``--`` ends the flags.
    None when the flag is absent (or has no value)."""
    found: str | None = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":
            break
        if tok.startswith("-") and tok != "-":
            name, eq, value = tok.lstrip("-").partition("=")
            if name == _FLAG:
                if eq:
                    found = value
                elif i + 1 < len(tokens):
                    found = tokens[i + 1]
                    i += 1
        i += 1
    return found


def _image_name(image: Any) -> str:
    """The image's last path segment without tag or digest."""
    ref = str(image or "").split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def _runs_other_binary(container: Mapping[str, Any]) -> bool:
    cmd = [str(t) for t in _list(container.get("command"))]
    # The binary is the command (or a wrapper's first argument).
    return any(posixpath.basename(t) in _OTHER_BINARIES for t in cmd[:2])


def plugin_container(pod: Mapping[str, Any], *, name: str) -> Mapping[str, Any] | None:
    """The container of a DaemonSet's pod spec that runs the device plugin, or None."""
    containers = [c for c in _list(pod.get("containers")) if isinstance(c, dict)]
    by_image = [c for c in containers if _image_name(c.get("image")) == PLUGIN_IMAGE]
    if by_image:
        return next((c for c in by_image if not _runs_other_binary(c)), None)
    named = [c for c in containers if str(c.get("name", "")).startswith(_STATIC_PREFIX)]
    if named:
        return named[0]
    if name.startswith(_STATIC_PREFIX) and containers:
        return containers[0]
    return None


#: gpu-feature-discovery's own image, before it moved into the plugin's.
_GFD = "gpu-feature-discovery"


def runs_gfd(obj: Manifest) -> bool:
    """Whether a DaemonSet manifest runs gpu-feature-discovery: a container of its own image,
    or of the plugin's image running the ``gpu-feature-discovery`` binary, or the DaemonSet
    named after it."""
    if obj.kind != "DaemonSet":
        return False
    if obj.name.startswith(_GFD):
        return True
    spec = _dict(_dict(_dict(obj.body.get("spec")).get("template")).get("spec"))
    for c in _list(spec.get("containers")):
        if not isinstance(c, dict):
            continue
        image = _image_name(c.get("image"))
        cmd = [posixpath.basename(str(t)) for t in _list(c.get("command"))[:1]]
        if image == _GFD or (image == PLUGIN_IMAGE and cmd == [_GFD]):
            return True
    return False


def _tokens(container: Mapping[str, Any]) -> list[str]:
    cmd = [str(t) for t in _list(container.get("command"))]
    # The binary itself is the command's first token (or the image's entrypoint).
    return cmd[1:] + [str(t) for t in _list(container.get("args"))]


def _env_value(container: Mapping[str, Any], name: str) -> str | None:
    for e in _list(container.get("env")):
        if isinstance(e, dict) and e.get("name") == name and "value" in e:
            v = e.get("value")
            return None if v is None else str(v)
    return None


def config_path(container: Mapping[str, Any]) -> str | None:
    """The config file the plugin container loads: the flag, else the env (urfave/cli reads
    the env only when the flag is not given); None or "" for none."""
    flag = config_file_flag(_tokens(container))
    if flag is not None:
        return flag or None
    return _env_value(container, _ENV) or None


def _mounted(
    path: str, container: Mapping[str, Any], pod: Mapping[str, Any]
) -> tuple[Mapping[str, Any], str] | None:
    """The volume holding ``path`` and the file's path inside it (deepest mount wins)."""
    best: tuple[int, str, str] | None = None  # (mount path length, volume name, inner path)
    for m in _list(container.get("volumeMounts")):
        if not isinstance(m, dict) or not m.get("mountPath") or not m.get("name"):
            continue
        mount = posixpath.normpath(str(m["mountPath"]))
        sub = str(m.get("subPath") or "")
        target = posixpath.normpath(path)
        prefix = mount.rstrip("/") + "/"
        if target == mount and sub:
            inner = posixpath.normpath(sub)
        elif target.startswith(prefix):
            rest = target[len(prefix) :]
            inner = posixpath.normpath(posixpath.join(sub, rest)) if sub else rest
        else:
            continue
        if best is None or len(mount) > best[0]:
            best = (len(mount), str(m["name"]), inner)
    if best is None:
        return None
    volume = next(
        (v for v in _list(pod.get("volumes")) if isinstance(v, dict) and v.get("name") == best[1]),
        None,
    )
    return (volume, best[2]) if volume is not None else None


def _config_maps(volume: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    if isinstance(volume.get("configMap"), dict):
        yield volume["configMap"]
    for src in _list(_dict(volume.get("projected")).get("sources")):
        if isinstance(src, dict) and isinstance(src.get("configMap"), dict):
            yield src["configMap"]


def config_map_key(volume: Mapping[str, Any], inner: str) -> tuple[str, str] | None:
    """(ConfigMap name, data key) of the file ``inner`` of a ConfigMap (or projected) volume:
    through ``items`` (key to path) when given, else the file name is the key."""
    for cm in _config_maps(volume):
        name = cm.get("name")
        if not name:
            continue
        items = [i for i in _list(cm.get("items")) if isinstance(i, dict)]
        if items:
            for item in items:
                if posixpath.normpath(str(item.get("path", ""))) == inner and item.get("key"):
                    return str(name), str(item["key"])
            continue
        if "/" not in inner:
            return str(name), inner
    return None


def _manifest_plugin(
    w: Workload, *, objects: Sequence[Manifest], configs: list[TimeSlicingConfig]
) -> DevicePlugin | None:
    spec = _dict(_dict(_dict(w.origin.body.get("spec")).get("template")).get("spec"))
    container = plugin_container(spec, name=w.name)
    if container is None:
        return None
    pool = node_pool(spec.get("nodeSelector"), spec.get("affinity"))
    path = config_path(container)
    if path is None:
        return DevicePlugin("manifest", w.origin, pool, workload=w)
    mounted = _mounted(path, container, spec)
    found = config_map_key(mounted[0], mounted[1]) if mounted is not None else None
    if found is None:
        return DevicePlugin(
            "manifest", w.origin, pool, workload=w, config_file=path, missing="volume"
        )
    name, key = found
    ns = w.namespace
    maps = [
        o
        for o in objects
        if o.kind == "ConfigMap"
        and o.name == name
        and (o.namespace is None or ns is None or o.namespace == ns)
    ]
    # A deployed plugin mounts only a deployed ConfigMap.
    cm = next((o for o in maps if o.active), None if w.active or not maps else maps[0])
    selected: TimeSlicingConfig | None = None
    missing: Any = None
    if cm is None:
        missing = "configmap"
    else:
        selected = next(
            (
                c
                for c in configs
                if c.config_map == name
                and c.key == key
                and c.form != "inline"
                and c.namespace == cm.namespace
            ),
            None,
        )
        text = _dict(cm.body.get("data")).get(key)
        if selected is None and text is not None:
            # The plugin parses whatever the key holds, config-looking or not.
            selected = parse_config(
                text,
                config_map=name,
                key=key,
                namespace=cm.namespace,
                form="generator" if cm.generated else "configmap",
                active=cm.active,
                source=cm.source if cm.generated else cm.source.child(("data", key)),
            )
            configs.append(selected)
        elif selected is None:
            missing = "default-key"
    return DevicePlugin(
        "manifest",
        w.origin,
        pool,
        workload=w,
        config_file=path,
        config_map=name,
        config_key=key,
        selected=selected,
        missing=missing,
    )


def device_plugins(
    *,
    releases: Sequence[HelmRelease],
    workloads: Sequence[Workload],
    pointers: Sequence[DevicePluginConfig],
    objects: Sequence[Manifest],
    configs: list[TimeSlicingConfig],
) -> tuple[DevicePlugin, ...]:
    """Every device plugin the tree defines: the charts' in release order, then DaemonSet
    manifests. A config a manifest's plugin loads that is not config-shaped text is parsed
    and appended to ``configs``, as for a chart's named ConfigMap."""
    out: list[DevicePlugin] = []
    by_owner = {id(p.owner): p for p in pointers}
    for hr in releases:
        ptr = by_owner.get(id(hr))
        deployer: DevicePluginDeployer
        if hr.chart == "gpu-operator" and operator_runs_plugin(hr):
            # The operator's DaemonSet selects nvidia.com/gpu.deploy.device-plugin=true, which
            # it sets on every GPU node: no pool of its own.
            deployer, pool = "gpu-operator", NodePool()
        elif hr.chart == "nvidia-device-plugin" and standalone_runs_plugin(hr):
            deployer = "nvidia-device-plugin"
            pool = node_pool(hr.value("nodeSelector"), hr.value("affinity"))
        else:
            continue
        out.append(
            DevicePlugin(
                deployer,
                hr.obj,
                pool,
                release=hr,
                config=ptr,
                config_map=ptr.config_map if ptr is not None else None,
                config_key=ptr.default if ptr is not None else None,
                selected=ptr.selected if ptr is not None else None,
                missing=ptr.missing if ptr is not None else None,
            )
        )
    for w in workloads:
        if w.kind == "DaemonSet" and w.origin_kind == "manifest":
            plugin = _manifest_plugin(w, objects=objects, configs=configs)
            if plugin is not None:
                out.append(plugin)
    return tuple(out)
