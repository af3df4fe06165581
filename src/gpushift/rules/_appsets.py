"""Rules about Argo CD ApplicationSets whose applications cannot be seen offline."""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.reports import Finding
from gpushift.rules._context import Context

_WHAT = {
    "scmProvider": "an SCM provider's repositories",
    "pullRequest": "a forge's open pull requests",
    "clusterDecisionResource": "a resource in the cluster",
    "plugin": "a plugin service",
}


def check(*, ctx: Context) -> Iterator[Finding]:
    """applicationset-not-expanded."""
    for gen in ctx.repo.unexpanded_generators:
        if not gen.active:
            continue
        yield ctx.about(
            "applicationset-not-expanded",
            gen,
            line=gen.source.line_of(),
            msg=(
                f"ApplicationSet {gen.appset.name}: the {gen.generator} generator reads "
                f"{_WHAT.get(gen.generator, 'a source outside the repository')}, which is "
                "not read offline; the applications it generates are not seen, so their GPU "
                "consumers and charts are not checked"
            ),
        )
