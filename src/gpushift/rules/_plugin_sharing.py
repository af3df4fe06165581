"""Rules about requests under the device plugin's sharing config (time-slicing and MPS).

Both strategies share one ``ReplicatedResources`` shape (NVIDIA/k8s-device-plugin
api/config/v1 sharing.go), so ``renameByDefault`` and ``failRequestsGreaterThanOne`` mean the
same for both: the first advertises ``<name>.shared`` instead of ``<name>``, the second makes
the plugin fail an allocation of more than one replica (the kubelet then rejects the pod with
UnexpectedAdmissionError). MPS defaults ``failRequestsGreaterThanOne`` to true.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import DevicePlugin, TimeSlicingConfig, node_pool, runs_gfd, truthy
from gpushift.reports import Finding
from gpushift.rules._context import (
    Context,
    name_of,
    nvidia_requests,
    request_keys,
)

#: The label GFD sets on MPS-capable nodes; the device-plugin chart's MPS control daemon
#: DaemonSet selects on it (deployments/helm/nvidia-device-plugin/templates/
#: daemonset-mps-control-daemon.yml), so without GFD no MPS daemon starts.
MPS_CAPABLE_LABEL = "nvidia.com/mps.capable"


def check(*, ctx: Context) -> Iterator[Finding]:
    """sharing-request-rejected and mps-without-gfd, for every active device plugin's
    selected config (charts and DaemonSet manifests alike)."""
    for plugin in ctx.plugin_advertisers:
        cfg = plugin.selected
        if cfg is None or cfg.error is not None or cfg.strategy == "none":
            continue
        yield from _requests(ctx, plugin, cfg)
        if cfg.strategy == "mps" and not gfd_running(ctx):
            yield ctx.finding(
                "mps-without-gfd",
                source=cfg.source,
                line=cfg.source.line_of(()),
                obj=plugin.name,
                msg=(
                    f"the device plugin shares GPUs with MPS (config {cfg.key!r}) but no "
                    f"gpu-feature-discovery runs: the MPS control daemon only starts on nodes "
                    f"labelled {MPS_CAPABLE_LABEL}=true, which GFD sets; enable gfd "
                    "(gfd.enabled: true)"
                ),
            )


def gfd_running(ctx: Context) -> bool:
    """Whether an active release or manifest runs gpu-feature-discovery.

    gpu-operator's ``gfd.enabled`` defaults to true (a ClusterPolicy operand, so only with
    ``clusterPolicy.deployCR``); the standalone chart's to false. A GFD DaemonSet applied as a
    manifest counts too.
    """
    for op in ctx.operators:
        if truthy(op.value("gfd", "enabled"), default=True) and truthy(
            op.value("clusterPolicy", "deployCR"), default=True
        ):
            return True
    for hr in ctx.repo.releases("nvidia-device-plugin"):
        if truthy(hr.value("gfd", "enabled"), default=False):
            return True
    return any(
        (w.kind == "DaemonSet" and w.name.startswith("gpu-feature-discovery"))
        or (w.origin_kind == "manifest" and runs_gfd(w.origin))
        for w in ctx.workloads
    )


def _requests(ctx: Context, plugin: DevicePlugin, cfg: TimeSlicingConfig) -> Iterator[Finding]:
    shared = {r.name: cfg.advertised(r) for r in cfg.resources if (r.replicas or 0) > 1}
    how = "MPS" if cfg.strategy == "mps" else "time-slicing"
    for w in ctx.running:
        # A pod that cannot land on this plugin's nodes is not served by its config.
        if plugin.pool.disjoint(node_pool(w.pod.node_selector, w.pod.affinity)):
            continue
        for c in w.pod.all_containers:
            for res, amount in nvidia_requests(c).items():
                if res in shared and shared[res] != res:
                    msg = (
                        f"container {c.name} of {w.kind} {w.name} requests {res}, but the device "
                        f"plugin's {how} config {cfg.key!r} (renameByDefault) advertises it as "
                        f"{shared[res]}: no node offers {res} and the pod stays Pending"
                    )
                elif (
                    cfg.fail_requests_greater_than_one
                    and res in shared.values()
                    and (_above_one(amount))
                ):
                    msg = (
                        f"container {c.name} of {w.kind} {w.name} requests {amount} {res}, but the "
                        f"device plugin's {how} config {cfg.key!r} sets "
                        "failRequestsGreaterThanOne: the kubelet rejects the pod with "
                        "UnexpectedAdmissionError"
                    )
                else:
                    continue
                yield ctx.finding(
                    "sharing-request-rejected",
                    source=c.source,
                    line=c.source.line_of(request_keys(c, res)),
                    obj=name_of(w.origin),
                    msg=msg,
                )


def _above_one(amount: object) -> bool:
    if isinstance(amount, bool):
        return False
    if isinstance(amount, int):
        return amount > 1
    return isinstance(amount, str) and amount.isdigit() and int(amount) > 1
