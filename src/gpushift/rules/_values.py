"""Rules about HelmRelease values the chart does not read, and files that do not parse."""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import HelmRelease, app_template_keys, app_template_major, known_values_keys
from gpushift.reports import Finding, Severity
from gpushift.rules._context import Context
from gpushift.rules._registry import rule


def check(*, ctx: Context) -> Iterator[Finding]:
    """unknown-chart-values, yaml-error and unused-file."""
    for release in ctx.repo.helm_releases:
        if not release.active:
            continue
        known = known_values_keys(release.chart)
        chart: str = release.chart
        if release.chart == "app-template":
            # Each major has its own layout: 1.x's top-level `resources` is 2.x's unknown key.
            major = app_template_major(release)
            known = app_template_keys(major)
            if major is not None:
                chart = f"app-template {major}.x"
            yield from _pod_claims_before_5(ctx, release, major)
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
                    f"values key {key!r} is not a top-level value of the {chart} chart; "
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


def _pod_claims_before_5(ctx: Context, hr: HelmRelease, major: int | None) -> Iterator[Finding]:
    """Pod ``resourceClaims`` in app-template 2.x to 4.x: the pod options' schema has no
    such key (``additionalProperties: false``), so Helm's schema validation fails the
    release; the key arrived in 5.x."""
    if major is None or not 2 <= major < 5:
        return
    places: list[tuple[str, ...]] = []
    if isinstance(hr.user_value("defaultPodOptions", "resourceClaims"), list):
        places.append(("defaultPodOptions", "resourceClaims"))
    controllers = hr.user_value("controllers")
    for cid, ctrl in controllers.items() if isinstance(controllers, dict) else ():
        pod = ctrl.get("pod") if isinstance(ctrl, dict) else None
        if isinstance(pod, dict) and "resourceClaims" in pod:
            places.append(("controllers", str(cid), "pod", "resourceClaims"))
    for keys in places:
        yield ctx.about(
            "unknown-chart-values",
            hr,
            line=hr.line_of(*keys),
            msg=(
                f"values key {'.'.join(keys)!r} is not a value of app-template {major}.x "
                f"({hr.chart_version}): its schema rejects pod resourceClaims and the install "
                "fails; app-template 5 renders them"
            ),
        )
