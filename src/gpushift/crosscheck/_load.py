"""simulate's input as API objects, and writing them to a control plane in dependency order.

:func:`plan` is pure: it turns the objects simulate reads into bodies kube-apiserver accepts
(what changes, and why, is listed on :class:`Plan`) and works out the order in which simulate's
queue takes the pending pods. :func:`write` creates them: Namespaces (and their ``default``
ServiceAccount), PriorityClasses, DeviceClasses, Nodes and their status, ResourceSlices,
ResourceClaimTemplates, workloads, Pods (bound ones with their status), ResourceClaims and
their status (``reservedFor`` names the pods' new uids).
"""

from __future__ import annotations

import copy
import datetime
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpushift import _yaml, engine, kube
from gpushift._errors import InputError
from gpushift._obj import Obj

#: The scheduling gate every pending pod is created with; :mod:`._settle` removes it from one
#: pod at a time, in simulate's queue order.
GATE = "gpushift.dev/crosscheck-queue"
#: The image of containers that name none (simulate does not need one; kube-apiserver does).
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: Prefix of the PriorityClasses made for pods that give ``spec.priority`` as a number.
PRIORITY_PREFIX = "gpushift-priority-"
WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")
#: The kinds written, in the order :func:`write` creates them.
KINDS = (
    "Namespace",
    "PriorityClass",
    "DeviceClass",
    "Node",
    "ResourceSlice",
    "ResourceClaimTemplate",
    *WORKLOAD_KINDS,
    "Pod",
    "ResourceClaim",
)
#: Server-set metadata dropped from every input object.
_SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)

Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


def key_of(obj: Mapping[str, Any]) -> Key:
    """``(kind, namespace, name)``; namespaced kinds default to ``default``."""
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind") or "")
    namespaced = kind in ("Pod", "ResourceClaim", "ResourceClaimTemplate", *WORKLOAD_KINDS)
    ns = str(meta.get("namespace") or "default") if namespaced else ""
    return kind, ns, str(meta.get("name") or "")


def read_objects(paths: Iterable[str | os.PathLike[str]]) -> list[Obj]:
    """The objects of the kinds written (:data:`KINDS`) in the files under ``paths``, in the
    order simulate reads them (files sorted, documents in order, List items in order).

    Raises:
        InputError: a file cannot be read or parsed.
    """
    out: list[Obj] = []
    for path in _yaml.find_files(paths):
        for doc in _yaml.expand_lists(_yaml.read_file(path)):
            if isinstance(doc.data, dict) and doc.data.get("kind") in KINDS:
                out.append(doc.data)
    return out


@dataclass(frozen=True, slots=True)
class Slot:
    """One pod's turn in simulate's queue: ``key`` is simulate's ``(-priority,
    creationTimestamp, input position)``. ``pod`` is a pod of the input (``namespace/name``);
    otherwise ``workload`` names the controller whose pod takes the turn and ``node`` the node
    a DaemonSet pod is pinned to. A ``gated`` pod has scheduling gates of its own: it is
    waited for, never released (kube-scheduler does not try it, nor does simulate)."""

    key: tuple[int, str, int]
    pod: str = ""
    workload: Key | None = None
    node: str = ""
    gated: bool = False


