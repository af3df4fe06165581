"""squat/generic-device-plugin: the extended resources a running plugin pod registers.

The plugin (config.go, main.go, deviceplugin/path.go) takes its devices from ``--device``
flags (YAML or JSON each, repeatable) or, without them, from the ``devices`` of its config
file (``--config PATH``, else ``/etc/generic-device-plugin/config.yaml`` or ``config.yaml`` in
its working directory); ``--domain`` (or the file's ``domain``, default ``squat.ai``) prefixes
each name: ``{"name": "tun", …}`` with ``--domain kernel.org`` is ``kernel.org/tun``. Each
group of a device yields ``count`` (default 1) devices per match of its paths; the twin's
nodes have every device file a plugin asks for, once, so a device's units are the sum of its
groups' counts. Older images take ``--device name,path,…``: one unit per path.

Pure: the pod, its main container and the ConfigMaps in; the resources out.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

import yaml

from gpushift.common import Obj, load_yaml

IMAGE = "generic-device-plugin"
DEFAULT_DOMAIN = "squat.ai"
_DEFAULT_CONFIGS = ("/etc/generic-device-plugin/config.yaml", "config.yaml")
_NAME = re.compile(r"^[a-z0-9][-a-z0-9]*[a-z0-9]$")


def is_generic_plugin(container: Obj) -> bool:
    """Whether ``container`` runs squat/generic-device-plugin (by its image)."""
    image = str(container.get("image", "")).split("@", 1)[0]
    last = image.rsplit("/", 1)[-1].split(":", 1)[0]
    return last == IMAGE


def _flags(args: list[str]) -> dict[str, list[str]]:
    # pflag: --name value and --name=value; repeated flags accumulate (StringArray).
    out: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            continue
        name, eq, value = arg[2:].partition("=")
        if not eq:
            if name in ("version",) or i >= len(args):
                continue
            value = args[i]
            i += 1
        out.setdefault(name, []).append(value)
    return out


def _load(text: str) -> Any:
    # ghodss/yaml: YAML or JSON; the plugin exits on anything else, registering nothing.
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return None


def _units(spec: Any) -> tuple[str, int] | None:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
        return None
    name = spec["name"].strip()
    if not _NAME.match(name):
        return None  # main.go: the plugin exits on such a name
    total = 0
    for group in spec.get("groups") or []:
        if not isinstance(group, Mapping):
            continue
        count = group.get("count")
        total += count if isinstance(count, int) and count > 0 else 1
    return name, total


def _config_file(
    pod: Obj, container: Obj, path: str, configmaps: Mapping[tuple[str, str], Obj]
) -> str | None:
    """The text the container reads at ``path``, from a ConfigMap volume mounted there."""
    if not path.startswith("/"):
        path = posixpath.join(str(container.get("workingDir") or "/"), path)
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    ns = str(pod["metadata"].get("namespace"))
    for mount in container.get("volumeMounts") or []:
        vol = volumes.get(str(mount.get("name")))
        ref = (vol or {}).get("configMap")
        if not ref:
            continue
        at = str(mount.get("mountPath", "")).rstrip("/")
        if mount.get("subPath"):
            if at != path:
                continue
            key_path = str(mount["subPath"])
        elif posixpath.dirname(path) == at:
            key_path = posixpath.basename(path)
        else:
            continue
        items = {str(i.get("path")): str(i.get("key")) for i in ref.get("items") or []}
        key = items.get(key_path, key_path) if items else key_path
        cm = configmaps.get((ns, str(ref.get("name"))))
        data = (cm or {}).get("data") or {}
        if key in data:
            return str(data[key])
    return None


def generic_resources(
    pod: Obj, container: Obj, configmaps: Mapping[tuple[str, str], Obj]
) -> dict[str, int]:
    """The resources (``domain/name`` → devices) the plugin in ``container`` registers."""
    flags = _flags(
        [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    )
    config: Any = None
    paths = flags.get("config") or flags.get("config-file") or list(_DEFAULT_CONFIGS)
    for path in paths[-1:] if "config" in flags or "config-file" in flags else paths:
        text = _config_file(pod, container, path, configmaps)
        if text is not None:
            config = _load(text)
            break
    config = config if isinstance(config, Mapping) else {}
    domain = (flags.get("domain") or [str(config.get("domain") or DEFAULT_DOMAIN)])[-1]
    specs: list[Any] = []
    if flags.get("device"):
        for raw in flags["device"]:
            parsed = _load(raw)
            if isinstance(parsed, Mapping):
                specs.append(parsed)
            elif "," in raw:
                # The older form, <type>,<path>,…: one device per path.
                name, *rest = (p.strip() for p in raw.split(","))
                specs.append({"name": name, "groups": [{} for _ in rest]})
    else:
        devices = config.get("devices", config.get("device"))
        specs = list(devices) if isinstance(devices, list) else []
    out: dict[str, int] = {}
    for spec in specs:
        got = _units(spec)
        if got is not None:
            out[f"{domain}/{got[0]}"] = out.get(f"{domain}/{got[0]}", 0) + got[1]
    return out
