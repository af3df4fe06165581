"""bjw-s app-template (common library 4.x/5.x): controllers become Deployments, StatefulSets or
DaemonSets (bjw-s-labs/helm-charts charts/library/common/templates)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gpushift.common import Obj
from gpushift.common import as_dict as d
from gpushift_twin.charts._common import Rendered

VERSION = "5.3.0"
# common/templates/lib/pod/_spec.tpl: the pod options getOption reads.
_POD_OPTIONS = (
    "affinity",
    "automountServiceAccountToken",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "hostAliases",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "hostUsers",
    "hostname",
    "imagePullSecrets",
    "nodeName",
    "nodeSelector",
    "priorityClassName",
    "resourceClaims",
    "resources",
    "runtimeClassName",
    "schedulerName",
    "securityContext",
    "shareProcessNamespace",
    "terminationGracePeriodSeconds",
    "tolerations",
    "topologySpreadConstraints",
)
_KINDS = {"deployment": "Deployment", "statefulset": "StatefulSet", "daemonset": "DaemonSet"}


def _env(raw: Any) -> list[Obj]:
    # common/templates/lib/container/_env.tpl: a map of name → value or → {value|valueFrom}.
    if isinstance(raw, list):
        return [dict(e) for e in raw if isinstance(e, Mapping)]
    out: list[Obj] = []
    for name, v in d(raw).items():
        if isinstance(v, Mapping):
            out.append({"name": str(name), **{k: v[k] for k in ("value", "valueFrom") if k in v}})
        elif v is not None:
            out.append(
                {
                    "name": str(name),
                    "value": v
                    if isinstance(v, str)
                    else str(v).lower()
                    if isinstance(v, bool)
                    else str(v),
                }
            )
    return out


def _container(name: str, spec: Mapping[str, Any]) -> Obj:
    image = d(spec.get("image"))
    ref = str(image.get("repository", ""))
    if image.get("tag"):
        ref += f":{image['tag']}"
    if image.get("digest"):
        ref += f"@{image['digest']}"
    c: Obj = {"name": name, "image": ref}
    if image.get("pullPolicy"):
        c["imagePullPolicy"] = image["pullPolicy"]
    for key in ("command", "args", "securityContext", "ports", "lifecycle", "workingDir"):
        if spec.get(key) not in (None, "", [], {}):
            value = spec[key]
            c[key] = [value] if key in ("command", "args") and isinstance(value, str) else value
    env = _env(spec.get("env"))
    if env:
        c["env"] = env
    if spec.get("envFrom"):
        c["envFrom"] = spec["envFrom"]
    if spec.get("resources"):
        c["resources"] = spec["resources"]  # passed through verbatim (toYaml)
    return c


def _enabled(items: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [
        (str(k), v)
        for k, v in items.items()
        if isinstance(v, Mapping) and v.get("enabled", True) is not False
    ]


def _config_maps(release: str, namespace: str, values: Mapping[str, Any]) -> dict[str, Obj]:
    """``configMaps``: the enabled ones by identifier (lib/configMap, and the name rule of
    lib/_determineResourceNameFromValues: the release's name, with ``-<identifier>`` when
    there are several; ``forceRename``, ``prefix`` and ``suffix`` as given)."""
    enabled = _enabled(d(values.get("configMaps")))
    out: dict[str, Obj] = {}
    for ident, cm in enabled:
        name = release
        if cm.get("forceRename"):
            name = str(cm["forceRename"])
        else:
            if cm.get("prefix") and str(cm["prefix"]) != name:
                name = f"{cm['prefix']}-{name}"
            if len(enabled) > 1 and not name.endswith(f"-{ident}"):
                name = f"{name}-{ident}"
            if cm.get("suffix") and str(cm["suffix"]) != name:
                name = f"{name}-{cm['suffix']}"
        out[ident] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": d(cm.get("labels"))},
            "data": {str(k): str(v) for k, v in d(cm.get("data")).items()},
        }
    return out


_RELEASE_TPL = re.compile(r"\{\{-?\s*\.Release\.(Name|Namespace)\s*-?\}\}")


def _tpl(text: str, *, release: str, namespace: str) -> str | None:
    """``tpl`` of a name for the two things such names use, the release's name and
    namespace; None for any other template (the twin does not run Go templates)."""
    out = _RELEASE_TPL.sub(lambda m: release if m.group(1) == "Name" else namespace, text)
    return None if "{{" in out else out


def _volumes(
    values: Mapping[str, Any], config_maps: Mapping[str, Obj], *, release: str, namespace: str
) -> list[tuple[Obj, list[tuple[str | None, str | None, Obj]]]]:
    """``persistence`` items the twin models (a configMap of the chart's own, hostPath,
    emptyDir): each volume and its mounts as ``(controller, container, mount)`` (None: every
    one). Claims, Secrets, NFS and ConfigMaps made elsewhere are left out."""
    out: list[tuple[Obj, list[tuple[str | None, str | None, Obj]]]] = []
    # Go templates range over a map in key order.
    for ident, item in sorted(_enabled(d(values.get("persistence")))):
        kind = str(item.get("type") or "persistentVolumeClaim")
        volume: Obj = {"name": ident}
        if kind == "configMap":
            ref = config_maps.get(str(item.get("identifier") or ""))
            named = _tpl(str(item.get("name") or ""), release=release, namespace=namespace)
            name = named or (ref["metadata"]["name"] if ref else "")
            if name not in {c["metadata"]["name"] for c in config_maps.values()}:
                # Made outside the chart (an operator the twin does not model, say): the
                # twin cannot know it exists, so it is left out like a claim.
                continue
            volume["configMap"] = {"name": name}
            if item.get("items"):
                volume["configMap"]["items"] = item["items"]
        elif kind == "hostPath" and item.get("hostPath"):
            volume["hostPath"] = {"path": str(item["hostPath"])}
        elif kind == "emptyDir":
            volume["emptyDir"] = {}
        else:
            continue
        mounts: list[tuple[str | None, str | None, Obj]] = []
        given = item.get("globalMounts")
        advanced = d(item.get("advancedMounts"))
        if given is None and not advanced:
            given = [{}]  # lib/pod/_volumeMounts: by default /<identifier> everywhere
        for m in given or []:
            mounts.append((None, None, _mount(ident, item, d(m))))
        for ctrl, containers in advanced.items():
            for cname, ms in d(containers).items():
                for m in ms or []:
                    mounts.append((str(ctrl), str(cname), _mount(ident, item, d(m))))
        out.append((volume, mounts))
    return out


def _mount(ident: str, item: Mapping[str, Any], m: Mapping[str, Any]) -> Obj:
    # lib/pod/_volumeMounts: /<identifier> unless given; a hostPath at its own path.
    default = str(item["hostPath"]) if item.get("type") == "hostPath" else f"/{ident}"
    mount: Obj = {"name": ident, "mountPath": str(m.get("path") or default)}
    if m.get("subPath"):
        mount["subPath"] = str(m["subPath"])
    if m.get("readOnly") is not None:
        mount["readOnly"] = bool(m["readOnly"])
    return mount


def render(*, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """One workload per enabled controller; pod options are ``defaultPodOptions`` overlaid by
    the controller's ``pod`` (``defaultPodOptionsStrategy`` overwrite, or merge for maps)."""
    controllers = _enabled(d(values.get("controllers")))
    defaults = d(values.get("defaultPodOptions"))
    strategy = values.get("defaultPodOptionsStrategy", "overwrite")
    config_maps = _config_maps(release, namespace, values)
    volumes = _volumes(values, config_maps, release=release, namespace=namespace)
    objects: list[Obj] = list(config_maps.values())
    for cid, ctrl in controllers:
        options = dict(defaults)
        for k, v in d(ctrl.get("pod")).items():
            if (
                strategy == "merge"
                and isinstance(v, Mapping)
                and isinstance(options.get(k), Mapping)
            ):
                options[k] = {**options[k], **v}
            else:
                options[k] = v
        kind = _KINDS.get(str(ctrl.get("type", "deployment")).lower())
        if kind is None:
            continue  # CronJobs and Jobs hold no long-running GPU pods
        name = release if len(controllers) == 1 or cid == release else f"{release}-{cid}"
        selector = {
            "app.kubernetes.io/controller": cid,
            "app.kubernetes.io/instance": release,
            "app.kubernetes.io/name": release,
        }
        labels = {
            **selector,
            "app.kubernetes.io/managed-by": "Helm",
            "helm.sh/chart": f"app-template-{VERSION}",
        }
        pod: Obj = {k: options[k] for k in _POD_OPTIONS if options.get(k) not in (None, "", [], {})}
        pod.setdefault("enableServiceLinks", False)
        pod["containers"] = [_container(n, c) for n, c in _enabled(d(ctrl.get("containers")))]
        inits = [_container(n, c) for n, c in _enabled(d(ctrl.get("initContainers")))]
        if inits:
            pod["initContainers"] = inits
        used: list[Obj] = []
        for volume, mounts in volumes:
            for c in pod["containers"]:
                for ctrl_id, cname, mount in mounts:
                    if ctrl_id in (None, cid) and cname in (None, c["name"]):
                        c.setdefault("volumeMounts", []).append(dict(mount))
                        if volume not in used:
                            used.append(volume)
        if used:
            pod["volumes"] = [dict(v) for v in used]
        pod_meta: Obj = {"labels": {**selector, **d(options.get("labels"))}}
        if options.get("annotations"):
            pod_meta["annotations"] = dict(options["annotations"])
        spec: Obj = {
            "revisionHistoryLimit": int(ctrl.get("revisionHistoryLimit", 3)),
            "selector": {"matchLabels": selector},
            "template": {"metadata": pod_meta, "spec": pod},
        }
        if kind != "DaemonSet":
            spec["replicas"] = ctrl.get("replicas", 1)
        if kind == "Deployment":
            # common/templates/lib/deployment: Recreate unless the controller says otherwise.
            strat = str(ctrl.get("strategy") or "Recreate")
            spec["strategy"] = {"type": strat}
            if strat == "RollingUpdate" and ctrl.get("rollingUpdate"):
                spec["strategy"]["rollingUpdate"] = ctrl["rollingUpdate"]
        elif kind == "StatefulSet":
            spec["serviceName"] = name
            spec["updateStrategy"] = {"type": str(ctrl.get("strategy") or "RollingUpdate")}
        else:
            spec["updateStrategy"] = {"type": str(ctrl.get("strategy") or "RollingUpdate")}
        meta: Obj = {
            "name": name,
            "namespace": namespace,
            "labels": {**labels, **d(ctrl.get("labels"))},
        }
        if ctrl.get("annotations"):
            meta["annotations"] = dict(ctrl["annotations"])
        objects.append({"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec})
    return Rendered(objects)
