"""dual-device-plugin: two NVIDIA device plugins registering ``nvidia.com/gpu`` on one node.

The invariant is one whole-GPU advertiser per node. Two device plugins on a node both
register ``nvidia.com/gpu`` with the kubelet's device manager; the later registration replaces
the earlier one's endpoint, each plugin allocates from its own view of the cards, and the
count and health flap as both reconnect (kubernetes pkg/kubelet/cm/devicemanager: one endpoint
per resource name).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gpushift.gitops import GPU_RESOURCE, DevicePlugin, HelmRelease, NodePool, known_values_keys
from gpushift.reports import Finding
from gpushift.rules._context import Context

#: gpu-operator's device-plugin DaemonSet selects this label, which the operator sets on every
#: GPU node (NVIDIA/gpu-operator@v26.7.0 assets/state-device-plugin/0500_daemonset.yaml,
#: controllers/state_manager.go).
OPERATOR_PLUGIN_LABEL = "nvidia.com/gpu.deploy.device-plugin"
#: The standalone chart's default affinity: nodes with an NVIDIA PCI device or
#: nvidia.com/gpu.present=true (deployments/helm/nvidia-device-plugin/values.yaml).
GPU_NODES = "every GPU node"


def check(*, ctx: Context) -> Iterator[Finding]:
    """dual-device-plugin: every pair of active device plugins whose node pools meet."""
    plugins = [(p, *_how(p)) for p in ctx.plugin_advertisers]
    for i, (first, first_how, _) in enumerate(plugins):
        for second, second_how, line in plugins[i + 1 :]:
            if first.pool.disjoint(second.pool):
                continue
            yield ctx.finding(
                "dual-device-plugin",
                source=second.source,
                line=line,
                obj=second.name,
                msg=(
                    f"{first.name} ({first_how}) and {second.name} ({second_how}) both run the "
                    f"NVIDIA device plugin on {_shared(first.pool, second.pool)}: two "
                    f"registrations of {GPU_RESOURCE} on one node, each allocating the same "
                    "cards; keep one device plugin per node"
                ),
            )


def _how(p: DevicePlugin) -> tuple[str, int]:
    """Why the plugin runs, and the line that says so (a manifest's node selection)."""
    hr = p.release
    if hr is not None and p.deployer == "gpu-operator":
        given = hr.is_set("devicePlugin", "enabled")
        how = "devicePlugin.enabled is true" if given else "devicePlugin.enabled defaults to true"
        return how, hr.line_of("devicePlugin", "enabled")
    if hr is not None:
        ignored = _ignored_switches(hr)
        line = hr.line_of(ignored[0]) if ignored else hr.line_of("devicePlugin", "enabled")
        return _standalone_how(hr, ignored), line
    w = p.workload
    line = p.source.line
    for option in ("nodeSelector", "affinity"):
        if w is not None and option in w.pod.option_sources:
            line = w.pod.option_source(option).line_of(())
            break
    return "applied as a manifest", line


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


def _shared(a: NodePool, b: NodePool) -> str:
    """The nodes both pools can hold, described (the pools are known to meet)."""
    if a.unconstrained and b.unconstrained:
        return GPU_NODES
    if a.unconstrained:
        return "GPU " + b.describe()
    if b.unconstrained:
        return "GPU " + a.describe()
    selector = tuple(dict.fromkeys((*a.selector, *b.selector)))
    both = NodePool(selector, a.terms or b.terms)
    return "GPU " + both.describe()
