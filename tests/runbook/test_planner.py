"""The planner without a server: each step from hand-built observations, and properties of
suspend/resume and the conditions."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift.runbook import (
    Change,
    Command,
    Consumer,
    Context,
    ObjectRef,
    Options,
    View,
    Wait,
    discover,
    facts,
    judge_lease,
    plan,
    plan_step,
    preflight,
)

KS_API = "kustomize.toolkit.fluxcd.io/v1"
HR_API = "helm.toolkit.fluxcd.io/v2"


def _node(name: str, gpu: str | None = "5", **labels: str) -> dict[str, Any]:
    alloc = {"cpu": "16"} | ({"nvidia.com/gpu": gpu} if gpu is not None else {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", **labels}},
        "status": {"allocatable": alloc},
    }


def _flux(
    kind: str, ns: str, name: str, parent: tuple[str, str] | None = None, ready: bool = True
) -> dict[str, Any]:
    labels = {}
    if parent:
        labels = {
            "kustomize.toolkit.fluxcd.io/name": parent[1],
            "kustomize.toolkit.fluxcd.io/namespace": parent[0],
        }
    return {
        "apiVersion": KS_API if kind == "Kustomization" else HR_API,
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "generation": 1, "labels": labels},
        "spec": {},
        "status": {
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "observedGeneration": 1,
                    "message": "x",
                }
            ],
        },
    }


def _git(revision: str = "main@sha1:aaa") -> dict[str, Any]:
    obj = _flux("GitRepository", "flux-system", "flux-system")
    obj["apiVersion"] = "source.toolkit.fluxcd.io/v1"
    obj["status"]["artifact"] = {"revision": revision}
    return obj


def _pod(
    ns: str,
    name: str,
    owner: tuple[str, str] | None,
    *,
    gpu: bool = True,
    phase: str = "Running",
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [
            {"kind": owner[0], "name": owner[1], "controller": True, "apiVersion": "apps/v1"}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    res = {"limits": {"nvidia.com/gpu": 1}} if gpu else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "resources": res}]},
        "status": {"phase": phase},
    }


def _workload(
    kind: str,
    ns: str,
    name: str,
    *,
    replicas: int | None = 1,
    hr: str | None = None,
    owner: tuple[str, str, str] | None = None,
    ks: str | None = None,
) -> dict[str, Any]:
    labels = {}
    if hr:
        labels = {"helm.toolkit.fluxcd.io/name": hr, "helm.toolkit.fluxcd.io/namespace": ns}
    if ks:
        labels = {
            "kustomize.toolkit.fluxcd.io/name": ks,
            "kustomize.toolkit.fluxcd.io/namespace": ns,
        }
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "controller": True}
        ]
    spec: dict[str, Any] = {"template": {"spec": {}}}
    if replicas is not None:
        spec["replicas"] = replicas
    api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": spec}


def _rs(ns: str, name: str, deploy: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": ns,
            "ownerReferences": [{"kind": "Deployment", "name": deploy, "controller": True}],
        },
    }


def _cluster(**kw: Any) -> list[dict[str, Any]]:
    """Two GPU nodes on the device plugin; a media Deployment under HelmRelease and
    Kustomization, a StatefulSet with replicas 3, a DaemonSet, a CronJob's Job, an llmkube
    InferenceService and the device plugin's own pod."""
    isvc = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {
            "name": "llama",
            "namespace": "ai",
            "labels": {
                "kustomize.toolkit.fluxcd.io/name": "models",
                "kustomize.toolkit.fluxcd.io/namespace": "ai",
            },
        },
        "spec": {"replicas": 2},
    }
    objs = [
        _node("n1"),
        _node("n2"),
        _git(),
        _flux("Kustomization", "flux-system", "cluster-apps"),
        _flux("Kustomization", "media", "plex", parent=("flux-system", "cluster-apps")),
        _flux("HelmRelease", "media", "plex", parent=("media", "plex")),
        _flux("Kustomization", "ai", "models", parent=("flux-system", "cluster-apps")),
        _workload("Deployment", "media", "plex", hr="plex"),
        _rs("media", "plex-abc", "plex"),
        _pod("media", "plex-abc-1", ("ReplicaSet", "plex-abc")),
        _workload("StatefulSet", "media", "tdarr", replicas=3, hr="plex"),
        _pod("media", "tdarr-0", ("StatefulSet", "tdarr")),
        _workload("DaemonSet", "media", "encoder", replicas=None),
        _pod("media", "encoder-x", ("DaemonSet", "encoder")),
        _workload("CronJob", "media", "nightly", replicas=None),
        {
            **_workload("Job", "media", "nightly-1", replicas=None),
            "metadata": {
                "name": "nightly-1",
                "namespace": "media",
                "ownerReferences": [{"kind": "CronJob", "name": "nightly", "controller": True}],
            },
        },
        _pod("media", "nightly-1-x", ("Job", "nightly-1")),
        isvc,
        _workload(
            "Deployment",
            "ai",
            "llama",
            owner=("inference.llmkube.dev/v1alpha1", "InferenceService", "llama"),
        ),
        _rs("ai", "llama-1", "llama"),
        _pod("ai", "llama-1-x", ("ReplicaSet", "llama-1")),
        _workload("DaemonSet", "gpu-operator", "nvidia-device-plugin-daemonset", replicas=None),
        _pod(
            "gpu-operator",
            "nvidia-device-plugin-daemonset-1",
            ("DaemonSet", "nvidia-device-plugin-daemonset"),
            gpu=True,
        ),
    ]
    return objs


