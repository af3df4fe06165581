"""The pure planner: observations of the cluster (and the journal) in, steps out.

``facts`` records what the run must remember from the start (GPU nodes, the old share
count, the device plugin's DaemonSets, the source's revision); ``preflight`` gives every
reason to refuse at once; ``plan_step`` builds one step from a fresh view and the journal, so
a resumed run re-plans each step with the values recorded before anything was changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpushift import flux
from gpushift._obj import Obj
from gpushift.reports import Finding
from gpushift.rules import (
    DEFAULT_KUBERNETES_VERSION,
    Ranked,
    parse_kubernetes_version,
    preemption_hazards,
)
from gpushift.runbook._barrier import (
    Barrier,
    choose_barrier,
    default_barrier,
    live_agents,
    show_taint,
    show_toleration,
    tolerating,
    untainted,
)
from gpushift.runbook._conditions import (
    AgentsSettled,
    Allocatable,
    DaemonSetsGone,
    DependentsRetried,
    DriverGone,
    NoGpuPods,
    OperatorCrsGone,
    PoolsUp,
    Reconciled,
    SourceRevision,
    UserClaimsGone,
    WorkloadsUp,
    allocatable,
    user_claims,
)
from gpushift.runbook._discover import discover, merge_consumers, pod_key
from gpushift.runbook._model import (
    DRA_DRIVER,
    GPU_RESOURCE,
    PARKED_LABEL,
    STEPS,
    Action,
    Change,
    Command,
    Consumer,
    Delete,
    ObjectRef,
    Options,
    Plan,
    Step,
    Wait,
    field_value,
)
from gpushift.runbook._target import NEVER_RESTORED, Target, older_than
from gpushift.runbook._view import View, api_version_of

#: DRA extended-resource bridging (KEP-5004, DeviceClass ``extendedResourceName``) exists from
#: Kubernetes 1.34 (alpha gate DRAExtendedResource; beta, on by default, in 1.36).
MIN_BRIDGING = (1, 34)
#: dra-driver-nvidia-gpu 0.5 is the first release with consumable shares.
MIN_DRIVER_FOR_SHARES = (0, 5)
_MIN_DRIVER = (0, 5, 0)
_PSA_FORBIDS_PRIVILEGED = {"baseline", "restricted"}
DEFAULT_APPS = ObjectRef(
    api_version_of("Kustomization"), "Kustomization", "flux-system", "cluster-apps"
)


@dataclass(frozen=True)
class Context:
    """What the journal holds for the planner: the consumers recorded before anything was
    changed, the changes made so far (by :attr:`Change.key`), the run's facts, and the token
    for new reconcile requests."""

    consumers: tuple[Consumer, ...] | None = None
    recorded: Mapping[str, Change] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    token: str = "1970-01-01T00:00:00.000000Z"


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _is_gpu_node(node: Mapping[str, Any], view: View) -> bool:
    name = (node.get("metadata") or {}).get("name")
    if str(_labels(node).get("nvidia.com/gpu.present")) == "true":
        return True
    if allocatable(node, GPU_RESOURCE) > 0:
        return True
    return any(
        (s.get("spec") or {}).get("nodeName") == name
        and (s.get("spec") or {}).get("driver") == DRA_DRIVER
        for s in view.all("ResourceSlice")
    )


def _cards(node: Mapping[str, Any], view: View) -> int:
    """GPUs on a node: GFD's ``nvidia.com/gpu.count``, else the DRA devices published."""
    count = str(_labels(node).get("nvidia.com/gpu.count") or "")
    if count.isdigit() and int(count) > 0:
        return int(count)
    name = (node.get("metadata") or {}).get("name")
    devices = sum(
        len((s.get("spec") or {}).get("devices") or [])
        for s in view.all("ResourceSlice")
        if (s.get("spec") or {}).get("nodeName") == name
        and (s.get("spec") or {}).get("driver") == DRA_DRIVER
    )
    return devices or 1


