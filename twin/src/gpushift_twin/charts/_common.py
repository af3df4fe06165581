"""What every chart model shares: the rendered result, the install error, small helpers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpushift.common import Obj


class ChartError(Exception):
    """A chart refuses to render (a ``fail`` in its templates); ``str()`` is the chart's text."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """The objects a release consists of, and a note for the HelmRelease's status."""

    objects: list[Obj] = field(default_factory=list)
    #: Set when the model renders no workloads (an unknown chart).
    message: str | None = None


def get(values: Mapping[str, Any], *path: str, default: Any = None) -> Any:
    """``values[path[0]][path[1]]…``, or ``default`` where the path ends early."""
    cur: Any = values
    for key in path:
        if not isinstance(cur, Mapping) or key not in cur:
            return default
        cur = cur[key]
    return default if cur is None else cur


def helm_labels(*, name: str, release: str, chart: str, version: str) -> dict[str, str]:
    """The labels Helm's conventional ``_helpers.tpl`` puts on every object of a release."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/version": version,
        "app.kubernetes.io/managed-by": "Helm",
        "helm.sh/chart": f"{chart}-{version}",
    }


def env_list(env: Mapping[str, str]) -> list[Obj]:
    """``[{"name": k, "value": v}, …]`` in the mapping's order."""
    return [{"name": k, "value": v} for k, v in env.items()]


def extra_env(raw: Any) -> list[Obj]:
    """A chart's user ``env`` list (or map) as container env entries."""
    if isinstance(raw, list):
        return [dict(e) for e in raw if isinstance(e, Mapping) and e.get("name")]
    if isinstance(raw, Mapping):
        return [{"name": str(k), "value": str(v)} for k, v in raw.items()]
    return []


def daemonset(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    pod_spec: Obj,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """An apps/v1 DaemonSet with the API's defaults for what the charts leave out."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {
                    "labels": {**dict(selector), **dict(labels)},
                    **({"annotations": dict(annotations)} if annotations else {}),
                },
                "spec": pod_spec,
            },
        },
    }


def gpu_toleration() -> Obj:
    """The toleration NVIDIA's charts put on their agents (nodes tainted ``nvidia.com/gpu``)."""
    return {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def chart_tolerations(
    values: Mapping[str, Any], *path: str, default: list[Obj] | None = None
) -> list[Obj]:
    """A chart's ``tolerations`` value at ``path``: as given (an empty list renders none, as
    ``with`` in the template does), else ``default`` (:func:`gpu_toleration`)."""
    given = get(values, *path)
    if isinstance(given, list):
        return [dict(t) for t in given if isinstance(t, Mapping)]
    return default if default is not None else [gpu_toleration()]


def operand_tolerations(spec: Mapping[str, Any]) -> list[Obj]:
    """The tolerations the gpu-operator gives an operand DaemonSet: the ClusterPolicy's
    ``daemonsets.tolerations`` when not empty, else the asset's own."""
    # NVIDIA/gpu-operator controllers/object_controls.go: len(Daemonsets.Tolerations) > 0.
    given = get(spec, "daemonsets", "tolerations")
    if isinstance(given, list) and given:
        return [dict(t) for t in given if isinstance(t, Mapping)]
    return [gpu_toleration()]