def _view(objs: list[dict[str, Any]], **kw: Any) -> View:
    return View.of(objs, **kw)


OPTIONS = Options(to="dra")


def _ctx(view: View, options: Options = OPTIONS, **kw: Any) -> Context:
    return Context(facts=facts(view, options), **kw)


def test_consumers_follow_owners_and_skip_agents() -> None:
    view = _view(_cluster())
    consumers, loose = discover(view, apps=None)
    assert loose == []
    tops = {c.top.key: c for c in consumers}
    assert set(tops) == {
        "Deployment/media/plex",
        "StatefulSet/media/tdarr",
        "DaemonSet/media/encoder",
        "CronJob/media/nightly",
        "InferenceService/ai/llama",
    }
    assert [f.key for f in tops["Deployment/media/plex"].flux] == [
        "HelmRelease/media/plex",
        "Kustomization/media/plex",
    ]
    assert [f.key for f in tops["InferenceService/ai/llama"].flux] == ["Kustomization/ai/models"]
    assert tops["InferenceService/ai/llama"].bridged
    assert not tops["Deployment/media/plex"].bridged


def test_suspend_step_plans_each_kind() -> None:
    view = _view(_cluster())
    step = plan_step("suspend", view, OPTIONS, _ctx(view))
    got = [(c.obj.key, c.field, c.before, c.after) for c in step.changes]
    # Flux first (the Kustomization before the HelmRelease it applies), then the workloads.
    assert got[:3] == [
        ("Kustomization/ai/models", "spec.suspend", None, True),
        ("Kustomization/media/plex", "spec.suspend", None, True),
        ("HelmRelease/media/plex", "spec.suspend", None, True),
    ]
    assert set(got[3:]) == {
        ("InferenceService/ai/llama", "spec.replicas", 2, 0),
        ("CronJob/media/nightly", "spec.suspend", None, True),
        (
            "DaemonSet/media/encoder",
            'spec.template.spec.nodeSelector["gpushift.dev/cutover-parked"]',
            None,
            "true",
        ),
        ("Deployment/media/plex", "spec.replicas", 1, 0),
        ("StatefulSet/media/tdarr", "spec.replicas", 3, 0),
    }
    park = next(c for c in step.changes if c.obj.kind == "DaemonSet")
    assert park.patch == {
        "spec": {"template": {"spec": {"nodeSelector": {"gpushift.dev/cutover-parked": "true"}}}}
    }
    assert park.undo_patch == {
        "spec": {"template": {"spec": {"nodeSelector": {"gpushift.dev/cutover-parked": None}}}}
    }