@dataclass(slots=True)
class Plan:
    """What :func:`write` creates, kind by kind, and the queue order of the pending pods.

    Changed from the input, because kube-apiserver would refuse it or a controller act on it:

    * server-set metadata (uid, resourceVersion, creationTimestamp, …) is dropped; owner
      references and ``reservedFor`` are pointed at the new uids, and dropped when the object
      they name is not in the input (the garbage collector would delete the dependent);
    * Namespaces used but not given are made; Nodes get ``capacity`` (default: allocatable),
      ``pods: 110`` when their allocatable has no pods figure (kube-scheduler reads none as 0,
      simulate as no limit) and a Ready condition; containers without an image get
      :data:`PAUSE_IMAGE`;
    * every ``runtimeClassName`` a pod names gets a RuntimeClass of that name and handler,
      without overhead or scheduling (simulate reads no RuntimeClass; the RuntimeClass
      admission plugin refuses a pod naming one that does not exist);
    * a pod's numeric ``spec.priority`` becomes a PriorityClass ``gpushift-priority-<value>``
      (the Priority admission plugin sets the number from the class, and refuses one given);
    * a workload whose pods (or ReplicaSet) are in the input is not written: simulate takes
      the pods it has as they are, and its controller would reconcile them to its template;
    * a bound pod's claims that are not in the input (from a template, or the
      extended-resource claim of a bridged request) are written as simulate allocates them
      when it reads the pod (``implied``): kube-scheduler never allocates for a bound pod;
    * pending pods, and the pod templates of workloads, carry the scheduling gate
      :data:`GATE`, unless they have gates of their own (then nothing lifts them);
      StatefulSets use ``podManagementPolicy: Parallel`` (no kubelet makes a pod Ready, so
      OrderedReady would create only the first); a workload without a selector gets one from
      its template's labels.
    """

    namespaces: list[Obj] = field(default_factory=list)
    runtime_classes: list[Obj] = field(default_factory=list)
    priority_classes: list[Obj] = field(default_factory=list)
    device_classes: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    slices: list[Obj] = field(default_factory=list)
    templates: list[Obj] = field(default_factory=list)
    workloads: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    claims: list[Obj] = field(default_factory=list)
    #: Pending pods' turns, in simulate's order.
    queue: list[Slot] = field(default_factory=list)
    #: simulate's queue key of every pod of the input (``namespace/name``), bound ones too:
    #: a preempted pod's controller makes a new pod, which takes the victim's key.
    keys: dict[str, tuple[int, str, int]] = field(default_factory=dict)
    #: Workloads whose pods the input already holds (simulate expands the others).
    parented: set[Key] = field(default_factory=set)

    def objects(self) -> list[Obj]:
        """Every body, in creation order."""
        return [
            *self.namespaces,
            *self.runtime_classes,
            *self.priority_classes,
            *self.device_classes,
            *self.nodes,
            *self.slices,
            *self.templates,
            *self.workloads,
            *self.pods,
            *self.claims,
        ]


def _meta(obj: Obj) -> Obj:
    meta = obj.setdefault("metadata", {})
    assert isinstance(meta, dict)
    return meta


def _clean(obj: Mapping[str, Any]) -> Obj:
    """A deep copy without server-set metadata."""
    out = copy.deepcopy(dict(obj))
    meta = _meta(out)
    for k in _SERVER_META:
        meta.pop(k, None)
    if meta.get("name"):
        meta.pop("generateName", None)
    return out


def _priority(
    spec: Mapping[str, Any], classes: Mapping[str, int], default: int
) -> tuple[int, bool]:
    """simulate's priority of a pod spec, and whether the spec gives it as a number."""
    # As the engine's scheduler reads it (spec.priority, the class, the global default).
    if isinstance(spec.get("priority"), int) and not isinstance(spec.get("priority"), bool):
        return int(spec["priority"]), True
    name = spec.get("priorityClassName")
    if name and name in classes:
        return classes[str(name)], False
    return default, False


def _replicas(obj: Mapping[str, Any]) -> int:
    raw = (obj.get("spec") or {}).get("replicas", 1)
    return raw if isinstance(raw, int) and raw >= 0 else 1


def _parents(obj: Mapping[str, Any]) -> list[object]:
    meta = obj.get("metadata") or {}
    ns = str(meta.get("namespace") or "default")
    out: list[object] = []
    for ref in meta.get("ownerReferences") or []:
        if isinstance(ref, dict):
            out.append((str(ref.get("kind")), ns, str(ref.get("name"))))
            if ref.get("uid"):
                out.append(str(ref["uid"]))
    return out


def _daemon_nodes(ds: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    # The engine's reading of pkg/controller/daemon NodeShouldRunDaemonPod: selector, affinity
    # and NoSchedule/NoExecute taints.
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    tolerations = [*(spec.get("tolerations") or []), *engine.DAEMONSET_TOLERATIONS]
    out = []
    for n in nodes:
        meta = n.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not engine.node_matches_pod(spec, node_name=name, labels=meta.get("labels") or {}):
            continue
        if engine.untolerated_taint((n.get("spec") or {}).get("taints") or [], tolerations):
            continue
        out.append(name)
    return out


def _fix_pod_spec(
    spec: Obj, *, classes: dict[str, int], made: list[Obj], runtimes: set[str], gate: bool
) -> None:
    """Images, the numeric priority as a class, runtime classes used, and the gate (see
    :class:`Plan`)."""
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            if isinstance(c, dict) and not c.get("image"):
                c["image"] = PAUSE_IMAGE
    value = spec.get("priority")
    if isinstance(value, int) and not isinstance(value, bool):
        name = f"{PRIORITY_PREFIX}{'minus-' if value < 0 else ''}{abs(value)}"
        if name not in classes:
            classes[name] = value
            made.append(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": value,
                }
            )
        spec["priorityClassName"] = name
        del spec["priority"]
    runtime = spec.get("runtimeClassName")
    if runtime:
        runtimes.add(str(runtime))
    if gate:
        gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GATE]
        spec["schedulingGates"] = [*gates, {"name": GATE}]


