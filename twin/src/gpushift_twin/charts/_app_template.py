"""bjw-s app-template (common library 4.x/5.x): controllers become Deployments, StatefulSets or
DaemonSets (bjw-s-labs/helm-charts charts/library/common/templates)."""

from __future__ import annotations

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


def render(*, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """One workload per enabled controller; pod options are ``defaultPodOptions`` overlaid by
    the controller's ``pod`` (``defaultPodOptionsStrategy`` overwrite, or merge for maps)."""
    controllers = _enabled(d(values.get("controllers")))
    defaults = d(values.get("defaultPodOptions"))
    strategy = values.get("defaultPodOptionsStrategy", "overwrite")
    objects: list[Obj] = []
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