def test_a_resumed_suspend_keeps_the_recorded_values() -> None:
    objs = _cluster()
    view = _view(objs)
    first = plan_step("suspend", view, OPTIONS, _ctx(view))
    recorded = {c.key: c for c in first.changes}
    consumers, _ = discover(view, apps=None)
    # The run was killed after scaling: the cluster now shows 0 and no GPU pod.
    scaled = copy.deepcopy([o for o in objs if o["kind"] != "Pod"])
    for o in scaled:
        if o["kind"] in ("StatefulSet", "Deployment", "InferenceService") and o["spec"].get(
            "replicas"
        ):
            o["spec"]["replicas"] = 0
    view2 = _view(scaled)
    ctx = Context(consumers=tuple(consumers), recorded=recorded, facts=facts(view, OPTIONS))
    again = plan_step("suspend", view2, OPTIONS, ctx)
    befores = {c.obj.key: c.before for c in again.changes if c.field == "spec.replicas"}
    assert befores == {
        "StatefulSet/media/tdarr": 3,
        "InferenceService/ai/llama": 2,
        "Deployment/media/plex": 1,
    }


def test_drained_waits_for_terminating_pods_not_finished_ones() -> None:
    base = [o for o in _cluster() if o["kind"] != "Pod"]
    wait = plan_step("drained", _view(base), OPTIONS, _ctx(_view(base))).waits[0]
    assert wait.condition.check(_view(base)) == (True, "no GPU pod left")
    dying = [*base, _pod("media", "plex-abc-1", ("ReplicaSet", "plex-abc"), deleting=True)]
    ok, why = wait.condition.check(_view(dying))
    assert not ok and why == "no GPU pod: media/plex-abc-1"
    done = [*base, _pod("media", "nightly-1-x", ("Job", "nightly-1"), phase="Succeeded")]
    assert wait.condition.check(_view(done))[0]
    agent = [*base, _pod("gpu-operator", "nvidia-dcgm-exporter-1", None)]
    assert wait.condition.check(_view(agent))[0]


def test_merge_step_runs_the_command_then_reconciles_source_then_apps() -> None:
    view = _view(_cluster())
    options = Options(to="dra", merge="gh pr merge 1")
    step = plan_step("merge", view, options, _ctx(view, options, token="T1"))
    kinds = [type(a).__name__ for a in step.actions]
    # The two GPU nodes are held first (test_the_taint_holds_the_nodes_from_merge_to_new_up).
    assert kinds == ["Change", "Change", "Command", "Wait", "Change", "Wait", "Change", "Wait"]
    assert isinstance(step.actions[2], Command) and step.actions[2].shell == "gh pr merge 1"
    moved = step.actions[3]
    assert isinstance(moved, Wait)
    assert not moved.condition.check(view)[0]
    assert moved.condition.check(_view([_git("main@sha1:bbb")]))[0]
    source, apps = step.actions[4], step.actions[6]
    assert isinstance(source, Change) and isinstance(apps, Change)
    assert source.obj.key == "GitRepository/flux-system/flux-system"
    assert apps.obj.key == "Kustomization/flux-system/cluster-apps"
    assert apps.patch == {"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": "T1"}}}
    assert not apps.undo


HOLD = {"key": "gpushift.dev/cutover", "value": "dra", "effect": "NoSchedule"}
OTHER = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_the_taint_holds_the_nodes_from_merge_to_new_up() -> None:
    objs = _cluster()
    objs[0]["spec"] = {"taints": [OTHER]}  # n1 keeps a taint of its own
    view = _view(objs)
    assert [o["metadata"]["name"] for o in objs[:2]] == ["n1", "n2"]
    held = [
        a for a in plan_step("merge", view, OPTIONS, _ctx(view)).actions if isinstance(a, Change)
    ]
    assert [(c.obj.key, c.before, c.after) for c in held[:2]] == [
        ("Node/n1", [OTHER], [OTHER, HOLD]),
        ("Node/n2", None, [HOLD]),
    ]
    assert held[0].patch == {"spec": {"taints": [OTHER, HOLD]}}
    assert held[1].undo and held[1].undo_patch == {"spec": {"taints": None}}
    # Nothing to release before the merge held the nodes.
    assert not plan_step("new-allocator-up", view, OPTIONS, _ctx(view)).changes
    # Once held: the release restores each node's own taints, and is never undone.
    objs[0]["spec"] = {"taints": [OTHER, HOLD]}
    objs[1]["spec"] = {"taints": [HOLD]}
    after = _view(objs)
    released = plan_step("new-allocator-up", after, OPTIONS, _ctx(after)).changes
    assert [(c.obj.key, c.before, c.after, c.undo) for c in released] == [
        ("Node/n1", [OTHER, HOLD], [OTHER], False),
        ("Node/n2", [HOLD], None, False),
    ]
    # A resumed merge step keeps the taints recorded before and does not hold twice.
    recorded = {c.key: c for c in held}
    again = plan_step("merge", after, OPTIONS, _ctx(after, recorded=recorded)).changes
    assert [(c.before, c.after) for c in again[:2]] == [([OTHER], [OTHER, HOLD]), (None, [HOLD])]