def _shares_now(node: Mapping[str, Any], view: View) -> int | None:
    """The sharing in force on a node: time-slicing replicas, or the DRA ``shares``."""
    replicas = str(_labels(node).get("nvidia.com/gpu.replicas") or "")
    if allocatable(node, GPU_RESOURCE) > 0:
        if replicas.isdigit() and int(replicas) > 0:
            return int(replicas)
        return max(allocatable(node, GPU_RESOURCE) // _cards(node, view), 1)
    name = (node.get("metadata") or {}).get("name")
    for s in view.all("ResourceSlice"):
        spec = s.get("spec") or {}
        if spec.get("nodeName") == name and spec.get("driver") == DRA_DRIVER:
            for dev in spec.get("devices") or []:
                value = ((dev.get("capacity") or {}).get("shares") or {}).get("value")
                if value is not None and str(value).isdigit():
                    return int(str(value))
    if replicas.isdigit() and int(replicas) > 0:
        return int(replicas)
    return None


def device_plugin_daemonsets(view: View) -> list[str]:
    """``namespace/name`` of the device plugin's DaemonSets."""
    return sorted(
        f"{d['metadata'].get('namespace')}/{d['metadata']['name']}"
        for d in view.all("DaemonSet")
        if "device-plugin" in str(d["metadata"]["name"])
    )


def resolve_apps(view: View, options: Options) -> ObjectRef:
    """``--apps``, else the top Kustomization applying the GPU stack (the gpu-operator or DRA
    driver HelmRelease, followed up its kustomize-controller labels), else
    flux-system/cluster-apps."""
    if options.apps is not None:
        return options.apps
    for hr in view.all("HelmRelease"):
        name = str(hr["metadata"]["name"])
        if not any(f in name for f in ("gpu-operator", "dra-driver", "device-plugin")):
            continue
        cur: Mapping[str, Any] | None = hr
        top: ObjectRef | None = None
        for _ in range(10):
            labels = _labels(cur)
            ks, ns = (
                labels.get("kustomize.toolkit.fluxcd.io/name"),
                labels.get("kustomize.toolkit.fluxcd.io/namespace"),
            )
            if not ks or not ns:
                break
            top = ObjectRef(api_version_of("Kustomization"), "Kustomization", str(ns), str(ks))
            cur = view.find(top)
        if top is not None:
            return top
    return DEFAULT_APPS


def barrier(view: View, options: Options, target: Target | None = None) -> Barrier:
    """The merge step's barrier, checked against the new allocator's DaemonSets: those the
    merge target deploys when it is read and deploys any, else those in the cluster."""
    at_target = tuple(a for a in (target.agents if target else ()) if a.allocator == options.to)
    return choose_barrier(options.to, at_target or live_agents(view))


def barrier_of(f: Mapping[str, Any], to: str) -> Obj | None:
    """The barrier the run's facts record: None when there is none the new allocator does
    not tolerate (a refused plan); the default in journals written before it was chosen."""
    if "barrier" not in f:
        return default_barrier(to)
    taint = f.get("barrier")
    return dict(taint) if isinstance(taint, Mapping) else None


def facts(view: View, options: Options, *, target: Target | None = None) -> dict[str, Any]:
    """What the run records at its start (journaled; a resumed run plans from these);
    ``target`` is the merge target read from ``--repo``, for the barrier."""
    nodes = sorted(
        (n for n in view.all("Node") if _is_gpu_node(n, view)),
        key=lambda n: str(n["metadata"]["name"]),
    )
    shares_now = {str(n["metadata"]["name"]): _shares_now(n, view) for n in nodes}
    known = [s for s in shares_now.values() if s]
    old = max(known) if known else 1
    shares = options.expect_shares or old
    expected = {str(n["metadata"]["name"]): shares * _cards(n, view) for n in nodes}
    source = view.find(options.source)
    return {
        "gpuNodes": [str(n["metadata"]["name"]) for n in nodes],
        "oldShares": old,
        "shares": shares,
        "expectedAllocatable": expected,
        "devicePlugins": device_plugin_daemonsets(view),
        "revisionBefore": flux.revision(source) if source else "",
        "apps": resolve_apps(view, options).to_json(),
        "barrier": barrier(view, options, target).taint,
        "gpuCluster": gpu_cluster_stack(view, options, target),
    }


def gpu_cluster_stack(view: View, options: Options, target: Target | None) -> bool:
    """Whether the DRA side of the move is gpu-operator's GPUCluster: the target deploys one
    (toward DRA), or one runs now (back to the device plugin)."""
    if options.to == "dra":
        return bool(target and target.gpu_clusters)
    return bool(view.all("GPUCluster"))


def _version_tuple(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.lstrip("v").split("-")[0].split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def _driver_chart_version(view: View) -> tuple[str, str] | None:
    """(HelmRelease key, chart version) of the DRA driver's release, if deployed."""
    for hr in view.all("HelmRelease"):
        spec = hr.get("spec") or {}
        chart = (spec.get("chart") or {}).get("spec") or {}
        name = str(chart.get("chart") or "")
        version = str(chart.get("version") or "")
        ref = spec.get("chartRef") or {}
        if ref.get("kind") == "OCIRepository":
            oci = view.get(
                "OCIRepository",
                str(ref.get("namespace") or hr["metadata"].get("namespace")),
                str(ref.get("name")),
            )
            oci_spec = (oci or {}).get("spec") or {}
            name = name or str(oci_spec.get("url") or "")
            version = version or str((oci_spec.get("ref") or {}).get("tag") or "")
        if "dra-driver-nvidia-gpu" in name or "dra-driver-nvidia-gpu" in str(
            hr["metadata"]["name"]
        ):
            return (
                f"HelmRelease/{hr['metadata'].get('namespace')}/{hr['metadata']['name']}",
                version,
            )
    return None


def _driver_namespaces(view: View) -> list[str]:
    out = set()
    for ds in view.all("DaemonSet"):
        name = str(ds["metadata"]["name"])
        if any(f in name for f in ("device-plugin", "dra-driver", "kubelet-plugin")):
            out.add(str(ds["metadata"].get("namespace")))
    for hr in view.all("HelmRelease"):
        name = str(hr["metadata"]["name"])
        if "dra-driver" in name or "gpu-operator" in name:
            spec = hr.get("spec") or {}
            out.add(str(spec.get("targetNamespace") or hr["metadata"].get("namespace")))
    return sorted(out)


def preflight(
    view: View,
    options: Options,
    *,
    consumers: tuple[Consumer, ...],
    loose: tuple[str, ...] = (),
    journal: Mapping[str, Any] | None = None,
    lock: str | None = None,
    target: Target | None = None,
) -> list[str]:
    """Every reason to refuse the run, at once (empty: go).

    ``journal`` is the unfinished journal found (None: none or finished); ``lock`` the
    refusal of the Lease (holder and renewTime), if another run holds it; ``target`` the
    merge target read from ``--repo`` (None: not given): each error finding of ``gpushift
    check`` there refuses, and its DRA driver chart stands for the deployed release's.
    """
    reasons: list[str] = []
    if journal is not None:
        reasons.append(
            f"an unfinished cutover journal: run {journal.get('run')} to {journal.get('to')}, "
            f"started {journal.get('started')}, at step {journal.get('current') or '?'}; "
            "continue it with --resume or undo it with --abort"
        )
    if lock:
        reasons.append(lock)
    if not view.serves_resource_v1:
        reasons.append("the API server does not serve resource.k8s.io/v1 (Kubernetes 1.34+)")
    apps = resolve_apps(view, options)
    path: list[ObjectRef] = [options.source, apps]
    for c in consumers:
        path.extend(c.flux)
    seen: set[str] = set()
    for ref in path:
        if ref.key in seen:
            continue
        seen.add(ref.key)
        obj = view.find(ref)
        if obj is None:
            reasons.append(f"{ref.key} does not exist")
            continue
        if (obj.get("spec") or {}).get("suspend") is True and ref in (options.source, apps):
            reasons.append(f"{ref.key} is suspended")
            continue
        ok, why = flux.object_ready(obj)
        if not ok and (obj.get("spec") or {}).get("suspend") is not True:
            reasons.append(f"{ref.key} is not Ready: {why}")
    reasons.extend(loose)
    for c in consumers:
        if not c.flux and c.top.kind not in ("Job",):
            top = view.find(c.top)
            labels = _labels(top)
            if labels.get("kustomize.toolkit.fluxcd.io/name") == apps.name:
                reasons.append(
                    f"{c.top.key} is applied by {apps.key}, which applies the merge: it would "
                    "start on the new allocator before it is up; give it its own Kustomization"
                )
    if options.to == "dra":
        bridged = [c for c in consumers if c.bridged]
        if bridged and view.version < MIN_BRIDGING:
            reasons.append(
                f"the server is Kubernetes {view.version[0]}.{view.version[1]}: "
                f"{', '.join(c.top.key for c in bridged)} can only ask for {GPU_RESOURCE}, "
                f"which DRA serves through extended-resource bridging from "
                f"{MIN_BRIDGING[0]}.{MIN_BRIDGING[1]}"
            )
        shares = options.expect_shares or 0
        chart = _driver_chart_version(view) if target is None else None
        if target is not None and shares != 1:
            reasons.extend(_target_driver_reasons(target))
        if chart is not None and chart[1] and shares != 1:
            have = _version_tuple(chart[1])
            if have and have < MIN_DRIVER_FOR_SHARES:
                reasons.append(
                    f"{chart[0]} installs dra-driver-nvidia-gpu {chart[1]}: consumable shares "
                    "need 0.5.0 or later"
                )
        nodes = [n for n in view.all("Node") if _is_gpu_node(n, view)]
        on_plugin = any(allocatable(n, GPU_RESOURCE) > 0 for n in nodes)
        if (
            nodes
            and not on_plugin
            and any(
                (s.get("spec") or {}).get("driver") == DRA_DRIVER for s in view.all("ResourceSlice")
            )
        ):
            reasons.append("the cluster already allocates its GPUs through DRA")
    else:
        nodes = [n for n in view.all("Node") if _is_gpu_node(n, view)]
        if (
            nodes
            and all(allocatable(n, GPU_RESOURCE) > 0 for n in nodes)
            and not any(
                (s.get("spec") or {}).get("driver") == DRA_DRIVER for s in view.all("ResourceSlice")
            )
        ):
            reasons.append("the cluster already allocates its GPUs through the device plugin")
    if not [n for n in view.all("Node") if _is_gpu_node(n, view)]:
        reasons.append("no GPU node found (nvidia.com/gpu.present, allocatable or DRA slices)")
    if target is not None:
        reasons.extend(_target_check_reasons(target))
    held = barrier(view, options, target)
    if held.taint is None:
        reasons.append(held.refusal)
    for ns in _driver_namespaces(view):
        obj = view.get("Namespace", "", ns)
        level = str(_labels(obj).get("pod-security.kubernetes.io/enforce") or "")
        if level in _PSA_FORBIDS_PRIVILEGED:
            reasons.append(
                f"namespace {ns} enforces Pod Security {level!r}, which forbids the privileged "
                "pods the GPU driver runs (label it pod-security.kubernetes.io/enforce="
                "privileged)"
            )
    return reasons


def _target_check_reasons(target: Target) -> list[str]:
    """One reason per error finding of ``gpushift check`` at the target."""
    out = [f"gpushift check finds an error at the target: {_finding(f)}" for f in target.errors]
    if target.back_to and any(f.rule not in NEVER_RESTORED for f in target.errors):
        # A match would have moved these to ``existing`` (_target.returning).
        out.append(
            f"the target is not exactly {target.back_to}: only a rollback to that very tree "
            "may bring back the errors the cluster ran before the move"
        )
    return out


def _target_driver_reasons(target: Target) -> list[str]:
    """A reason per DRA driver release at the target whose chart is older than 0.5."""
    out = []
    for d in target.drivers:
        if older_than(d.version, _MIN_DRIVER) is True:
            out.append(
                f"{d.file}: {d.release} at the target installs dra-driver-nvidia-gpu "
                f"{d.version}: consumable shares need 0.5.0 or later"
            )
    return out


def barrier_note(taint: Mapping[str, Any] | None, to: str) -> str:
    """The merge step's note: the barrier, and why when it is not the default."""
    if taint is None:
        return (
            "no barrier: the new allocator's DaemonSet tolerates every taint gpushift would "
            "hold the GPU nodes with (refused, see the preflight)"
        )
    note = (
        f"the barrier: every GPU node tainted {show_taint(taint)} until the old allocator is gone"
    )
    if taint.get("key") != default_barrier(to)["key"]:
        note += (
            f" ({show_taint(default_barrier(to))} is tolerated by the new allocator's DaemonSet)"
        )
    return note


def _barrier_checked(held: Barrier, target: Target | None) -> str:
    """What the preflight read for the barrier: each agent and whether it tolerates the
    default barrier."""
    if not held.agents:
        where = "at the target or in the cluster" if target is not None else "in the cluster"
        return f"the new allocator's DaemonSet tolerations: none found {where}, not checked"
    default = default_barrier(held.agents[0].allocator)
    parts = []
    for a in held.agents:
        found = tolerating(a, default)
        detail = ", ".join(x for x in (a.where, "the chart's default" if a.default else "") if x)
        place = f" ({detail})" if detail else ""
        said = f"tolerates it with {show_toleration(found)}" if found else "does not tolerate it"
        parts.append(f"{a.name} {a.field}{place} {said}")
    return f"the barrier {show_taint(default)}: " + "; ".join(parts)


def preflight_warnings(
    view: View, options: Options, target: Target | None, consumers: Sequence[Consumer]
) -> list[str]:
    """What the preflight lets pass and the operator must read: the preemption a move to DRA
    ends (:func:`preemption_lost`), and the error findings a rollback brings back because the
    cluster ran them before the move it undoes (``Target.existing``)."""
    out = preemption_lost(view, options, target, consumers)
    if target is not None:
        out += [
            f"the cluster ran this before the move (the target is {target.back_to}): " + _finding(f)
            for f in target.existing
        ]
    return out


def _finding(f: Finding) -> str:
    """``RULE in FILE:LINE (OBJECT): MESSAGE``, a check finding at the target."""
    where = f"{f.path}:{f.line}" if f.line else f.path
    return f"{f.rule} in {where} ({f.object}): {f.message}"


def preemption_lost(
    view: View, options: Options, target: Target | None, consumers: Sequence[Consumer]
) -> list[str]:
    """What a move to DRA ends: PriorityClass preemption among the GPU consumers
    (``dra-preemption-lost``, docs/rules.md), from the target's check when it is known, else
    from the admitted priorities of the consumers' live pods. A warning: the move goes on."""
    if options.to != "dra":
        return []
    if target is not None:
        return [f"{f.rule} at {f.path}:{f.line} ({f.object}): {f.message}" for f in target.hazards]
    pods = {pod_key(p): p for p in view.all("Pod")}
    ranked: list[Ranked] = []
    for c in consumers:
        pod = next((pods[k] for k in c.pods if k in pods), None)
        if pod is None:
            continue
        spec = pod.get("spec") or {}
        prio = spec.get("priority")
        ranked.append(
            Ranked(
                c.top.key,
                spec.get("priorityClassName") or None,
                prio if isinstance(prio, int) else 0,
                spec.get("preemptionPolicy") != "Never",
            )
        )
    version = parse_kubernetes_version(DEFAULT_KUBERNETES_VERSION)
    return [
        f"dra-preemption-lost ({h.victim.name}): {h.message(version)}"
        for h in preemption_hazards(ranked)
    ]


def preflight_note(options: Options, target: Target | None, held: Barrier | None = None) -> str:
    """What the preflight step reads, for the plan: the new allocator's DaemonSets checked
    against the barrier (``held``), the target tree, or that it was not checked."""
    base = "refuse with every reason at once (docs/runbook.md)"
    if held is not None:
        base += "; " + _barrier_checked(held, target)
    if target is None:
        if options.to == "dra":
            return (
                f"{base}; the DRA driver chart at the target was not checked (no --repo): "
                "only the deployed release's"
            )
        return base
    found = f"{len(target.errors)} error finding" + ("" if len(target.errors) == 1 else "s")
    note = f"{base}; gpushift check at the target {target.where}: {found}"
    if options.to == "dra":
        if target.gpu_clusters:
            note += "; gpu-operator's GPUCluster at the target runs the DRA driver: " + ", ".join(
                target.gpu_clusters
            )
        elif not target.drivers:
            note += "; no dra-driver-nvidia-gpu HelmRelease at the target"
        for d in target.drivers:
            version = d.version or "no version (the latest)"
            told = older_than(d.version, _MIN_DRIVER)
            extra = " (cannot tell its version)" if told is None else ""
            note += f"; DRA driver chart at the target: {version} in {d.file}{extra}"
    return note


# --- steps ------------------------------------------------------------------------------------


def _change(
    ctx: Context,
    view: View,
    *,
    step: str,
    obj: ObjectRef,
    path: tuple[str, ...],
    after: Any,
    why: str,
    undo: bool = True,
) -> Change | None:
    """A change with its journaled ``before`` when the run recorded one, else the live value;
    None when the field already holds ``after`` and nothing was recorded."""
    probe = Change(step, obj, path, None, after, why, undo)
    recorded = ctx.recorded.get(probe.key)
    if recorded is not None and recorded.step == step:
        return Change(step, obj, path, recorded.before, after, why, undo)
    live = field_value(view.find(obj), path)
    if live == after or (after is None and live is False):
        return None
    return Change(step, obj, path, live, after, why, undo)


def _replicas(obj: Mapping[str, Any] | None) -> Any:
    spec = (obj or {}).get("spec") or {}
    return spec.get("replicas", 1)


def suspend_changes(consumers: tuple[Consumer, ...], view: View, ctx: Context) -> list[Change]:
    """Suspend every Flux owner, then stop every workload (see docs/runbook.md)."""
    out: list[Change | None] = []
    seen: set[str] = set()
    for c in consumers:
        for ref in reversed(c.flux):  # the Kustomization before the HelmRelease it applies
            if ref.key in seen:
                continue
            seen.add(ref.key)
            out.append(
                _change(
                    ctx,
                    view,
                    step="suspend",
                    obj=ref,
                    path=("spec", "suspend"),
                    after=True,
                    why=f"flux suspend: {c.top.key} would be scaled back up",
                )
            )
    for c in consumers:
        top = c.top
        kind = top.kind
        if kind in ("Deployment", "StatefulSet") or c.owner is not None:
            change = _change(
                ctx,
                view,
                step="suspend",
                obj=top,
                path=("spec", "replicas"),
                after=0,
                why="stop its GPU pods",
            )
            if change is not None and change.before is None:
                change = Change(
                    change.step, change.obj, change.path, _replicas(None), change.after, change.why
                )
            out.append(change)
        elif kind == "DaemonSet":
            out.append(
                _change(
                    ctx,
                    view,
                    step="suspend",
                    obj=top,
                    path=("spec", "template", "spec", "nodeSelector", PARKED_LABEL),
                    after="true",
                    why="a nodeSelector no node matches stops its pods",
                )
            )
        elif kind == "CronJob":
            out.append(
                _change(
                    ctx,
                    view,
                    step="suspend",
                    obj=top,
                    path=("spec", "suspend"),
                    after=True,
                    why="no new Job starts",
                )
            )
    return [c for c in out if c is not None]


def _restores(
    consumers: tuple[Consumer, ...], view: View, ctx: Context, *, step: str
) -> tuple[list[Change], list[Change], list[Change]]:
    """(Kustomization, HelmRelease, workload) changes setting back what the suspend step
    changed for these consumers, with the values it recorded."""
    objs = {c.top.key for c in consumers} | {f.key for c in consumers for f in c.flux}
    suspended = [ch for ch in ctx.recorded.values() if ch.step == "suspend" and ch.obj.key in objs]
    groups: tuple[list[Change], list[Change], list[Change]] = ([], [], [])
    for ch in sorted(suspended, key=lambda c: c.key):
        after = ch.before
        if ch.path == ("spec", "suspend") and not ch.before:
            after = None  # flux resume: the field is omitempty, so false is its removal
        index = {"Kustomization": 0, "HelmRelease": 1}.get(ch.obj.kind, 2)
        groups[index].append(
            Change(step, ch.obj, ch.path, ch.after, after, "set back what the suspend step changed")
        )
    return groups


def _reconcile(
    refs: list[ObjectRef], view: View, ctx: Context, *, step: str, source: ObjectRef | None
) -> list[Action]:
    """Request a reconcile of each (the requestedAt annotation) and wait until handled."""
    if not refs:
        return []
    out: list[Action] = []
    targets: list[tuple[ObjectRef, str]] = []
    for ref in refs:
        path = ("metadata", "annotations", flux.REQUESTED_AT)
        key = Change(step, ref, path, None, None).key
        recorded = ctx.recorded.get(key)
        token = str(recorded.after) if recorded is not None else ctx.token
        before = recorded.before if recorded is not None else field_value(view.find(ref), path)
        out.append(Change(step, ref, path, before, token, "request a reconcile", undo=False))
        targets.append((ref, token))
    out.append(
        Wait(
            step,
            Reconciled(tuple(targets), source=source),
            "each handled the request and is Ready at its generation",
        )
    )
    return out


def _beside(resumes: list[Change], reconcile: list[Action]) -> list[Action]:
    """Each object's reconcile request right after its resume, then the wait: the executor
    sends the two fields of one object in one merge patch (``flux resume`` then ``flux
    reconcile``, in one write), and the wait is the handshake on every request as before."""
    requests = {a.obj.key: a for a in reconcile if isinstance(a, Change)}
    out: list[Action] = []
    for change in resumes:
        out.append(change)
        request = requests.pop(change.obj.key, None)
        if request is not None:
            out.append(request)
    out += requests.values()
    out += [a for a in reconcile if not isinstance(a, Change)]
    return out


def _node(name: str) -> ObjectRef:
    return ObjectRef(api_version_of("Node"), "Node", "", name)


def hold_changes(
    nodes: Sequence[str], view: View, ctx: Context, *, to: str, taint: Obj | None = None
) -> list[Change]:
    """The merge step's taint on every GPU node, the barrier (by default
    ``gpushift.dev/cutover=<to>:NoSchedule``), added to the taints the node has (a resumed
    run keeps the list recorded before)."""
    out: list[Change | None] = []
    taint = taint or default_barrier(to)
    path = ("spec", "taints")
    for name in nodes:
        live = field_value(view.get("Node", "", name), path)
        out.append(
            _change(
                ctx,
                view,
                step="merge",
                obj=_node(name),
                path=path,
                after=[*untainted(live), taint],
                why="hold the new allocator's agents off the node until the old one is gone",
            )
        )
    return [c for c in out if c is not None]


def release_changes(nodes: Sequence[str], view: View, ctx: Context) -> list[Change]:
    """The new-allocator-up step's removal of that taint, from the node's live taints (or,
    in a plan, from the taints the merge step will have set)."""
    out: list[Change] = []
    path = ("spec", "taints")
    for name in nodes:
        ref = _node(name)
        live = field_value(view.get("Node", "", name), path)
        held = ctx.recorded.get(Change("merge", ref, path, None, None).key)
        if list(live or []) == untainted(live) and held is not None and held.step == "merge":
            live = held.after  # planned, not made yet
        after = untainted(live)
        if list(live or []) != after:
            out.append(
                Change(
                    "new-allocator-up",
                    ref,
                    path,
                    live,
                    after or None,
                    "the old allocator is gone: let the new one's agents start",
                    undo=False,
                )
            )
    return out


def _consumers(view: View, options: Options, ctx: Context) -> tuple[Consumer, ...]:
    apps = (
        ObjectRef.from_json(ctx.facts["apps"])
        if ctx.facts.get("apps")
        else resolve_apps(view, options)
    )
    found, _loose = discover(view, apps=apps)
    if ctx.consumers is None:
        return tuple(found)
    return merge_consumers(ctx.consumers, found)


def plan_step(
    name: str, view: View, options: Options, ctx: Context, *, target: Target | None = None
) -> Step:
    """One step from a fresh view and the journal (see docs/runbook.md for each); ``target``
    is the merge target read from ``--repo``, for the preflight's note."""
    f = ctx.facts or facts(view, options)
    consumers = _consumers(view, options, ctx)
    to_dra = options.to == "dra"
    nodes = tuple(str(n) for n in f.get("gpuNodes") or ())
    if name == "preflight":
        note = preflight_note(options, target, barrier(view, options, target))
        for warning in preflight_warnings(view, options, target, consumers):
            note += f"; warning: {warning}"
        return Step(name, note=note)
    if name == "snapshot":
        return Step(name, note="record the GPU state: allocatable, ResourceSlices, GPU pods")
    if name == "suspend":
        changes = suspend_changes(consumers, view, ctx)
        return Step(
            name,
            tuple(changes),
            note=f"{len(consumers)} GPU consumers",
            skip="" if changes or ctx.recorded else "no GPU consumer to stop",
        )
    if name == "drained":
        drained: list[Action] = [
            Wait(name, NoGpuPods(), "the ledgers free a device only when its pod is gone")
        ]
        if f.get("gpuCluster") and not to_dra:
            # The GPUCluster's uninstall: workloads and user ResourceClaims go first
            # (field-2026.md §3); claims from pod templates went with the pods.
            namespaces = tuple(sorted({c.workload.namespace for c in consumers}))
            for claim in user_claims(view, namespaces):
                meta = claim["metadata"]
                drained.append(
                    Delete(
                        name,
                        ObjectRef(
                            api_version_of("ResourceClaim"),
                            "ResourceClaim",
                            str(meta.get("namespace")),
                            str(meta["name"]),
                        ),
                        "the GPUCluster is removed only without user ResourceClaims",
                    )
                )
            if namespaces:
                drained.append(
                    Wait(name, UserClaimsGone(namespaces), "no claim holds a GPUCluster device")
                )
        return Step(name, tuple(drained))
    if name == "merge":
        before = str(f.get("revisionBefore") or "")
        moved = SourceRevision(options.source, before, options.revision)
        taint = barrier_of(f, options.to)
        actions: list[Action] = []
        if taint is not None:
            actions += hold_changes(nodes, view, ctx, to=options.to, taint=taint)
        if options.merge:
            actions.append(Command(name, options.merge, "the merge"))
        actions.append(Wait(name, moved, "the source fetched the merged revision"))
        actions += _reconcile([options.source], view, ctx, step=name, source=None)
        apps = ObjectRef.from_json(f["apps"]) if f.get("apps") else resolve_apps(view, options)
        actions += _reconcile([apps], view, ctx, step=name, source=options.source)
        return Step(name, tuple(actions), note=barrier_note(taint, options.to))
    if name == "old-allocator-gone":
        if to_dra:
            waits = [
                Wait(
                    name,
                    Allocatable(GPU_RESOURCE, tuple((n, 0) for n in nodes)),
                    "the kubelet keeps the key at 0; never wait for it to disappear",
                ),
            ]
            plugins = tuple(str(d) for d in f.get("devicePlugins") or ())
            if plugins:
                waits.append(Wait(name, DaemonSetsGone(plugins), "the device plugin is gone"))
            if f.get("gpuCluster"):
                waits.append(
                    Wait(
                        name,
                        OperatorCrsGone(
                            "ClusterPolicy", "the operator refuses a GPUCluster beside it"
                        ),
                        "the ClusterPolicy stack is gone before the GPUCluster's",
                    )
                )
            return Step(name, tuple(waits))
        gone: list[Action] = []
        if f.get("gpuCluster"):
            gone.append(
                Wait(
                    name,
                    OperatorCrsGone("GPUCluster", "its finalizer goes once its operands are gone"),
                    "the chart's pre-delete hook waits on the same finalizer",
                )
            )
        gone.append(Wait(name, DriverGone(), "no card is held through DRA"))
        return Step(name, tuple(gone))
    if name == "new-allocator-up":
        shares = int(f.get("shares") or 1)
        released: list[Action] = list(release_changes(nodes, view, ctx))
        if to_dra:
            return Step(
                name,
                (*released, Wait(name, PoolsUp(nodes, shares), "the DRA driver publishes")),
            )
        expected = f.get("expectedAllocatable") or {}
        want = tuple((n, int(expected.get(n, shares))) for n in nodes)
        return Step(
            name,
            (
                *released,
                Wait(
                    name,
                    Allocatable(GPU_RESOURCE, want),
                    "the device plugin is registered on every GPU node",
                ),
            ),
        )
    if name in ("resume", "resume-bridged"):
        bridged = name == "resume-bridged"
        mine = tuple(c for c in consumers if (c.bridged and to_dra) == bridged)
        if not mine:
            return Step(name, skip="no bridged consumer" if bridged else "no consumer")
        ks, hr, workloads = _restores(mine, view, ctx, step=name)
        actions = []
        actions += _beside(
            ks,
            _reconcile(
                [c.obj for c in ks if c.after is None],
                view,
                ctx,
                step=name,
                source=options.source,
            ),
        )
        actions += _beside(
            hr,
            _reconcile([c.obj for c in hr if c.after is None], view, ctx, step=name, source=None),
        )
        actions += workloads
        replicas = {
            ch.obj.key: ch.before
            for ch in ctx.recorded.values()
            if ch.step == "suspend" and ch.path == ("spec", "replicas")
        }
        running, idle = resume_waits(mine, replicas)
        if running:
            actions.append(
                Wait(
                    name,
                    WorkloadsUp(running, shared=to_dra, bridged=bridged),
                    "the consumers run again on the new allocator",
                )
            )
        note = ""
        if idle:
            note = "not waited for, no pod Running before the move: " + ", ".join(
                c.workload.key for c in idle
            )
        return Step(name, tuple(actions), note=note)
    if name == "verdict":
        # The new allocator's agents (dcgm-exporter, the validator) may still be starting
        # when the consumers run again; the verdict judges the stack once it has settled.
        return Step(
            name,
            (
                Wait(name, AgentsSettled(), "judge the GPU stack once it stopped starting"),
                Wait(
                    name,
                    DependentsRetried(),
                    "judge Flux once what waited on a recreated dependency has retried",
                ),
            ),
            note="snapshot the GPU state again and judge it against the first",
        )
    raise ValueError(f"unknown step {name!r}")


def resume_waits(
    consumers: Sequence[Consumer], replicas: Mapping[str, Any]
) -> tuple[tuple[tuple[ObjectRef, int], ...], tuple[Consumer, ...]]:
    """(workload, pods to see Running) for each consumer to wait for, and the consumers not
    waited for.

    A consumer waits for its recorded replica count (``replicas``, keyed by the scaled
    object's key; 1 when the run did not scale it), but never for more pods than it had
    Running before the move: one that was Pending then (no room, a missing volume) would
    hold the step until its timeout for a state it never had. A consumer with no Running pod
    is not waited for at all; the step's note reports it. Consumers without a recorded
    Running count (older journals) wait for their replicas, as before.
    """
    waits: list[tuple[ObjectRef, int]] = []
    idle: list[Consumer] = []
    for c in consumers:
        value = replicas.get(c.top.key, 1)
        want = value if isinstance(value, int) else 1
        if c.running is not None:
            if c.running == 0:
                idle.append(c)
                continue
            want = min(want, c.running)
        waits.append((c.workload, want))
    return tuple(waits), tuple(idle)


def predicted(ctx: Context, step: Step) -> Context:
    """The context after ``step`` ran as planned (for ``--plan``): its changes recorded."""
    recorded = dict(ctx.recorded)
    for ch in step.changes:
        recorded.setdefault(ch.key, ch)
    return Context(ctx.consumers, recorded, ctx.facts, ctx.token)


def plan(
    view: View, options: Options, ctx: Context | None = None, *, target: Target | None = None
) -> Plan:
    """The whole run from one view (``--plan``): later steps see earlier changes as made;
    ``target`` is the merge target read from ``--repo`` (None: not given)."""
    ctx = ctx or Context()
    f = dict(ctx.facts) or facts(view, options, target=target)
    ctx = Context(ctx.consumers, ctx.recorded, f, ctx.token)
    apps = ObjectRef.from_json(f["apps"])
    found, loose = discover(view, apps=apps)
    consumers = merge_consumers(ctx.consumers or (), found)
    ctx = Context(consumers, ctx.recorded, f, ctx.token)
    steps: list[Step] = []
    for name in STEPS:
        step = plan_step(name, view, options, ctx, target=target)
        steps.append(step)
        ctx = predicted(ctx, step)
    refusals = preflight(view, options, consumers=consumers, loose=tuple(loose), target=target)
    return Plan(options, tuple(steps), consumers, tuple(refusals), f)
