"""The merge step's barrier without a server: which taint is chosen against the new
allocator's tolerations (read at the target or in the cluster), the refusal, and the hold
and release with the barrier chosen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.runbook.test_planner import OPTIONS, _cluster, _ctx, _view
from tests.runbook.test_target import APP, _tree

from gpushift.runbook import (
    Agent,
    Change,
    Context,
    Options,
    Target,
    barrier,
    choose_barrier,
    discover,
    facts,
    plan,
    plan_step,
    preflight,
    read_target,
    untainted,
)

HOLD = {"key": "gpushift.dev/cutover", "value": "dra", "effect": "NoSchedule"}
ALT = {"key": "gpushift.dev/cutover-barrier", "value": "dra", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
EVERYTHING = {"operator": "Exists"}
RELEASE = "HelmRelease/gpu-operator/dra-driver-nvidia-gpu"
FIELD = "kubeletPlugin.tolerations"
NARROW = (
    "narrow its tolerations to the taints it needs (the NVIDIA charts tolerate "
    "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} by default)"
)


def _agent(*tolerations: dict[str, Any], allocator: str = "dra", where: str = "") -> Agent:
    return Agent(allocator, RELEASE, FIELD, tolerations, where)


def test_the_charts_default_tolerations_keep_the_default_barrier() -> None:
    got = choose_barrier("dra", [_agent(GPU)])
    assert (got.taint, got.refusal) == (HOLD, "")
    assert got.shown == "gpushift.dev/cutover=dra:NoSchedule"
    # Tolerating every NoExecute taint is no tolerance of a NoSchedule one.
    assert choose_barrier("dra", [_agent({"operator": "Exists", "effect": "NoExecute"})]).taint == (
        HOLD
    )


def test_a_toleration_of_every_taint_refuses_naming_file_release_and_toleration() -> None:
    got = choose_barrier("dra", [_agent(GPU, EVERYTHING, where=f"{APP}/helmrelease.yaml:14")])
    assert got.taint is None
    assert got.refusal == (
        f"{APP}/helmrelease.yaml:14: {RELEASE} at the target: {FIELD} has {{operator: Exists}}, "
        "which tolerates every taint, the cutover's barrier gpushift.dev/cutover=dra:NoSchedule "
        "among them, so the DRA kubelet plugin would start beside the device plugin before that "
        f"is gone; {NARROW}"
    )


def test_a_toleration_of_every_noschedule_taint_refuses_rather_than_evict() -> None:
    live = Agent(
        "device-plugin",
        "DaemonSet/gpu-operator/nvidia-device-plugin-daemonset",
        "spec.template.spec.tolerations",
        ({"operator": "Exists", "effect": "NoSchedule"},),
    )
    got = choose_barrier("device-plugin", [live])
    assert got.taint is None
    assert got.refusal == (
        "DaemonSet/gpu-operator/nvidia-device-plugin-daemonset: spec.template.spec.tolerations "
        "has {operator: Exists, effect: NoSchedule}, which tolerates every NoSchedule taint, the "
        "cutover's barrier gpushift.dev/cutover=device-plugin:NoSchedule among them (only a "
        "NoExecute taint would hold it off, and that evicts every pod of the node that does not "
        "tolerate it), so the device plugin would start beside the DRA driver before that is "
        f"gone; {NARROW}"
    )


def test_a_toleration_of_the_cutover_key_gets_the_other_barrier() -> None:
    by_key = _agent(GPU, {"key": "gpushift.dev/cutover", "operator": "Exists"})
    by_value = _agent({"key": "gpushift.dev/cutover", "value": "dra"})
    for agent in (by_key, by_value):
        assert choose_barrier("dra", [_agent(GPU), agent]).taint == ALT
    # The value differs the other way: the default holds.
    assert choose_barrier("dra", [_agent({"key": "gpushift.dev/cutover", "value": "x"})]).taint == (
        HOLD
    )


def test_tolerations_of_both_keys_refuse_naming_both() -> None:
    both = _agent(
        {"key": "gpushift.dev/cutover", "operator": "Exists"},
        {"key": "gpushift.dev/cutover-barrier", "operator": "Exists", "effect": "NoSchedule"},
    )
    got = choose_barrier("dra", [both])
    assert got.taint is None
    assert got.refusal == (
        f"{RELEASE}: {FIELD} has {{key: gpushift.dev/cutover, operator: Exists}} and "
        "{key: gpushift.dev/cutover-barrier, operator: Exists, effect: NoSchedule}, which "
        "tolerate the cutover's barriers gpushift.dev/cutover=dra:NoSchedule and "
        "gpushift.dev/cutover-barrier=dra:NoSchedule, so the DRA kubelet plugin would start "
        f"beside the device plugin before that is gone; {NARROW}"
    )


def test_only_the_new_allocators_agents_count() -> None:
    old = _agent(EVERYTHING, allocator="device-plugin")
    got = choose_barrier("dra", [old])
    assert got.taint == HOLD and got.agents == ()


def test_untainted_drops_either_barrier_and_keeps_the_nodes_own() -> None:
    own = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    assert untainted([own, HOLD, ALT]) == [own]
    assert untainted(None) == []


# --- the target and the cluster ------------------------------------------------------------

TOLERATE_ALL = """\
    kubeletPlugin:
      tolerations:
        - operator: Exists
