"""Rules about DRA claims and the extended-resource bridge (KEP-5004)."""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import GPU_RESOURCE, Claim, HelmRelease, Repo, Workload
from gpushift.reports import Finding
from gpushift.rules._context import Context, body_at, name_of, option_line, request_keys
from gpushift.rules._shares import shares_count, shares_value

#: Per-object opt-in to Flux's recreate-on-immutable-change (kustomize-controller docs).
_FORCE_ANNOTATION = "kustomize.toolkit.fluxcd.io/force"


def check(*, ctx: Context) -> Iterator[Finding]:
    """claim-template-missing, claim-reference-mismatch, unbridged-extended-resource,
    bridged-extended-resource and rct-immutable-change."""
    for w in ctx.workloads:
        yield from _references(ctx, w)
    yield from _bridge(ctx)
    if ctx.base is not None:
        yield from _immutable(ctx, ctx.base)


def _references(ctx: Context, w: Workload) -> Iterator[Finding]:
    pod = w.pod
    for pc in pod.resource_claims:
        template = pc.template is not None
        name = pc.template if template else pc.claim
        if name is None or ctx.claim_for(w, name=name, template=template) is not None:
            continue
        kind = "ResourceClaimTemplate" if template else "ResourceClaim"
        src, line = option_line(pod, "resourceClaims")
        ns = f" in namespace {w.namespace}" if w.namespace else ""
        yield ctx.in_workload(
            "claim-template-missing",
            w,
            source=src,
            line=line,
            msg=(
                f"pod claim {pc.name!r} of {w.kind} {w.name} refers to {kind} {name!r}, which "
                f"does not exist{ns}; the pod cannot be scheduled"
            ),
        )
    declared = {pc.name for pc in pod.resource_claims}
    for c in pod.all_containers:
        for claim in c.claims:
            if claim in declared:
                continue
            yield ctx.in_workload(
                "claim-reference-mismatch",
                w,
                source=c.source,
                line=c.source.line_of(("resources", "claims")),
                msg=(
                    f"container {c.name} uses claim {claim!r}, but the pod's resourceClaims "
                    f"declare {sorted(declared) or 'none'}; the API server rejects the pod"
                ),
            )


def _bridge(ctx: Context) -> Iterator[Finding]:
    """Extended ``nvidia.com/gpu`` requests once only DRA advertises GPUs."""
    if ctx.plugin_advertisers or not ctx.dra_on:
        return
    classes = ctx.bridging_classes
    for w in ctx.running:
        for c in w.pod.all_containers:
            amount = c.extended(GPU_RESOURCE)
            if amount is None:
                continue
            line = c.source.line_of(request_keys(c, GPU_RESOURCE))
            if not classes:
                yield ctx.in_workload(
                    "unbridged-extended-resource",
                    w,
                    source=c.source,
                    line=line,
                    msg=(
                        f"container {c.name} requests {GPU_RESOURCE}: {amount}, but the device "
                        "plugin is off and no DeviceClass has extendedResourceName: "
                        f"{GPU_RESOURCE}; the pod stays Pending"
                    ),
                )
                continue
            yield ctx.in_workload(
                "bridged-extended-resource",
                w,
                source=c.source,
                line=line,
                msg=(
                    f"container {c.name} requests {GPU_RESOURCE}: {amount}, served by DRA through "
                    f"DeviceClass {_picked(classes)}; {_consumes(ctx, amount)}"
                ),
            )


def _picked(classes: tuple[str, ...]) -> str:
    if len(classes) == 1:
        return classes[0]
    # k8s.io/api resource/v1 DeviceClassSpec.ExtendedResourceName: the class created later
    # wins; classes created together resolve to the lexicographically first name.
    return (
        f"{classes[0]} (also mapped by {', '.join(classes[1:])}: the class created last wins, "
        "or the lexicographically first when created together)"
    )


def _consumes(ctx: Context, amount: object) -> str:
    value = None
    for driver in (*ctx.dra_advertisers, *ctx.gpu_clusters):
        if isinstance(driver, HelmRelease):
            value = shares_value(driver) or value
    n = shares_count(value)
    if n is not None:
        return f"each request takes 1 of the {n} shares of {amount} GPU(s)"
    if value == "unlimited":
        return f"each request takes a slot on {amount} GPU(s) with no share or memory ceiling"
    if value == "memory":
        return f"each request takes the whole memory, so {amount} whole GPU(s)"
    return f"each request takes {amount} whole GPU(s) (no consumable shares)"


def _immutable(ctx: Context, base: Repo) -> Iterator[Finding]:
    before = {(c.namespace, c.name): c for c in base.claims if c.template}
    for claim in ctx.repo.claims:
        if not claim.template or not claim.active:
            continue
        old = before.get((claim.namespace, claim.name))
        if old is None or _spec(old) == _spec(claim):
            continue
        ks = ctx.repo.kustomization(claim.obj.kustomization)
        annotations = body_at(claim.obj, ("metadata", "annotations")) or {}
        if (ks is not None and ks.force) or annotations.get(_FORCE_ANNOTATION) == "enabled":
            continue
        where = f"Kustomization {ks.namespace}/{ks.name}" if ks is not None else "its Kustomization"
        yield ctx.finding(
            "rct-immutable-change",
            source=claim.obj.source,
            line=claim.obj.source.line_of(("spec",)),
            obj=name_of(claim.obj),
            msg=(
                "ResourceClaimTemplate spec is immutable and changed since the base revision, "
                f"but {where} lacks force: true (Flux: 'recreate resources when patching fails "
                "due to an immutable field change'); the apply fails until the template is "
                "deleted"
            ),
        )


def _spec(claim: Claim) -> object:
    return body_at(claim.obj, ("spec",))
