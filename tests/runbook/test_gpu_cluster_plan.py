"""The drain boundary with gpu-operator's GPUCluster as the DRA side, both ways."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.runbook.test_planner import OPTIONS, _cluster, _ctx, _git, _node, _slice, _view

from gpushift.runbook import Delete, Options, Target, facts, plan_step, read_target

_BACK = Options(to="device-plugin")


def _gpu_cluster(deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "gpu-cluster", "finalizers": ["nvidia.com/gpu-cluster"]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-03T12:00:00Z"
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": meta}


def _claim(name: str, *, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "media"}
    if owner:
        meta["ownerReferences"] = [{"kind": "Pod", "name": owner}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
        "status": {
            "allocation": {"devices": {"results": [{"driver": "gpu.nvidia.com", "pool": "n1"}]}}
        },
    }


def test_toward_a_gpu_cluster_the_cluster_policy_goes_first() -> None:
    view = _view(_cluster())
    target = Target("dst", gpu_clusters=("apps/gpu-operator/helmrelease.yaml:1",))
    ctx_facts = facts(view, OPTIONS, target=target)
    assert ctx_facts["gpuCluster"] is True
    assert facts(view, OPTIONS)["gpuCluster"] is False
    ctx = _ctx(view)
    ctx = type(ctx)(facts=ctx_facts)
    waits = plan_step("old-allocator-gone", view, OPTIONS, ctx).waits
    assert [w.condition.describe() for w in waits][-1] == (
        "no ClusterPolicy (the operator refuses a GPUCluster beside it)"
    )
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cp"}}
    assert waits[-1].condition.check(_view([policy])) == (False, "ClusterPolicy gone: cp")
    assert waits[-1].condition.check(view)[0]


def test_back_from_a_gpu_cluster_user_claims_then_the_finalizer() -> None:
    objs = [
        _node("n1", "0"),
        _node("n2", "0"),
        _slice("n1"),
        _slice("n2"),
        _git(),
        _gpu_cluster(),
        *_cluster()[3:10],
        _claim("shared-gpu"),
        _claim("plex-abc-1-gpu", owner="plex-abc-1"),
    ]
    view = _view(objs)
    ctx = _ctx(view, _BACK)
    assert ctx.facts["gpuCluster"] is True
    drained = plan_step("drained", view, _BACK, ctx)
    deletes = [a for a in drained.actions if isinstance(a, Delete)]
    assert [d.obj.key for d in deletes] == ["ResourceClaim/media/shared-gpu"]
    last = drained.waits[-1].condition
    assert last.describe() == "no user gpu.nvidia.com ResourceClaim in media"
    assert last.check(view) == (False, "user ResourceClaims gone: media/shared-gpu")
    waits = plan_step("old-allocator-gone", view, _BACK, ctx).waits
    first = waits[0].condition
    assert first.describe() == "no GPUCluster (its finalizer goes once its operands are gone)"
    assert first.check(_view([_gpu_cluster(deleting=True)])) == (
        False,
        "GPUCluster gone: gpu-cluster (deleting)",
    )
    assert "no allocated gpu.nvidia.com claim" in waits[1].condition.describe()


def test_back_from_the_dra_chart_nothing_changes() -> None:
    view = _view([_node("n1", "0"), _slice("n1"), _git(), *_cluster()[3:10], _claim("x")])
    ctx = _ctx(view, _BACK)
    assert not ctx.facts["gpuCluster"]
    assert len(plan_step("drained", view, _BACK, ctx).actions) == 1
    assert len(plan_step("old-allocator-gone", view, _BACK, ctx).waits) == 1


_RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: gpu-operator
  namespace: gpu-operator
spec:
  interval: 1h
  chart:
    spec:
      chart: gpu-operator
      version: v26.7.0
      sourceRef: {kind: HelmRepository, name: nvidia}
  values:
    driver: {enabled: false}
    clusterPolicy: {deployCR: false}
    gpuCluster: {deployCR: true}
    daemonsets:
      tolerations: [{key: dedicated, operator: Equal, value: ai, effect: NoSchedule}]
"""


def test_the_target_names_its_gpu_cluster_and_the_kubelet_plugins_tolerations(
    tmp_path: Path,
) -> None:
    (tmp_path / "helmrelease.yaml").write_text(_RELEASE)
    target = read_target(tmp_path)
    assert target.gpu_clusters == ("helmrelease.yaml:1",)
    [agent] = target.agents
    assert (agent.allocator, agent.field) == ("dra", "daemonsets.tolerations")
    assert agent.tolerations == (
        {"key": "dedicated", "operator": "Equal", "value": "ai", "effect": "NoSchedule"},
    )