"""


def test_the_target_gives_the_release_tolerations_or_the_charts_default(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "default")
    (agent,) = read_target(tmp_path, target=str(tree)).agents
    assert agent == Agent("dra", RELEASE, FIELD, (GPU,), f"{APP}/helmrelease.yaml:12", True)
    wide = _tree(tmp_path / "wide")
    path = wide / APP / "helmrelease.yaml"
    path.write_text(path.read_text() + TOLERATE_ALL)
    (agent,) = read_target(tmp_path, target=str(wide)).agents
    # Line 15: tolerations, below values (12), its first key (13) and kubeletPlugin (14).
    assert agent == Agent("dra", RELEASE, FIELD, (EVERYTHING,), f"{APP}/helmrelease.yaml:15")


DAEMONSET = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin-daemonset
  namespace: gpu-operator
spec:
  template:
    spec:
      tolerations:
        - {operator: Exists, effect: NoSchedule}
      containers: [{name: plugin, image: nvcr.io/nvidia/k8s-device-plugin:v0.20.0}]
"""


def test_a_daemonset_manifest_at_the_target_is_read(tmp_path: Path) -> None:
    tree = tmp_path / "after"
    tree.mkdir()
    (tree / "plugin.yaml").write_text(DAEMONSET)
    (agent,) = read_target(tmp_path, target=str(tree)).agents
    assert agent == Agent(
        "device-plugin",
        "DaemonSet/gpu-operator/nvidia-device-plugin-daemonset",
        "spec.template.spec.tolerations",
        ({"operator": "Exists", "effect": "NoSchedule"},),
        "plugin.yaml:9",
    )


def _kubelet_plugin(*tolerations: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "dra-driver-nvidia-gpu-kubelet-plugin", "namespace": "gpu-operator"},
        "spec": {"template": {"spec": {"tolerations": list(tolerations)}}},
    }


def test_without_target_agents_the_clusters_daemonsets_are_read() -> None:
    live = _view([*_cluster(), _kubelet_plugin(GPU, EVERYTHING)])
    got = barrier(live, OPTIONS)
    assert got.taint is None
    assert got.refusal.startswith(
        "DaemonSet/gpu-operator/dra-driver-nvidia-gpu-kubelet-plugin: "
        "spec.template.spec.tolerations has {operator: Exists}, which tolerates every taint"
    )
    # The target's release stands for it when the target deploys one.
    target = Target("after", agents=(_agent(GPU, where="x.yaml:3"),))
    assert barrier(live, OPTIONS, target).taint == HOLD
    # A target without the new allocator's agent: the cluster's again.
    assert barrier(live, OPTIONS, Target("after")).taint is None


