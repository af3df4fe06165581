"""dual-device-plugin: two NVIDIA device plugins registering ``nvidia.com/gpu`` on one node.

The invariant is one whole-GPU advertiser per node. Two device plugins on a node both
register ``nvidia.com/gpu`` with the kubelet's device manager; the later registration replaces
the earlier one's endpoint, each plugin allocates from its own view of the cards, and the
count and health flap as both reconnect (kubernetes pkg/kubelet/cm/devicemanager: one endpoint
per resource name).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpushift.gitops import (
    GPU_RESOURCE,
    HelmRelease,
    Source,
    Workload,
    known_values_keys,
)
from gpushift.reports import Finding
from gpushift.rules._context import Context, name_of, operator_plugin_on, standalone_plugin_on

#: gpu-operator's device-plugin DaemonSet selects this label, which the operator sets on every
#: GPU node (NVIDIA/gpu-operator@v26.7.0 assets/state-device-plugin/0500_daemonset.yaml,
#: controllers/state_manager.go).
OPERATOR_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
#: The standalone chart's default affinity: nodes with an NVIDIA PCI device or
#: nvidia.com/gpu.present=true (deployments/helm/nvidia-device-plugin/values.yaml).
GPU_NODES = "every GPU node"


@dataclass(frozen=True, slots=True)
class _Plugin:
    """One device plugin: who deploys it, where, and which nodes it selects.

    ``selector`` is the explicit nodeSelector (empty: the deployer's default, all GPU nodes).
    """

    name: str
    how: str
    selector: Mapping[str, str]
    source: Source
    line: int


def check(*, ctx: Context) -> Iterator[Finding]:
    """dual-device-plugin."""
    plugins = list(_plugins(ctx))
    for i, first in enumerate(plugins):
        for second in plugins[i + 1 :]:
            shared = _shared(first.selector, second.selector)
            if shared is None:
                continue
            yield ctx.finding(
                "dual-device-plugin",
                source=second.source,
                line=second.line,
                obj=second.name,
                msg=(
                    f"{first.name} ({first.how}) and {second.name} ({second.how}) both run the "
                    f"NVIDIA device plugin on {shared}: two registrations of {GPU_RESOURCE} on "
                    "one node, each allocating the same cards; keep one device plugin per node"
                ),
            )


def _plugins(ctx: Context) -> Iterator[_Plugin]:
    for op in ctx.operators:
        # Only the ClusterPolicy stack (clusterPolicy.deployCR, default true) runs the plugin.
        if operator_plugin_on(op):
            given = op.is_set("devicePlugin", "enabled")
            how = (
                "devicePlugin.enabled is true" if given else "devicePlugin.enabled defaults to true"
            )
            yield _Plugin(
                name_of(op.obj),
                how,
                {},
                op.source,
                op.line_of("devicePlugin", "enabled"),
            )
    for hr in ctx.repo.releases("nvidia-device-plugin"):
        if standalone_plugin_on(hr):
            ignored = _ignored_switches(hr)
            yield _Plugin(
                name_of(hr.obj),
                _standalone_how(hr, ignored),
                _selector(hr.value("nodeSelector")),
                hr.source,
                hr.line_of(ignored[0]) if ignored else hr.line_of("devicePlugin", "enabled"),
            )
    for w in ctx.workloads:
        if _manifest_plugin(w):
            src = w.pod.option_source("nodeSelector")
            yield _Plugin(
                name_of(w.origin),
                "applied as a manifest",
                _selector(w.pod.node_selector),
                w.origin.source,
                src.line_of(()) if "nodeSelector" in w.pod.option_sources else w.origin.source.line,
            )


def _ignored_switches(hr: HelmRelease) -> list[str]:
    """Top-level keys the chart does not have that try to switch something off
    (``<key>.enabled: false``); Helm ignores them."""
    known = known_values_keys("nvidia-device-plugin") or frozenset()
    return sorted(
        k
        for k, v in hr.user_values.items()
        if k not in known and isinstance(v, Mapping) and v.get("enabled") is False
    )


def _standalone_how(hr: HelmRelease, ignored: list[str]) -> str:
    """Why the standalone chart's plugin is on, naming an ignored switch when there is one."""
    if ignored:
        keys = ", ".join(f"{k}.enabled: false" for k in ignored)
        return f"{keys} is not a value of the chart, so devicePlugin.enabled stays true"
    if hr.is_set("devicePlugin", "enabled"):
        return "devicePlugin.enabled is true"
    return "devicePlugin.enabled defaults to true"


def _manifest_plugin(w: Workload) -> bool:
    # The static nvidia-device-plugin.yml: DaemonSet nvidia-device-plugin-daemonset, container
    # nvidia-device-plugin-ctr.
    if w.kind != "DaemonSet" or w.origin_kind != "manifest":
        return False
    return any(
        n.startswith("nvidia-device-plugin") for n in (w.name, *(c.name for c in w.pod.containers))
    )


def _selector(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _shared(a: Mapping[str, str], b: Mapping[str, str]) -> str | None:
    """The nodes both selectors can match, described, or None when they cannot meet.

    Two nodeSelectors exclude each other only when they require different values of one label;
    an empty selector is the deployer's default (every GPU node).
    """
    if any(k in b and b[k] != v for k, v in a.items()):
        return None
    both = {**a, **b}
    if not both:
        return GPU_NODES
    return "GPU nodes with nodeSelector " + ", ".join(f"{k}={v}" for k, v in sorted(both.items()))