def test_the_plan_shows_the_hold_and_its_release() -> None:
    the_plan = plan(_view(_cluster()), OPTIONS, Context(token="T"))
    by_step = {s.name: [(c.obj.key, c.field, c.after) for c in s.changes] for s in the_plan.steps}
    assert by_step["merge"][:2] == [
        ("Node/n1", "spec.taints", [HOLD]),
        ("Node/n2", "spec.taints", [HOLD]),
    ]
    assert by_step["new-allocator-up"] == [
        ("Node/n1", "spec.taints", None),
        ("Node/n2", "spec.taints", None),
    ]
    back = plan(_view(_cluster()), Options(to="device-plugin"), Context(token="T"))
    held = [c.after for s in back.steps if s.name == "merge" for c in s.changes][:1]
    assert held == [[{**HOLD, "value": "device-plugin"}]]


def test_old_and_new_allocator_waits_both_ways() -> None:
    view = _view(_cluster())
    gone = plan_step("old-allocator-gone", view, OPTIONS, _ctx(view)).waits
    assert gone[0].condition.describe() == "allocatable nvidia.com/gpu: n1 0, n2 0"
    assert gone[0].condition.check(view) == (False, "allocatable nvidia.com/gpu: n1 5, n2 5")
    assert "nvidia-device-plugin-daemonset" in gone[1].condition.describe()
    up = plan_step("new-allocator-up", view, OPTIONS, _ctx(view)).waits[0].condition
    slices = [_slice("n1", shares="5"), _slice("n2", shares="4")]
    ok, why = up.check(_view(slices))
    assert not ok and "n2 devices without shares 5" in why
    assert up.check(_view([_slice("n1", shares="5"), _slice("n2", shares="5")]))[0]
    back = Options(to="device-plugin")
    dra_view = _view([_node("n1", "0"), _node("n2", "0"), _slice("n1"), _slice("n2"), _git()])
    gone = plan_step("old-allocator-gone", dra_view, back, _ctx(dra_view, back)).waits[0]
    assert not gone.condition.check(dra_view)[0]
    assert gone.condition.check(_view([_node("n1", "0")]))[0]
    up = plan_step("new-allocator-up", dra_view, back, _ctx(dra_view, back)).waits[0]
    assert up.condition.describe() == "allocatable nvidia.com/gpu: n1 5, n2 5"


def _slice(node: str, shares: str = "5", count: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
            "devices": [
                {
                    "name": "gpu-0",
                    "allowMultipleAllocations": True,
                    "capacity": {"shares": {"value": shares}},
                }
            ],
        },
    }


def test_resume_sets_back_what_was_recorded_and_bridged_last() -> None:
    view = _view(_cluster())
    the_plan = plan(view, OPTIONS, Context(token="T"))
    resume = next(s for s in the_plan.steps if s.name == "resume")
    bridged = next(s for s in the_plan.steps if s.name == "resume-bridged")
    got = {
        (c.obj.key, c.field): (c.before, c.after)
        for c in resume.changes
        if "annotations" not in c.field
    }
    assert got[("StatefulSet/media/tdarr", "spec.replicas")] == (0, 3)
    assert got[("Kustomization/media/plex", "spec.suspend")] == (True, None)
    assert ("InferenceService/ai/llama", "spec.replicas") not in got
    got_b = {(c.obj.key, c.field): (c.before, c.after) for c in bridged.changes}
    assert got_b[("InferenceService/ai/llama", "spec.replicas")] == (0, 2)
    # Kustomizations are resumed and reconciled before the HelmReleases they apply.
    order = [a.obj.key for a in resume.actions if isinstance(a, Change)]
    assert order.index("Kustomization/media/plex") < order.index("HelmRelease/media/plex")


