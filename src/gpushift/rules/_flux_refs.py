"""flux-reference-missing: what the GPU stack's and consumers' Kustomizations name must exist.

A Kustomization whose ``dependsOn`` names a Kustomization nothing deploys never reconciles;
one whose ``postBuild.substituteFrom`` names a ConfigMap or Secret that the tree creates only in
another namespace fails its build. Both are checked only on a whole tree (one with a cluster
root): a partial tree may depend on what lies outside it.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import FluxKustomization, KsRef, summarize
from gpushift.reports import Finding
from gpushift.rules._context import Context

_RULE = "flux-reference-missing"


def check(*, ctx: Context) -> Iterator[Finding]:
    """flux-reference-missing."""
    repo = ctx.repo
    if not (repo.has_flux_root and repo.cluster_root):
        return
    deployed = {k.ref for k in repo.kustomizations if k.active}
    by_ref = {k.ref: k for k in repo.kustomizations if k.active}
    for ref in sorted(_gpu_kustomizations(ctx) & deployed, key=lambda r: (r.namespace, r.name)):
        yield from _missing(ctx, by_ref[ref], deployed)


def _gpu_kustomizations(ctx: Context) -> set[KsRef]:
    """The Kustomizations that apply the GPU stack, claims or GPU consumers."""
    refs: set[KsRef | None] = {hr.obj.kustomization for hr in (*ctx.operators, *ctx.drivers)}
    refs |= {p.obj.kustomization for p in ctx.plugin_advertisers}
    refs |= {c.obj.kustomization for c in ctx.repo.claims if c.active}
    refs |= {c.workload.origin.kustomization for c in summarize(ctx.repo).consumers}
    return {r for r in refs if r is not None}


def _missing(ctx: Context, ks: FluxKustomization, deployed: set[KsRef]) -> Iterator[Finding]:
    for dep in ks.depends_on:
        if KsRef(dep.namespace, dep.name) in deployed:
            continue
        # kustomize-controller's own words (controllers/kustomization_controller.go).
        yield ctx.about(
            _RULE,
            ks,
            line=ks.source.line_of(("spec", "dependsOn")),
            msg=(
                f"dependsOn {dep.namespace}/{dep.name}, which no Kustomization in the repository "
                f"is: Flux reports \"unable to get '{dep.namespace}/{dep.name}' dependency\" "
                "and never applies it"
            ),
        )
    for ref in ks.substitute_from:
        if ref.optional or ref.kind not in ("ConfigMap", "Secret"):
            continue
        homes = sorted({o.namespace or "" for o in ctx.repo.find(ref.kind, ref.name) if o.active})
        if not homes or ks.namespace in homes:
            continue  # made here, or by something outside the tree (a bootstrap secret)
        yield ctx.about(
            _RULE,
            ks,
            line=ks.source.line_of(("spec", "postBuild", "substituteFrom")),
            msg=(
                f"substitutes from {ref.kind} {ref.name}, which the repository creates only in "
                f'{", ".join(homes)}, not in {ks.namespace}: Flux reports "substitute from '
                f"'{ref.kind}/{ks.namespace}/{ref.name}' error\" and never applies it"
            ),
        )