def _reasons(view: Any, target: Target | None) -> list[str]:
    consumers, loose = discover(view, apps=None)
    return preflight(view, OPTIONS, consumers=tuple(consumers), loose=tuple(loose), target=target)


def test_preflight_refuses_with_the_barrier_reason_and_the_plan_shows_it() -> None:
    view = _view(_cluster())
    wide = Target("after", agents=(_agent(GPU, EVERYTHING, where="x.yaml:3"),))
    refusal = choose_barrier("dra", wide.agents).refusal
    assert _reasons(view, wide) == [refusal]
    assert _reasons(view, None) == []
    the_plan = plan(view, OPTIONS, Context(token="T"), target=wide)
    assert the_plan.refusals == (refusal,)
    assert the_plan.facts["barrier"] is None
    assert (
        f"the barrier gpushift.dev/cutover=dra:NoSchedule: {RELEASE} {FIELD} (x.yaml:3) "
        "tolerates it with {operator: Exists}" in the_plan.steps[0].note
    )
    # No barrier to hold the nodes with: the refused plan shows no taint.
    steps = {s.name: s for s in the_plan.steps}
    assert not [c for c in steps["merge"].changes if c.obj.kind == "Node"]
    assert not steps["new-allocator-up"].changes
    assert steps["merge"].note == (
        "no barrier: the new allocator's DaemonSet tolerates every taint gpushift would hold the "
        "GPU nodes with (refused, see the preflight)"
    )


def test_the_other_barrier_is_held_journaled_and_released() -> None:
    objs = _cluster()
    view = _view(objs)
    keyed = Target("after", agents=(_agent({"key": "gpushift.dev/cutover", "operator": "Exists"}),))
    the_plan = plan(view, OPTIONS, Context(token="T"), target=keyed)
    assert the_plan.refusals == () and the_plan.facts["barrier"] == ALT
    merge = next(s for s in the_plan.steps if s.name == "merge")
    assert [(c.obj.key, c.after) for c in merge.changes[:2]] == [
        ("Node/n1", [ALT]),
        ("Node/n2", [ALT]),
    ]
    assert merge.note == (
        "the barrier: every GPU node tainted gpushift.dev/cutover-barrier=dra:NoSchedule until "
        "the old allocator is gone (gpushift.dev/cutover=dra:NoSchedule is tolerated by the new "
        "allocator's DaemonSet)"
    )
    up = next(s for s in the_plan.steps if s.name == "new-allocator-up")
    assert [(c.obj.key, c.after) for c in up.changes] == [("Node/n1", None), ("Node/n2", None)]
    # A resumed run plans from the journaled facts, whatever the cluster shows now.
    f = facts(view, OPTIONS, target=keyed)
    held = plan_step("merge", view, OPTIONS, Context(facts=f)).changes
    assert [c.after for c in held[:2]] == [[ALT], [ALT]]
    objs[0]["spec"] = {"taints": [ALT]}
    released = plan_step("new-allocator-up", _view(objs), OPTIONS, Context(facts=f)).changes
    assert [(c.obj.key, c.before, c.after) for c in released] == [("Node/n1", [ALT], None)]


def test_a_journal_without_a_barrier_holds_with_the_default() -> None:
    view = _view(_cluster())
    f = dict(_ctx(view).facts)
    del f["barrier"]
    held = plan_step("merge", view, OPTIONS, Context(facts=f)).changes
    assert [c.after for c in held[:2] if isinstance(c, Change)] == [[HOLD], [HOLD]]
    back = Options(to="device-plugin")
    assert plan(view, back, Context(token="T")).facts["barrier"] == {
        **HOLD,
        "value": "device-plugin",
    }