def test_preflight_gives_every_reason_at_once() -> None:
    objs = _cluster()
    objs = [o for o in objs if o["kind"] != "HelmRelease"]
    objs.append(_flux("HelmRelease", "media", "plex", parent=("media", "plex"), ready=False))
    objs.append(_pod("default", "bare", None))
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "gpu-operator",
                "labels": {"pod-security.kubernetes.io/enforce": "restricted"},
            },
        }
    )
    chart = _flux("HelmRelease", "gpu-operator", "dra-driver-nvidia-gpu")
    chart["spec"] = {"chart": {"spec": {"chart": "dra-driver-nvidia-gpu", "version": "0.4.1"}}}
    objs.append(chart)
    view = _view(objs, version=(1, 33), serves_resource_v1=False)
    consumers, loose = discover(view, apps=None)
    reasons = preflight(
        view,
        OPTIONS,
        consumers=tuple(consumers),
        loose=tuple(loose),
        journal={"run": "r1", "to": "dra", "started": "t", "current": "merge"},
        lock="another cutover holds the lock: held by h/1/r, last renewed t",
    )
    text = "\n".join(reasons)
    assert "an unfinished cutover journal: run r1" in text
    assert "another cutover holds the lock" in text
    assert "does not serve resource.k8s.io/v1" in text
    assert "HelmRelease/media/plex is not Ready: Ready=False: x" in text
    assert "pod default/bare holds a GPU and no workload owns it" in text
    assert "Kubernetes 1.33" in text and "InferenceService/ai/llama" in text
    assert "dra-driver-nvidia-gpu 0.4.1: consumable shares need 0.5.0" in text
    assert "namespace gpu-operator enforces Pod Security 'restricted'" in text
    assert len(reasons) == 8


def test_preflight_passes_a_healthy_cluster() -> None:
    view = _view(_cluster())
    consumers, loose = discover(view, apps=None)
    assert preflight(view, OPTIONS, consumers=tuple(consumers), loose=tuple(loose)) == []


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=5),
    suspended=st.lists(st.booleans(), min_size=1, max_size=5),
)
def test_resume_undoes_suspend_exactly(replicas: list[int], suspended: list[bool]) -> None:
    """Whatever the replicas and pre-existing suspends, applying the suspend step's changes
    and then the resume steps' gives back every field as it was."""
    objs: list[dict[str, Any]] = [
        _node("n1"),
        _git(),
        _flux("Kustomization", "flux-system", "cluster-apps"),
    ]
    for i, n in enumerate(replicas):
        name = f"app{i}"
        ks = _flux("Kustomization", "media", name, parent=("flux-system", "cluster-apps"))
        if suspended[i % len(suspended)]:
            ks["spec"]["suspend"] = True
        objs += [
            ks,
            _workload("Deployment", "media", name, replicas=n, ks=name),
            _rs("media", f"{name}-1", name),
            _pod("media", f"{name}-1-x", ("ReplicaSet", f"{name}-1")),
        ]
    original = copy.deepcopy(objs)
    view = _view(objs)
    ctx = _ctx(view)
    ctx = Context(tuple(discover(view, apps=None)[0]), {}, ctx.facts, "T")
    suspend = plan_step("suspend", view, OPTIONS, ctx)
    _apply(objs, suspend.changes)
    for change in suspend.changes:
        assert _field(objs, change) == change.after
    recorded = {c.key: c for c in suspend.changes}
    ctx = Context(ctx.consumers, recorded, ctx.facts, "T")
    view = _view([o for o in objs if o["kind"] != "Pod"])
    for name in ("resume", "resume-bridged"):
        _apply(objs, plan_step(name, view, OPTIONS, ctx).changes)
    strip = lambda os: [  # noqa: E731
        (
            o["kind"],
            o["metadata"]["name"],
            o.get("spec", {}).get("replicas"),
            bool(o.get("spec", {}).get("suspend")),
        )
        for o in os
        if o["kind"] in ("Deployment", "Kustomization")
    ]
    assert strip(objs) == strip(original)


def _field(objs: list[dict[str, Any]], change: Change) -> Any:
    obj = next(o for o in objs if ObjectRef.of(o).key == change.obj.key)
    cur: Any = obj
    for seg in change.path:
        cur = (cur or {}).get(seg)
    return cur


