"""Rules about HelmRelease values the chart does not read, and files that do not parse."""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import known_values_keys
from gpushift.reports import Finding, Severity
from gpushift.rules._context import Context
from gpushift.rules._registry import rule


def check(*, ctx: Context) -> Iterator[Finding]:
    """unknown-chart-values, yaml-error and unused-file."""
    for release in ctx.repo.helm_releases:
        if not release.active:
            continue
        known = known_values_keys(release.chart)
        if known is None:
            continue
        for key in release.user_values:
            if key in known:
                continue
            yield ctx.about(
                "unknown-chart-values",
                release,
                line=release.line_of(str(key)),
                msg=(
                    f"values key {key!r} is not a top-level value of the {release.chart} chart; "
                    "Helm ignores it silently"
                ),
            )
    for err in ctx.repo.errors:
        if err.unused:
            # Nothing applies the file, so its error cannot break a Kustomization.
            severity: Severity = rule("unused-file").severity
            msg = f"file is not used ({err.why}): {err.message}"
            yield Finding("unused-file", severity, err.path, err.line, "file", msg)
            continue
        if not err.breaks:
            # Applied only by what is not deployed: it breaks that once it is.
            msg = f"{err.message} ({err.why}: it fails that Kustomization once it is deployed)"
            yield Finding("yaml-error", Severity.WARNING, err.path, err.line, "file", msg)
            continue
        severity = rule("yaml-error").severity
        yield Finding("yaml-error", severity, err.path, err.line, "file", err.message)
