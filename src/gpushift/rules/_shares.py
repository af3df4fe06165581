"""Rules about the DRA driver's consumable shares (``consumableShares``, main/0.5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpushift._sharing import ConsumableSharesError, atoi, parse_consumable_shares
from gpushift.gitops import GPU_RESOURCE, HelmRelease, truthy
from gpushift.reports import Finding
from gpushift.rules._context import (
    Context,
    is_nvidia_claim,
    name_of,
    request_keys,
)


def operator_shares_env(op: HelmRelease) -> Any:
    """The ``CONSUMABLE_SHARES`` env a gpu-operator release gives its GPUCluster's kubelet
    plugin (``draDriver.gpus.kubeletPlugin.env``), or None."""
    env = op.value("draDriver", "gpus", "kubeletPlugin", "env")
    for e in env if isinstance(env, list) else []:
        if isinstance(e, dict) and e.get("name") == "CONSUMABLE_SHARES":
            return e.get("value")
    return None


def shares_value(driver: HelmRelease) -> str | None:
    """``consumableShares`` as the kubelet plugin receives it, or None when not rendered.

    The chart renders ``CONSUMABLE_SHARES`` only ``if .Values.consumableShares``: an empty
    string or the integer 0 renders nothing and the plugin defaults to ``disabled``.
    """
    if driver.chart == "gpu-operator":
        # The GPUCluster has no consumableShares value; it takes CONSUMABLE_SHARES as env.
        raw = operator_shares_env(driver)
    else:
        raw = driver.value("consumableShares")
    if raw is None or raw == "" or (isinstance(raw, int) and not isinstance(raw, bool) and not raw):
        return None
    if isinstance(raw, bool):
        return "true" if raw else None
    return str(raw).strip()


def shares_count(value: str | None) -> int | None:
    """N for a positive-integer ``consumableShares``, else None.

    The plugin parses N with Go's ``strconv.Atoi``: optional sign, ASCII digits, int64 range.
    """
    n = None if value is None else atoi(value)
    return n if n is not None and n > 0 else None


def _accepted(value: str) -> bool:
    try:
        parse_consumable_shares(value)
    except ConsumableSharesError:
        return False
    return True


def check(*, ctx: Context) -> Iterator[Finding]:
    """consumable-shares-gate-missing, consumable-shares-invalid, shares-capacity-changed,
    memory-mode-whole-device and unlimited-no-ceiling."""
    operators = (gc for gc in ctx.gpu_clusters if isinstance(gc, HelmRelease))
    for driver in (*ctx.dra_advertisers, *operators):
        value = shares_value(driver)
        if value is None:
            continue
        if driver.chart == "gpu-operator":
            # The GPUCluster's kubelet plugin: the same flag, as env, and the same gate.
            line = driver.line_of("draDriver", "gpus", "kubeletPlugin", "env")
            gate_key: tuple[str, ...] = ("draDriver", "featureGates", "ConsumableShares")
            what = f"CONSUMABLE_SHARES={value}"
        else:
            line = driver.line_of("consumableShares")
            gate_key = ("featureGates", "ConsumableShares")
            what = f"consumableShares: {value}"
        gate = truthy(driver.value(*gate_key), default=False)
        if value != "disabled" and not gate:
            # cmd/gpu-kubelet-plugin/main.go validateCLIFlags
            yield ctx.about(
                "consumable-shares-gate-missing",
                driver,
                line=line,
                msg=(
                    f"{what} without {'.'.join(gate_key)}: true; the "
                    "kubelet plugin exits at start: '--consumable-shares requires feature gate "
                    "ConsumableShares to be enabled'"
                ),
            )
        n = shares_count(value)
        if not _accepted(value):
            yield ctx.about(
                "consumable-shares-invalid",
                driver,
                line=line,
                msg=(
                    f"the kubelet plugin exits at start: 'invalid value for --consumable-shares: "
                    f"\"{value}\" (must be 'disabled', 'memory', 'unlimited', or a positive "
                    "integer)'"
                ),
            )
        if n is not None:
            yield from _capacity_changed(ctx, driver=driver, n=n, line=line)
        if value == "unlimited":
            yield ctx.about(
                "unlimited-no-ceiling",
                driver,
                line=line,
                msg=(
                    "consumableShares: unlimited publishes each GPU's memory with a request "
                    "default of 0 and no shares capacity: any number of claims that do not "
                    "request memory fit on one GPU, so there is no per-GPU ceiling and spreading "
                    "across GPUs is only advisory"
                ),
            )
        if value == "memory":
            yield from _whole_device(ctx)


def _capacity_changed(ctx: Context, *, driver: HelmRelease, n: int, line: int) -> Iterator[Finding]:
    seen: set[int] = set()
    for ts in ctx.repo.time_slicing:
        replicas = ts.replicas
        if ts.strategy != "time-slicing" or replicas is None or replicas == n:
            continue
        if replicas in seen:
            continue
        seen.add(replicas)
        yield ctx.about(
            "shares-capacity-changed",
            driver,
            line=line,
            msg=(
                f"consumableShares: {n} but the time-slicing config {ts.config_map}/{ts.key} "
                f"({ts.source.path}:{ts.source.line}) still has replicas: {replicas}; each GPU "
                f"admits {n} claims instead of {replicas} pods"
            ),
        )


def _whole_device(ctx: Context) -> Iterator[Finding]:
    reported: set[tuple[str, str | None]] = set()
    for claim in ctx.repo.claims:
        if not claim.active or not is_nvidia_claim(claim):
            continue
        for req in claim.requests:
            if "memory" in req.capacity:
                continue
            key = (claim.name, claim.namespace)
            if key in reported:
                continue
            reported.add(key)
            kind = "ResourceClaimTemplate" if claim.template else "ResourceClaim"
            yield ctx.finding(
                "memory-mode-whole-device",
                source=claim.obj.source,
                line=claim.obj.source.line_of(("spec", "spec") if claim.template else ("spec",)),
                obj=name_of(claim.obj),
                msg=(
                    f"consumableShares: memory sets each GPU's memory request default to the whole "
                    f"card; {kind} {claim.name} request {req.name} does not ask for "
                    "capacity.requests.memory, so each allocation takes a whole GPU"
                ),
            )
    if ctx.plugin_advertisers or not ctx.bridging_classes:
        return
    for w in ctx.workloads:
        for c in w.pod.all_containers:
            if c.extended(GPU_RESOURCE) is None:
                continue
            yield ctx.in_workload(
                "memory-mode-whole-device",
                w,
                source=c.source,
                line=c.source.line_of(request_keys(c, GPU_RESOURCE)),
                msg=(
                    f"container {c.name} requests {GPU_RESOURCE}, bridged to DRA without a "
                    "capacity request; under consumableShares: memory each takes a whole GPU"
                ),
            )
            break