def _apply(objs: list[dict[str, Any]], changes: tuple[Change, ...]) -> None:
    """JSON merge patch (RFC 7386) of each change onto its object."""

    def merge(target: Any, patch: Any) -> Any:
        if not isinstance(patch, dict):
            return patch
        out = dict(target) if isinstance(target, dict) else {}
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge(out.get(k), v)
        return out

    for change in changes:
        for i, o in enumerate(objs):
            if ObjectRef.of(o).key == change.obj.key:
                objs[i] = merge(o, change.patch)


def test_lease_judgement() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    fresh = {
        "metadata": {"name": "gpushift-cutover", "namespace": "flux-system"},
        "spec": {
            "holderIdentity": "other-host/42/r1",
            "leaseDurationSeconds": 60,
            "renewTime": (now - timedelta(seconds=10)).isoformat(),
        },
    }
    assert judge_lease(None, me="me", now=now).action == "take"
    refused = judge_lease(fresh, me="me", now=now)
    assert refused.action == "refuse"
    assert "held by other-host/42/r1, last renewed" in refused.message
    assert judge_lease(fresh, me="other-host/42/r1", now=now).action == "renew"
    old = copy.deepcopy(fresh)
    old["spec"]["renewTime"] = (now - timedelta(seconds=61)).isoformat()
    assert judge_lease(old, me="me", now=now).action == "take"
    assert judge_lease({"spec": {"holderIdentity": None}}, me="me", now=now).action == "take"


@given(
    st.lists(
        st.tuples(st.sampled_from(["n1", "n2", "n3"]), st.integers(0, 8)),
        min_size=1,
        max_size=3,
        unique_by=lambda t: t[0],
    ),
    st.integers(0, 8),
)
def test_allocatable_holds_only_when_every_node_reads_its_count(
    want: list[tuple[str, int]], other: int
) -> None:
    from gpushift.runbook import Allocatable

    cond = Allocatable("nvidia.com/gpu", tuple(want))
    exact = _view([_node(n, str(v)) for n, v in want])
    assert cond.check(exact)[0]
    off = _view([_node(n, str(v if i else other)) for i, (n, v) in enumerate(want)])
    assert cond.check(off)[0] == (other == want[0][1])


def test_consumer_json_round_trip() -> None:
    view = _view(_cluster())
    for c in discover(view, apps=None)[0]:
        assert Consumer.from_json(c.to_json()) == c


def test_a_bridged_consumer_pending_on_shares_names_the_remedies() -> None:
    from gpushift.runbook import BRIDGE_REMEDIES, WorkloadsUp

    pod = _pod("ai", "llama-1-x", ("ReplicaSet", "llama-1"), phase="Pending")
    pod["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        }
    ]
    view = _view([_workload("Deployment", "ai", "llama"), _rs("ai", "llama-1", "llama"), pod])
    deploy = ObjectRef("apps/v1", "Deployment", "ai", "llama")
    ok, why = WorkloadsUp(((deploy, 1),), shared=True, bridged=True).check(view)
    assert not ok
    assert why == (
        "consumers: Deployment/ai/llama 0/1 Running (0/3 nodes are available: 3 Insufficient "
        f"nvidia.com/gpu.: {BRIDGE_REMEDIES})"
    )
    running = copy.deepcopy(pod)
    running["status"] = {
        "phase": "Running",
        "extendedResourceClaimStatus": {"resourceClaimName": "c1"},
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c1", "namespace": "ai"},
        "status": {
            "allocation": {
                "devices": {"results": [{"driver": "gpu.nvidia.com", "device": "gpu-0"}]}
            }
        },
    }
    base = [_workload("Deployment", "ai", "llama"), _rs("ai", "llama-1", "llama"), running]
    cond = WorkloadsUp(((deploy, 1),), shared=True, bridged=True)
    assert cond.check(_view([*base, claim])) == (
        False,
        "consumers: Deployment/ai/llama: claim ai/c1 has no shareID",
    )
    claim["status"]["allocation"]["devices"]["results"][0]["shareID"] = "u1"
    assert cond.check(_view([*base, claim])) == (True, "consumers Running")


