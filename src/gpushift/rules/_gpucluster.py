"""gpu-operator's two stack CRs: a GPUCluster and a ClusterPolicy exclude each other."""

from __future__ import annotations

from collections.abc import Iterator

from gpushift.gitops import HelmRelease, Manifest, cluster_policies
from gpushift.reports import Finding
from gpushift.rules._context import Context, name_of


def _what(item: HelmRelease | Manifest, key: str) -> str:
    if isinstance(item, HelmRelease):
        given = "is true" if item.is_set(key, "deployCR") else "defaults to true"
        return f"{name_of(item.obj)} ({key}.deployCR {given})"
    return name_of(item)


def _line(item: HelmRelease | Manifest, key: str) -> int:
    if isinstance(item, HelmRelease):
        return item.line_of(key, "deployCR")
    return item.source.line


def check(*, ctx: Context) -> Iterator[Finding]:
    """gpucluster-clusterpolicy-conflict: one finding per GPUCluster next to a ClusterPolicy."""
    policies = cluster_policies(ctx.repo)
    if not policies or not ctx.gpu_clusters:
        return
    for cluster in ctx.gpu_clusters:
        others = ", ".join(_what(p, "clusterPolicy") for p in policies)
        both = any(p is cluster for p in policies)
        # NVIDIA/gpu-operator@v26.7.0 templates/validations.yaml fails the install when both
        # deployCR values are true; #2696 made the two CRs exclusive cluster-wide.
        why = (
            "the chart's validation fails the install when clusterPolicy.deployCR and "
            "gpuCluster.deployCR are both true"
            if both
            else "gpu-operator allows one of the two per cluster and reports the conflict in "
            "the CRs' status"
        )
        yield ctx.finding(
            "gpucluster-clusterpolicy-conflict",
            source=cluster.source,
            line=_line(cluster, "gpuCluster"),
            obj=name_of(cluster.obj if isinstance(cluster, HelmRelease) else cluster),
            msg=(
                f"{_what(cluster, 'gpuCluster')} deploys "
                f"a GPUCluster (the DRA stack) while {others} deploys a ClusterPolicy (the "
                f"device plugin stack): they exclude each other; {why}. Keep one: "
                "gpuCluster.deployCR: true with clusterPolicy.deployCR: false, or the reverse"
            ),
        )
