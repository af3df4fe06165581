"""Rules about who advertises the GPUs: the device plugin, the DRA driver, both or neither."""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import GPU_RESOURCE, Workload, node_pool, truthy
from gpushift.reports import Finding
from gpushift.rules._context import (
    Context,
    dra_gpus_on,
    is_nvidia_claim,
    nvidia_requests,
    operator_plugin_on,
    option_line,
    request_keys,
)

# kubernetes-sigs/dra-driver-nvidia-gpu templates/validation.yaml (the install-blocking text).
_VALIDATION = (
    "\"The default value of 'resources.gpus.enabled == true'. However, when "
    "'resources.gpus.enabled=true' this DRA driver cannot be deployed alongside the standard "
    'GPU device plugin on the same node."'
)


def check(*, ctx: Context) -> Iterator[Finding]:
    """dual-advertiser, no-advertiser, dra-override-missing and allocator-flip-diverged."""
    covered = False
    for driver in ctx.dra_advertisers:
        if ctx.plugin_advertisers:
            covered = True
            yield ctx.about(
                "dual-advertiser",
                driver,
                line=driver.line_of("resources", "gpus", "enabled"),
                msg=(
                    f"the DRA driver publishes GPUs (resources.gpus.enabled is true) while "
                    f"{_plugin_owners(ctx)} runs the device plugin: both allocators hand out "
                    f"the same cards; upstream: {_VALIDATION}"
                ),
            )
        if not truthy(driver.value("gpuResourcesEnabledOverride"), default=False):
            covered = True
            yield ctx.about(
                "dra-override-missing",
                driver,
                line=driver.line_of("gpuResourcesEnabledOverride"),
                msg=(
                    "resources.gpus.enabled is true but gpuResourcesEnabledOverride is not, so "
                    f"the chart's validation fails the install: {_VALIDATION} Turn the device "
                    "plugin off, then set gpuResourcesEnabledOverride: true."
                ),
            )
    unserved = list(_unserved(ctx))
    covered = covered or bool(unserved)
    yield from unserved
    yield from _diverged(ctx, covered=covered)


def _plugin_owners(ctx: Context) -> str:
    parts = []
    for p in ctx.plugin_advertisers:
        if p.release is not None and p.deployer == "gpu-operator":
            given = p.release.is_set("devicePlugin", "enabled")
            how = (
                "devicePlugin.enabled is true" if given else "devicePlugin.enabled defaults to true"
            )
            parts.append(f"{p.name} ({how})")
        elif p.deployer == "manifest":
            parts.append(f"{p.name} (applied as a manifest)")
        else:
            parts.append(p.name)
    return ", ".join(parts)


def _unserved(ctx: Context) -> Iterator[Finding]:
    """no-advertiser: GPU requests that no active allocator can serve."""
    plugin, dra = bool(ctx.plugin_advertisers), ctx.dra_on
    if plugin and dra:
        return
    for w in ctx.running:
        if not plugin and not dra:
            yield from _unserved_extended(ctx, w)
        elif plugin and not dra:
            yield from _off_pool(ctx, w)
        if not dra:
            for claim in ctx.workload_claims(w):
                if is_nvidia_claim(claim):
                    kind = "ResourceClaimTemplate" if claim.template else "ResourceClaim"
                    src, line = option_line(w.pod, "resourceClaims")
                    yield ctx.in_workload(
                        "no-advertiser",
                        w,
                        source=src,
                        line=line,
                        msg=(
                            f"{w.kind} {w.name} asks for an NVIDIA GPU through {kind} "
                            f"{claim.name}, but no DRA driver release with resources.gpus.enabled "
                            "is deployed; the pod stays Pending"
                        ),
                    )
                    break


def _unserved_extended(ctx: Context, w: Workload) -> Iterator[Finding]:
    for c in w.pod.all_containers:
        for res in nvidia_requests(c):
            yield ctx.in_workload(
                "no-advertiser",
                w,
                source=c.source,
                line=c.source.line_of(request_keys(c, res)),
                msg=(
                    f"container {c.name} of {w.kind} {w.name} requests {res}, but neither a device "
                    "plugin nor a DRA driver with GPUs enabled is deployed; the pod stays Pending"
                ),
            )
            return


def _off_pool(ctx: Context, w: Workload) -> Iterator[Finding]:
    """no-advertiser for a pod whose node selection meets no device plugin's nodes: with one
    DaemonSet per node pool, a pod pinned to a pool without one stays Pending."""
    pool = node_pool(w.pod.node_selector, w.pod.affinity)
    if pool.unconstrained or any(not p.pool.disjoint(pool) for p in ctx.plugin_advertisers):
        return
    where = "; ".join(f"{p.name} on {p.pool.describe()}" for p in ctx.plugin_advertisers)
    for c in w.pod.all_containers:
        for res in nvidia_requests(c):
            yield ctx.in_workload(
                "no-advertiser",
                w,
                source=c.source,
                line=c.source.line_of(request_keys(c, res)),
                msg=(
                    f"container {c.name} of {w.kind} {w.name} requests {res} on "
                    f"{pool.describe()}, where no device plugin runs ({where}) and no DRA "
                    "driver publishes GPUs; the pod stays Pending"
                ),
            )
            return


def _diverged(ctx: Context, *, covered: bool) -> Iterator[Finding]:
    """allocator-flip-diverged: the three switches disagree in a way no other rule reports."""
    for driver in ctx.drivers:
        override = truthy(driver.value("gpuResourcesEnabledOverride"), default=False)
        if override and not dra_gpus_on(driver):
            yield ctx.about(
                "allocator-flip-diverged",
                driver,
                line=driver.line_of("gpuResourcesEnabledOverride"),
                msg=(
                    "gpuResourcesEnabledOverride is true while resources.gpus.enabled is false: "
                    "the override acknowledges a switch to DRA that this release does not make"
                ),
            )
    if covered or ctx.plugin_advertisers or ctx.dra_on:
        return
    for op in ctx.operators:
        if not operator_plugin_on(op) and ctx.repo.releases("dra-driver-nvidia-gpu", active=False):
            yield ctx.about(
                "allocator-flip-diverged",
                op,
                line=op.line_of("devicePlugin", "enabled"),
                msg=(
                    "devicePlugin.enabled is false but no deployed DRA driver release publishes "
                    "GPUs (resources.gpus.enabled with gpuResourcesEnabledOverride): nothing "
                    f"advertises {GPU_RESOURCE} or GPU devices"
                ),
            )