def test_a_consumer_pending_before_the_move_is_reported_not_waited_for() -> None:
    from gpushift.runbook import WorkloadsUp

    pending = _pod("media", "jellyfin-1-x", ("ReplicaSet", "jellyfin-1"), phase="Pending")
    objs = [
        *_cluster(),
        # tdarr wants 3 and runs 1 before the move (tdarr-0 from _cluster; tdarr-1 Pending).
        _pod("media", "tdarr-1", ("StatefulSet", "tdarr"), phase="Pending"),
        # jellyfin never got its GPU: Pending before the move.
        _workload("Deployment", "media", "jellyfin", hr="plex"),
        _rs("media", "jellyfin-1", "jellyfin"),
        pending,
    ]
    the_plan = plan(_view(objs), OPTIONS, Context(token="T"))
    running = {c.workload.key: c.running for c in the_plan.consumers}
    assert running["Deployment/media/jellyfin"] == 0
    assert running["StatefulSet/media/tdarr"] == 1
    resume = next(s for s in the_plan.steps if s.name == "resume")
    (up,) = [w.condition for w in resume.waits if isinstance(w.condition, WorkloadsUp)]
    assert {w.key: n for w, n in up.consumers} == {
        "Deployment/media/plex": 1,
        "StatefulSet/media/tdarr": 1,
        "DaemonSet/media/encoder": 1,
        "CronJob/media/nightly": 1,
    }
    assert resume.note == (
        "not waited for, no pod Running before the move: Deployment/media/jellyfin"
    )
    # It is still given back its replicas: reported, not left stopped.
    assert ("Deployment/media/jellyfin", "spec.replicas") in {
        (c.obj.key, c.field) for c in resume.changes
    }


def test_resume_waits_without_a_recorded_running_count_wait_for_the_replicas() -> None:
    from gpushift.runbook import resume_waits

    ref = ObjectRef("apps/v1", "StatefulSet", "media", "tdarr")
    old = Consumer(workload=ref)
    assert resume_waits([old], {ref.key: 3}) == (((ref, 3),), ())
    assert resume_waits([Consumer(workload=ref, running=2)], {ref.key: 3}) == (((ref, 2),), ())
    assert resume_waits([Consumer(workload=ref, running=5)], {}) == (((ref, 1),), ())
    idle = Consumer(workload=ref, running=0)
    assert resume_waits([idle], {ref.key: 3}) == ((), (idle,))
    assert Consumer.from_json(old.to_json()).running is None


def _agent_ds(name: str, *, desired: int, updated: int, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "gpu-operator", "generation": generation},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "exporter", "image": "nvcr.io/k8s/dcgm-exporter:4"}]
                }
            }
        },
        "status": {
            "observedGeneration": 1,
            "desiredNumberScheduled": desired,
            "updatedNumberScheduled": updated,
        },
    }


def _agent_pod(
    name: str, *, ready: bool = False, waiting: str = "", restarts: int = 0
) -> dict[str, Any]:
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "gpu-operator",
            "ownerReferences": [{"kind": "DaemonSet", "name": "dcgm"}],
        },
        "spec": {"containers": [{"name": "exporter", "image": "nvcr.io/k8s/dcgm-exporter:4"}]},
        "status": {
            "phase": "Running" if not waiting else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {"name": "exporter", "ready": ready, "restartCount": restarts, "state": state}
            ],
        },
    }


def test_the_verdict_waits_for_the_agents_to_settle() -> None:
    view = _view(_cluster())
    settled = plan_step("verdict", view, OPTIONS, _ctx(view)).waits[0].condition

    def check(*objs: dict[str, Any]) -> tuple[bool, str]:
        return settled.check(_view(list(objs)))

    ok = _agent_pod("dcgm-a", ready=True)
    assert check(_agent_ds("dcgm", desired=1, updated=1), ok) == (True, "GPU agents settled")
    # Still starting: a container being created, a rollout not done, a pod not seen yet.
    assert check(
        _agent_ds("dcgm", desired=1, updated=1), _agent_pod("dcgm-a", waiting="ContainerCreating")
    ) == (
        False,
        "GPU agents settled: dcgm-exporter gpu-operator/dcgm-a ContainerCreating",
    )
    assert check(_agent_ds("dcgm", desired=2, updated=1), ok)[1] == (
        "GPU agents settled: DaemonSet/gpu-operator/dcgm 1/2 updated"
    )
    assert check(_agent_ds("dcgm", desired=2, updated=2), ok)[1] == (
        "GPU agents settled: DaemonSet/gpu-operator/dcgm 1/2 pods"
    )
    assert check(_agent_ds("dcgm", desired=1, updated=1, generation=2), ok)[1] == (
        "GPU agents settled: DaemonSet/gpu-operator/dcgm rolling out"
    )
    # Stuck is settled: the verdict names it, waiting would not help.
    for stuck in (
        _agent_pod("dcgm-a", waiting="CrashLoopBackOff", restarts=3),
        _agent_pod("dcgm-a", waiting="ImagePullBackOff"),
        _agent_pod("dcgm-a", restarts=2),
    ):
        assert check(_agent_ds("dcgm", desired=1, updated=1), stuck)[0], stuck
    # A Terminating agent pod and a consumer pod are not waited for.
    gone = _agent_pod("dcgm-old", waiting="ContainerCreating")
    gone["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    consumer = _agent_pod("plex", waiting="ContainerCreating")
    consumer["spec"]["containers"][0]["image"] = "plexinc/pms-docker"
    assert check(_agent_ds("dcgm", desired=1, updated=1), ok, gone, consumer)[0]


def _ranked(objs: list[dict[str, Any]], pod: str, priority: int, **spec: Any) -> None:
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] == pod:
            o["spec"].update(priority=priority, **spec)


