"""Which model renders which chart."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift.flux import merge_values
from gpushift.gitops import chart_defaults, chart_identity
from gpushift_twin.charts import _app_template, _dcgm, _device_plugin, _dra, _gpu_operator, _llmkube
from gpushift_twin.charts._accounts import service_accounts
from gpushift_twin.charts._common import Rendered


def identity(chart_name: str) -> str:
    """The model for a chart (or OCI artifact) name: ``gpu-operator``,
    ``dra-driver-nvidia-gpu``, ``nvidia-device-plugin``, ``dcgm-exporter``, ``app-template``,
    ``llmkube`` or ``other``."""
    base = chart_name.rstrip("/").rsplit("/", 1)[-1].lower()
    if base == "llmkube" or base.endswith("-llmkube"):
        return "llmkube"
    return str(chart_identity(chart_name))


def render(chart_name: str, *, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """The objects ``helm template`` of this chart would give for ``values`` (the user's,
    already merged from valuesFrom and spec.values); the chart's defaults are added here.

    Raises ``ChartError`` with the chart's own message when its templates ``fail``.
    """
    chart = identity(chart_name)
    rendered = _render(chart, chart_name, release=release, namespace=namespace, values=values)
    if chart in ("app-template", "other"):
        return rendered  # the chart makes a ServiceAccount only when its values ask for one
    extra = service_accounts(rendered.objects, namespace=namespace)
    return Rendered(extra + rendered.objects, rendered.message) if extra else rendered


def _render(
    chart: str, chart_name: str, *, release: str, namespace: str, values: Mapping[str, Any]
) -> Rendered:
    if chart not in ("llmkube", "other"):
        defaults = chart_defaults(chart)  # type: ignore[arg-type]
        values = merge_values(merge_values({}, defaults), values) if defaults else values
    if chart == "gpu-operator":
        return _gpu_operator.render(release=release, namespace=namespace, values=values)
    if chart == "dra-driver-nvidia-gpu":
        return _dra.render(release=release, namespace=namespace, values=values)
    if chart == "nvidia-device-plugin":
        return _device_plugin.render_standalone(release=release, namespace=namespace, values=values)
    if chart == "dcgm-exporter":
        return _dcgm.render(release=release, namespace=namespace, values=values)
    if chart == "app-template":
        return _app_template.render(release=release, namespace=namespace, values=values)
    if chart == "llmkube":
        return _llmkube.render(release=release, namespace=namespace, values=values)
    return Rendered(
        [],
        message=f"chart {chart_name or '(unnamed)'} is not modelled by the twin: "
        "installed with no workload objects",
    )