def implied(objects: Sequence[Mapping[str, Any]]) -> tuple[list[Obj], dict[str, Obj]]:
    """The claims simulate allocates for the input's bound pods when it reads them, and those
    pods' claim statuses (``namespace/name`` → status), where the input does not hold them.

    simulate schedules the input's bound pods alone (no pending pod, no workload) and the
    claims it made for them are kept: a bound pod on a real cluster has them already.
    """
    bound = [o for o in objects if o.get("kind") == "Pod" and (o.get("spec") or {}).get("nodeName")]
    if not bound:
        return [], {}
    rest = [o for o in objects if o.get("kind") not in ("Pod", *WORKLOAD_KINDS)]
    alone: list[Obj] = [copy.deepcopy(dict(o)) for o in [*rest, *bound]]
    sim = engine.simulate(engine.from_objects(alone))
    given = {key_of(c) for c in objects if c.get("kind") == "ResourceClaim"}
    claims = [
        _clean(c)
        for c in sim.outcome.claims
        if key_of(c) not in given and (c.get("status") or {}).get("allocation")
    ]
    statuses: dict[str, Obj] = {}
    for p in sim.outcome.pods:
        status = p.obj.get("status") or {}
        keep = {
            k: copy.deepcopy(status[k])
            for k in ("resourceClaimStatuses", "extendedResourceClaimStatus")
            if status.get(k)
        }
        if keep:
            statuses[p.key] = keep
    return claims, statuses


def plan(objects: Sequence[Mapping[str, Any]]) -> Plan:
    """The bodies to write for ``objects`` (as simulate reads them) and the queue order.

    Raises:
        InputError: a pod names a PriorityClass that is not in the input (kube-apiserver's
            Priority admission refuses such a pod; simulate gives it the default priority).
    """
    out = Plan()
    by_kind: dict[str, list[Mapping[str, Any]]] = {k: [] for k in KINDS}
    for obj in objects:
        by_kind[str(obj.get("kind"))].append(obj)
    classes: dict[str, int] = {}
    default = 0
    for pc in by_kind["PriorityClass"]:
        name = str((pc.get("metadata") or {}).get("name"))
        classes[name] = int(pc.get("value") or 0)
        if pc.get("globalDefault"):
            default = classes[name]
    given_classes = set(classes)

    # Namespaces: the given ones, then every other one an object uses, in order of use.
    namespaces: dict[str, Obj] = {}
    for ns in by_kind["Namespace"]:
        body = _clean(ns)
        body.pop("status", None)
        body.pop("spec", None)
        namespaces[str(_meta(body).get("name"))] = body
    for obj in objects:
        k = key_of(obj)
        if k[1] and k[1] not in namespaces:
            namespaces[k[1]] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": k[1]}}
    out.namespaces = list(namespaces.values())
    out.device_classes = [_clean(c) for c in by_kind["DeviceClass"]]
    for n in by_kind["Node"]:
        body = _clean(n)
        status = body.setdefault("status", {})
        alloc = dict(status.get("allocatable") or {})
        # kube-scheduler reads a missing pods figure as 0, simulate as no limit: the
        # kubelet's default --max-pods.
        alloc.setdefault("pods", "110")
        status["allocatable"] = alloc
        status["capacity"] = {**alloc, **(status.get("capacity") or {})}
        status["conditions"] = ready_conditions()
        out.nodes.append(body)
    out.slices = [_clean(s) for s in by_kind["ResourceSlice"]]
    out.templates = [_clean(t) for t in by_kind["ResourceClaimTemplate"]]

    made: list[Obj] = []
    runtimes: set[str] = set()
    # Workloads whose pods are in the input (the engine expands only the others).
    parented = {p for obj in [*by_kind["Pod"], *_workloads(by_kind)] for p in _parents(obj)}
    for w in _workloads(by_kind):
        meta = w.get("metadata") or {}
        keys: list[object] = [key_of(w)]
        if meta.get("uid"):
            keys.append(str(meta["uid"]))
        if any(k in parented for k in keys):
            # Its children stand in the input as they are; written, its controller would
            # reconcile them to its own template (a Deployment makes its own ReplicaSet).
            out.parented.add(key_of(w))
            continue
        body = _clean(w)
        body.pop("status", None)
        spec = body.setdefault("spec", {})
        template = spec.setdefault("template", {})
        tspec = template.setdefault("spec", {})
        gate = not tspec.get("schedulingGates")
        _fix_pod_spec(tspec, classes=classes, made=made, runtimes=runtimes, gate=gate)
        labels = (template.get("metadata") or {}).get("labels") or {}
        if body["kind"] != "DaemonSet" or "selector" not in spec:
            spec.setdefault("selector", {"matchLabels": dict(labels)})
        if body["kind"] == "StatefulSet":
            spec["podManagementPolicy"] = "Parallel"
        out.workloads.append(body)

    order = 0
    for p in by_kind["Pod"]:
        spec = p.get("spec") or {}
        self_ns, name = key_of(p)[1], key_of(p)[2]
        _check_class(p, spec, given_classes)
        prio, _ = _priority(spec, classes, default)
        created = str((p.get("metadata") or {}).get("creationTimestamp") or "")
        key = (-prio, created, order)
        order += 1
        out.keys[f"{self_ns}/{name}"] = key
        body = _clean(p)
        bound = bool(spec.get("nodeName"))
        own_gates = bool(spec.get("schedulingGates"))
        _fix_pod_spec(
            body.setdefault("spec", {}),
            classes=classes,
            made=made,
            runtimes=runtimes,
            gate=not bound and not own_gates,
        )
        out.pods.append(body)
        if not bound:
            out.queue.append(Slot(key, pod=f"{self_ns}/{name}", gated=own_gates))
    for w in _workloads(by_kind):
        k = key_of(w)
        if k in out.parented:
            continue
        tspec = ((w.get("spec") or {}).get("template") or {}).get("spec") or {}
        _check_class(w, tspec, given_classes)
        prio, _ = _priority(tspec, classes, default)
        created = str((w.get("metadata") or {}).get("creationTimestamp") or "")
        gated = bool(tspec.get("schedulingGates"))
        if k[0] == "DaemonSet":
            for node in _daemon_nodes(w, by_kind["Node"]):
                out.queue.append(Slot((-prio, created, order), workload=k, node=node, gated=gated))
                order += 1
        else:
            for _ in range(_replicas(w)):
                out.queue.append(Slot((-prio, created, order), workload=k, gated=gated))
                order += 1
    out.queue.sort(key=lambda s: s.key)
    out.priority_classes = [*(_clean(pc) for pc in by_kind["PriorityClass"]), *made]
    claims, statuses = implied(objects)
    out.claims = [*(_clean(c) for c in by_kind["ResourceClaim"]), *claims]
    for pod in out.pods:
        if (pod.get("spec") or {}).get("nodeName"):
            k = key_of(pod)
            extra = statuses.get(f"{k[1]}/{k[2]}")
            if extra:
                pod["status"] = {**(pod.get("status") or {}), **extra}
    out.runtime_classes = [
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": name},
            "handler": name,
        }
        for name in sorted(runtimes)
    ]
    return out