def test_preflight_note_warns_of_the_preemption_dra_ends_from_live_pods() -> None:
    # The model's pods were admitted at -100; plex's at 0 (no class): under DRA kube-scheduler
    # no longer preempts the model for plex. Rolling back keeps preemption: no warning.
    objs = _cluster()
    _ranked(objs, "llama-1-x", -100, priorityClassName="gpu-preemptible")
    view = _view(objs)
    note = plan_step("preflight", view, OPTIONS, _ctx(view)).note
    (warning,) = [w for w in note.split("; warning: ")[1:]]
    assert warning.startswith(
        "dra-preemption-lost (InferenceService/ai/llama): InferenceService/ai/llama (PriorityClass "
        "gpu-preemptible, priority -100) is outranked by "
    )
    assert "Deployment/media/plex (no PriorityClass, priority 0)" in warning
    back = Options(to="device-plugin")
    assert "warning" not in plan_step("preflight", view, back, _ctx(view, back)).note


def test_preflight_note_has_no_warning_when_the_higher_pods_never_preempt() -> None:
    objs = _cluster()
    _ranked(objs, "llama-1-x", -100, priorityClassName="gpu-preemptible")
    for pod in ("plex-abc-1", "tdarr-0", "encoder-x", "nightly-1-x"):
        _ranked(objs, pod, 0, preemptionPolicy="Never")
    view = _view(objs)
    assert "warning" not in plan_step("preflight", view, OPTIONS, _ctx(view)).note


def test_a_consumer_pending_because_the_device_plugin_runs_nowhere_names_the_fix() -> None:
    from gpushift.runbook import WorkloadsUp

    message = (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling."
    )
    pod = _pod("media", "plex-1-x", ("ReplicaSet", "plex-1"), phase="Pending")
    pod["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    ]
    plugin = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"},
        "spec": {"template": {"spec": {"nodeSelector": {"gpu-type": "a100"}, "containers": []}}},
    }
    objs = [
        _workload("Deployment", "media", "plex"),
        _rs("media", "plex-1", "plex"),
        pod,
        plugin,
        _node("k8s-0", gpu="0"),
        _node("k8s-1", gpu=None),
    ]
    deploy = ObjectRef("apps/v1", "Deployment", "media", "plex")
    # Back on the device plugin: allocatable 0 everywhere, and the DaemonSet selects no node.
    ok, why = WorkloadsUp(((deploy, 1),), shared=False).check(_view(objs))
    assert not ok
    assert why == (
        f"consumers: Deployment/media/plex 0/1 Running ({message} — allocatable nvidia.com/gpu "
        "is 0 on every node: the device plugin did not start: DaemonSet "
        "kube-system/nvidia-device-plugin selects gpu-type=a100, which no node has; add "
        '`labels: {gpu-type: "a100"}` to the inventory\'s GPU nodes (--nodes), or make the '
        "inventory from your nodes: gpushift twin inventory --from nodes.k8s.yaml)"
    )
    # On DRA the allocatable is 0 by design: the scheduler's message alone.
    ok, why = WorkloadsUp(((deploy, 1),), shared=True).check(_view(objs))
    assert why == f"consumers: Deployment/media/plex 0/1 Running ({message})"