def _workloads(by_kind: Mapping[str, list[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    # The engine expands workloads in the order it read them, whatever their kind.
    return [w for k in WORKLOAD_KINDS for w in by_kind[k]]


def _check_class(obj: Mapping[str, Any], spec: Mapping[str, Any], given: set[str]) -> None:
    name = spec.get("priorityClassName")
    if name and name not in given and not isinstance(spec.get("priority"), int):
        raise InputError(
            f'priorityClassName "{name}" is not in the input: kube-apiserver refuses the pod '
            "(no PriorityClass with that name)",
            obj=_yaml.describe(obj),
        )


def ready_conditions(now: datetime.datetime | None = None) -> list[Obj]:
    """A kubelet's conditions of a healthy node (Ready, no pressure)."""
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out: list[Obj] = []
    for kind, status, reason in (
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ):
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
        )
    return out


# --- writing -----------------------------------------------------------------------------


@dataclass(slots=True)
class Written:
    """What :func:`write` made: the new uid of every object, by input key and by input uid."""

    uids: dict[Key, str] = field(default_factory=dict)
    by_old_uid: dict[str, Key] = field(default_factory=dict)


def _ref(kind: str) -> kube.ResourceRef:
    return kube.ResourceRef.named(kind)


def _refused(obj: Mapping[str, Any], err: kube.KubeError) -> InputError:
    return InputError(f"kube-apiserver refused it: {err}", obj=_yaml.describe(obj))


def _write_status(client: kube.Kube, ref: kube.ResourceRef, obj: Obj, status: Obj) -> None:
    """Patch ``obj``'s status subresource; a refusal is bad input naming the object."""
    meta = _meta(obj)
    namespace = (meta.get("namespace") or "default") if ref.namespaced else None
    try:
        client.patch(
            ref,
            name=meta["name"],
            namespace=namespace,
            patch={"status": status},
            subresource="status",
        )
    except kube.KubeError as err:
        raise _refused(obj, err) from None


def _owners(obj: Obj, written: Written) -> None:
    """Point owner references at the new uids; drop those naming objects not written."""
    meta = _meta(obj)
    refs = meta.get("ownerReferences")
    if not refs:
        return
    ns = str(meta.get("namespace") or "default")
    kept = []
    for ref in refs:
        kind = str(ref.get("kind"))
        scoped = "" if kind in ("Node", "Namespace", "DeviceClass", "PriorityClass") else ns
        target = written.by_old_uid.get(str(ref.get("uid") or "")) or (
            kind,
            scoped,
            str(ref.get("name")),
        )
        uid = written.uids.get(target)
        if uid is not None:
            kept.append({**ref, "uid": uid, "name": target[2]})
    if kept:
        meta["ownerReferences"] = kept
    else:
        meta.pop("ownerReferences", None)


def write(client: kube.Kube, the_plan: Plan, originals: Sequence[Mapping[str, Any]]) -> Written:
    """Create everything in ``the_plan`` on an empty cluster whose controller manager and
    scheduler are not running yet (a controller would act on objects half written).

    ``originals`` are the input objects, for their old uids. Raises InputError (naming the
    object) when kube-apiserver refuses one; KubeError for anything else.
    """
    written = Written()
    for obj in originals:
        uid = (obj.get("metadata") or {}).get("uid")
        if uid:
            written.by_old_uid[str(uid)] = key_of(obj)

    def create(body: Obj) -> Obj:
        kind = str(body["kind"])
        ref = _ref(kind)
        _owners(body, written)
        payload = {k: v for k, v in body.items() if k != "status"}
        try:
            made = client.create(ref, payload, namespace=_meta(body).get("namespace"))
        except kube.KubeError as err:
            if err.code in (400, 403, 404, 409, 422):
                raise _refused(body, err) from None
            raise
        written.uids[key_of(body)] = str(made["metadata"]["uid"])
        return made

    ns_ref = _ref("Namespace")
    for ns in the_plan.namespaces:
        name = _meta(ns)["name"]
        try:
            create(ns)
        except InputError:
            # Kept from an earlier run on the same control plane: take it with these labels.
            made = client.get(ns_ref, name=name)
            written.uids[key_of(ns)] = str(made["metadata"]["uid"])
            labels = _meta(ns).get("labels")
            client.patch(ns_ref, name=name, patch={"metadata": {"labels": labels or None}})
        sa = {"metadata": {"name": "default", "namespace": name}}
        try:
            client.create(_ref("ServiceAccount"), sa, namespace=name)
        except kube.KubeError as err:
            if err.code != 409:
                raise
    for obj in [*the_plan.runtime_classes, *the_plan.priority_classes, *the_plan.device_classes]:
        create(obj)
    node_ref = _ref("Node")
    for node in the_plan.nodes:
        create(node)
        name = _meta(node)["name"]
        _write_status(client, node_ref, node, node["status"])
        # The TaintNodesByCondition admission plugin taints every new node not-ready; the node
        # lifecycle controller (off here) would lift it once the node reports Ready.
        taints = (node.get("spec") or {}).get("taints") or None
        client.patch(node_ref, name=name, patch={"spec": {"taints": taints}})
    for obj in [*the_plan.slices, *the_plan.templates, *the_plan.workloads]:
        create(obj)
    pod_ref = _ref("Pod")
    statuses: list[tuple[Obj, Obj]] = []
    for pod in the_plan.pods:
        create(pod)
        status = dict(pod.get("status") or {})
        if (pod.get("spec") or {}).get("nodeName"):
            status["phase"] = "Running"
            status["conditions"] = [
                {"type": t, "status": "True"}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ]
        keep = ("phase", "conditions", "resourceClaimStatuses", "extendedResourceClaimStatus")
        status = {k: v for k, v in status.items() if k in keep}
        if status:
            statuses.append((pod, status))
    claim_ref = _ref("ResourceClaim")
    for claim in the_plan.claims:
        create(claim)
        status = copy.deepcopy(claim.get("status") or {})
        reserved = []
        for r in status.get("reservedFor") or []:
            uid = written.uids.get(("Pod", _meta(claim).get("namespace") or "default", r["name"]))
            if uid is not None:
                reserved.append({**r, "uid": uid})
        if reserved:
            status["reservedFor"] = reserved
        else:
            status.pop("reservedFor", None)
        status = {k: v for k, v in status.items() if k in ("allocation", "reservedFor")}
        if status:
            _write_status(client, claim_ref, claim, status)
    for pod, status in statuses:
        _write_status(client, pod_ref, pod, status)
    return written
