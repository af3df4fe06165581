"""What the runbook waits for, as values: each condition names the kinds it reads and judges a
:class:`View`, returning whether it holds and what it is waiting for (the progress line)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpushift import flux, verdict
from gpushift._errors import InputError
from gpushift._obj import Obj
from gpushift._quantity import value as quantity_value
from gpushift.runbook._discover import (
    active,
    gpu_pods,
    pod_claims,
    pod_key,
)
from gpushift.runbook._model import DRA_DRIVER, Consumer, ObjectRef
from gpushift.runbook._pending import pending_causes
from gpushift.runbook._view import View

Result = tuple[bool, str]


def _few(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f", … ({len(items)} in all)" if len(items) > limit else "")


def _count(value: Any) -> int:
    if value is None:
        return 0
    try:
        return quantity_value(str(value))
    except (ValueError, TypeError, ArithmeticError, InputError):
        return 0


def allocatable(node: Mapping[str, Any], resource: str) -> int:
    """``status.allocatable[resource]`` as a count (0 when absent)."""
    return _count(((node.get("status") or {}).get("allocatable") or {}).get(resource))


@dataclass(frozen=True, slots=True)
class NoGpuPods:
    """No consumer pod holds a GPU any more, Terminating ones included."""

    kinds = ("Pod", "ResourceClaim")

    def describe(self) -> str:
        """For the plan."""
        return "no GPU consumer pod exists (Terminating ones included)"

    def check(self, view: View) -> Result:
        """Holds once every consumer pod is gone."""
        left = [pod_key(p) for p in gpu_pods(view)]
        if not left:
            return True, "no GPU pod left"
        return False, f"no GPU pod: {_few(left)}"


@dataclass(frozen=True, slots=True)
class SourceRevision:
    """The source's ``status.artifact.revision`` moved from ``before`` (or equals ``want``)."""

    source: ObjectRef
    before: str
    want: str | None = None
    kinds = ("GitRepository", "OCIRepository")

    def describe(self) -> str:
        """For the plan."""
        if self.want:
            return f"{self.source.key} at revision {self.want}"
        return f"{self.source.key} at a revision other than {self.before}"

    def check(self, view: View) -> Result:
        """Holds once the source shows the merged revision."""
        obj = view.find(self.source)
        now = flux.revision(obj) if obj else ""
        done = now == self.want if self.want else bool(now) and now != self.before
        if done:
            return True, f"{self.source.key} at {now}"
        return False, f"the merge: {self.source.key} at {now or 'no revision'}"


@dataclass(frozen=True, slots=True)
class Reconciled:
    """Every object handled its reconcile request (``lastHandledReconcileAt`` equals the
    token), at its current generation and Ready; Kustomizations at the source's revision."""

    targets: tuple[tuple[ObjectRef, str], ...]
    source: ObjectRef | None = None
    kinds = ("GitRepository", "OCIRepository", "Kustomization", "HelmRelease")

    def describe(self) -> str:
        """For the plan."""
        names = ", ".join(t.key for t, _ in self.targets)
        return f"reconciled and Ready: {names}"

    def check(self, view: View) -> Result:
        """Holds once every target is reconciled."""
        waiting: list[str] = []
        revision = None
        if self.source is not None:
            src = view.find(self.source)
            revision = flux.revision(src) if src else None
        for ref, token in self.targets:
            obj = view.find(ref)
            if obj is None:
                waiting.append(f"{ref.key} missing")
                continue
            at = revision if ref.kind == "Kustomization" and revision else None
            if ref.kind in ("GitRepository", "OCIRepository"):
                at = None
            ok, why = flux.handled(obj, token, at_revision=at)
            if not ok:
                waiting.append(f"{ref.key}: {why}")
        if not waiting:
            return True, "reconciled"
        return False, f"reconcile: {_few(waiting, 3)}"


@dataclass(frozen=True, slots=True)
class Allocatable:
    """``status.allocatable[resource]`` equals the wanted count on each node."""

    resource: str
    want: tuple[tuple[str, int], ...]
    kinds = ("Node",)

    def describe(self) -> str:
        """For the plan."""
        return f"allocatable {self.resource}: " + ", ".join(f"{n} {v}" for n, v in self.want)

    def check(self, view: View) -> Result:
        """Holds once every node reads its count (a missing key reads 0)."""
        have: list[str] = []
        ok = True
        for node, want in self.want:
            obj = view.get("Node", "", node)
            got = allocatable(obj, self.resource) if obj else 0
            ok = ok and obj is not None and got == want
            have.append(f"{node} {got}")
        return ok, f"allocatable {self.resource}: " + ", ".join(have)


@dataclass(frozen=True, slots=True)
class DaemonSetsGone:
    """The named DaemonSets and their pods are gone."""

    daemonsets: tuple[str, ...]  # namespace/name
    kinds = ("DaemonSet", "Pod")

    def describe(self) -> str:
        """For the plan."""
        return "gone, with their pods: " + ", ".join(f"DaemonSet/{d}" for d in self.daemonsets)

    def check(self, view: View) -> Result:
        """Holds once none of them (or their pods) exists."""
        left: list[str] = []
        for key in self.daemonsets:
            ns, _, name = key.partition("/")
            if view.get("DaemonSet", ns, name) is not None:
                left.append(f"DaemonSet/{key}")
        for pod in view.all("Pod"):
            meta = pod.get("metadata") or {}
            for owner in meta.get("ownerReferences") or []:
                if (
                    owner.get("kind") == "DaemonSet"
                    and f"{meta.get('namespace')}/{owner.get('name')}" in self.daemonsets
                ):
                    left.append(f"pod {pod_key(pod)}")
        if not left:
            return True, "device plugin gone"
        return False, f"device plugin gone: {_few(left)}"


@dataclass(frozen=True, slots=True)
class DriverGone:
    """No allocated ``gpu.nvidia.com`` claim remains and the driver's ResourceSlices are gone."""

    driver: str = DRA_DRIVER
    kinds = ("ResourceClaim", "ResourceSlice")

    def describe(self) -> str:
        """For the plan."""
        return f"no allocated {self.driver} claim and no {self.driver} ResourceSlice"

    def check(self, view: View) -> Result:
        """Holds once both are gone."""
        claims = [
            f"{c['metadata'].get('namespace')}/{c['metadata']['name']}"
            for c in view.all("ResourceClaim")
            if any(
                r.get("driver") == self.driver
                for r in (
                    ((c.get("status") or {}).get("allocation") or {}).get("devices") or {}
                ).get("results")
                or []
            )
        ]
        slices = [
            s["metadata"]["name"]
            for s in view.all("ResourceSlice")
            if (s.get("spec") or {}).get("driver") == self.driver
        ]
        if not claims and not slices:
            return True, "DRA driver gone"
        parts = []
        if claims:
            parts.append(f"allocated claims {_few(claims, 3)}")
        if slices:
            parts.append(f"slices {_few(slices, 3)}")
        return False, "DRA driver gone: " + "; ".join(parts)


@dataclass(frozen=True, slots=True)
class OperatorCrsGone:
    """No gpu-operator custom resource of ``kind`` is left, one being deleted included (a
    GPUCluster stays until the operator has removed its operands and then its finalizer)."""

    kind: str  # ClusterPolicy or GPUCluster
    why: str
    kinds = ("ClusterPolicy", "GPUCluster")

    def describe(self) -> str:
        """For the plan."""
        return f"no {self.kind} ({self.why})"

    def check(self, view: View) -> Result:
        """Holds once none exists."""
        left = [
            str(o["metadata"]["name"])
            + (" (deleting)" if o["metadata"].get("deletionTimestamp") else "")
            for o in view.all(self.kind)
        ]
        if not left:
            return True, f"no {self.kind}"
        return False, f"{self.kind} gone: {_few(left, 3)}"


def user_claims(view: View, namespaces: tuple[str, ...], driver: str = DRA_DRIVER) -> list[Obj]:
    """The ResourceClaims in ``namespaces`` no pod owns (made by a person or a tree, not from a
    pod's template) that ask for or hold ``driver``'s devices."""
    out = []
    for c in view.all("ResourceClaim"):
        meta = c.get("metadata") or {}
        if str(meta.get("namespace")) not in namespaces:
            continue
        if any(o.get("kind") == "Pod" for o in meta.get("ownerReferences") or []):
            continue
        spec = c.get("spec") or {}
        requests = (spec.get("devices") or {}).get("requests") or []
        classes = [
            str((r.get("exactly") or r).get("deviceClassName") or "")
            for r in requests
            if isinstance(r, Mapping)
        ]
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        ) or []
        if any(r.get("driver") == driver for r in results) or any(
            n.endswith(driver) or "nvidia" in n for n in classes
        ):
            out.append(c)
    return out


@dataclass(frozen=True, slots=True)
class UserClaimsGone:
    """No user ResourceClaim of the driver is left in the consumers' namespaces."""

    namespaces: tuple[str, ...]
    driver: str = DRA_DRIVER
    kinds = ("ResourceClaim",)

    def describe(self) -> str:
        """For the plan."""
        return f"no user {self.driver} ResourceClaim in {', '.join(self.namespaces)}"

    def check(self, view: View) -> Result:
        """Holds once they are gone."""
        left = [
            f"{c['metadata'].get('namespace')}/{c['metadata']['name']}"
            for c in user_claims(view, self.namespaces, self.driver)
        ]
        if not left:
            return True, "no user ResourceClaim"
        return False, f"user ResourceClaims gone: {_few(left, 3)}"


def _pools(view: View, driver: str) -> dict[str, list[Obj]]:
    """The slices of each node's pool at its highest generation."""
    by_pool: dict[str, list[Obj]] = {}
    for s in view.all("ResourceSlice"):
        spec = s.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        by_pool.setdefault(str((spec.get("pool") or {}).get("name")), []).append(s)
    out: dict[str, list[Obj]] = {}
    for name, slices in by_pool.items():
        top = max(
            int(((s.get("spec") or {}).get("pool") or {}).get("generation") or 0) for s in slices
        )
        out[name] = [
            s
            for s in slices
            if int(((s.get("spec") or {}).get("pool") or {}).get("generation") or 0) == top
        ]
    return out


@dataclass(frozen=True, slots=True)
class PoolsUp:
    """One complete ``gpu.nvidia.com`` pool per GPU node, each device
    ``allowMultipleAllocations`` with a ``shares`` capacity of ``shares``."""

    nodes: tuple[str, ...]
    shares: int
    driver: str = DRA_DRIVER
    kinds = ("ResourceSlice",)

    def describe(self) -> str:
        """For the plan."""
        return (
            f"one complete {self.driver} pool on each of {', '.join(self.nodes)}, every device "
            f"allowMultipleAllocations with shares {self.shares}"
        )

    def check(self, view: View) -> Result:
        """Holds once every node's pool is published and complete with the shares."""
        pools = _pools(view, self.driver)
        state: list[str] = []
        ok = True
        for node in self.nodes:
            slices = next(
                (
                    p
                    for p in pools.values()
                    if any((x.get("spec") or {}).get("nodeName") == node for x in p)
                ),
                [],
            )
            if not slices:
                ok = False
                state.append(f"{node} no pool")
                continue
            count = int(
                ((slices[0].get("spec") or {}).get("pool") or {}).get("resourceSliceCount") or 1
            )
            if len(slices) < count:
                ok = False
                state.append(f"{node} {len(slices)}/{count} slices")
                continue
            devices = [d for s in slices for d in (s.get("spec") or {}).get("devices") or []]
            wrong = [
                str(d.get("name"))
                for d in devices
                if not d.get("allowMultipleAllocations")
                or _count(((d.get("capacity") or {}).get("shares") or {}).get("value"))
                != self.shares
            ]
            if wrong or not devices:
                ok = False
                state.append(f"{node} devices without shares {self.shares}: {_few(wrong, 2)}")
                continue
            state.append(f"{node} {len(devices)} GPU")
        return ok, "ResourceSlices: " + ", ".join(state)


def _claim_state(view: View, pod: Mapping[str, Any], *, shared: bool) -> str | None:
    """Why a Running pod's claims are not yet what the move wants (None: fine)."""
    ns = str((pod.get("metadata") or {}).get("namespace") or "")
    for name in pod_claims(pod):
        claim = view.get("ResourceClaim", ns, name)
        results = (
            (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}
        ).get("results")
        if not results:
            return f"claim {ns}/{name} not allocated"
        if shared and not all(r.get("shareID") for r in results if r.get("driver") == DRA_DRIVER):
            return f"claim {ns}/{name} has no shareID"
    return None


def _pending_reason(pod: Mapping[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "")
    return ""


#: What to do when a bridged consumer cannot get its nvidia.com/gpu from DRA.
BRIDGE_REMEDIES = (
    "raise the shares per GPU (--expect-shares after changing the driver's consumableShares), "
    "or give the model its own node with the anti-affinity it carries"
)


@dataclass(frozen=True, slots=True)
class WorkloadsUp:
    """Each consumer is back: its replicas Running (a DaemonSet's pods on every node it
    selects), and under DRA every claim of its pods allocated with a shareID."""

    consumers: tuple[tuple[ObjectRef, int], ...]  # workload, replicas to see Running
    shared: bool
    bridged: bool = False
    kinds = (
        "Pod",
        "ReplicaSet",
        "ResourceClaim",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "Node",
    )

    def describe(self) -> str:
        """For the plan."""
        what = ", ".join(f"{w.key} {n}" for w, n in self.consumers)
        extra = " with claims allocated and a shareID" if self.shared else ""
        return f"Running{extra}: {what}"

    def _pods(self, view: View, workload: ObjectRef) -> list[Obj]:
        out = []
        rs_names = set()
        if workload.kind == "Deployment":
            for rs in view.all("ReplicaSet"):
                meta = rs.get("metadata") or {}
                if meta.get("namespace") == workload.namespace and any(
                    o.get("kind") == "Deployment" and o.get("name") == workload.name
                    for o in meta.get("ownerReferences") or []
                ):
                    rs_names.add(meta.get("name"))
        for pod in view.all("Pod"):
            meta = pod.get("metadata") or {}
            if meta.get("namespace") != workload.namespace or meta.get("deletionTimestamp"):
                continue
            for owner in meta.get("ownerReferences") or []:
                if (owner.get("kind") == workload.kind and owner.get("name") == workload.name) or (
                    owner.get("kind") == "ReplicaSet" and owner.get("name") in rs_names
                ):
                    out.append(pod)
        return out

    def check(self, view: View) -> Result:
        """Holds once every consumer runs what it ran before."""
        waiting: list[str] = []
        for workload, want in self.consumers:
            if workload.kind in ("CronJob", "Job"):
                continue
            pods = [p for p in self._pods(view, workload) if active(p)]
            if workload.kind == "DaemonSet":
                obj = view.find(workload)
                want = int(((obj or {}).get("status") or {}).get("desiredNumberScheduled") or 0)
            running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            if len(running) < want:
                pending = [p for p in pods if p not in running]
                why = _pending_reason(pending[0]) if pending else ""
                note = f" ({why})" if why else ""
                if self.bridged and "Insufficient nvidia.com/gpu" in why:
                    note = f" ({why}: {BRIDGE_REMEDIES})"
                elif pending:
                    # The cause on this cluster and its fix, as a rehearsal's notes give them.
                    causes = pending_causes(
                        pending[0],
                        nodes=view.all("Node"),
                        daemonsets=view.all("DaemonSet"),
                        device_plugin=not self.shared,
                    )
                    note = f" ({why} — {causes})" if causes else note
                waiting.append(f"{workload.key} {len(running)}/{want} Running{note}")
                continue
            for pod in running:
                bad = _claim_state(view, pod, shared=self.shared)
                if bad:
                    waiting.append(f"{workload.key}: {bad}")
                    break
        if not waiting:
            return True, "consumers Running"
        return False, "consumers: " + _few(waiting, 3)


def recorded_replicas(consumer: Consumer, before: Mapping[str, Any]) -> int:
    """The replica count a consumer had (from the journaled ``before`` of its scale change
    keyed by object key); 1 when it was never scaled by the run."""
    value = before.get(consumer.top.key)
    return int(value) if isinstance(value, int) else 1


#: Container waiting reasons that do not pass by themselves: the kubelet backs off and retries,
#: but the pod will not become Ready until someone acts (kubelet's own reasons,
#: pkg/kubelet/images and pkg/kubelet/kuberuntime).
STUCK_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreStartHookError",
        "PostStartHookError",
    }
)


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _waiting(container_status: Mapping[str, Any]) -> str:
    """Why a container is waiting ("": it is not)."""
    return str(((container_status.get("state") or {}).get("waiting") or {}).get("reason") or "")


def _stuck(pod: Mapping[str, Any]) -> str:
    """Why a pod that is not Ready will stay so without help ("": it is still starting)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return str(status.get("phase"))
    unschedulable = _pending_reason(pod)
    if unschedulable:
        return unschedulable
    for c in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        if _waiting(c) in STUCK_REASONS:
            return _waiting(c)
        if int(c.get("restartCount") or 0) > 0 and not c.get("ready"):
            return f"{c.get('restartCount')} restarts"
    return ""


@dataclass(frozen=True, slots=True)
class AgentsSettled:
    """The NVIDIA agents (device plugin, DRA kubelet plugin and controller, GFD,
    dcgm-exporter, validator) are no longer starting: every agent DaemonSet has a pod of its
    current generation for each node it selects, and every agent pod is Ready or stuck in a
    way that will not pass by itself (crash loop, image pull, unschedulable), which the
    verdict then reports. Terminating pods are not waited for; the verdict ignores them."""

    kinds = ("DaemonSet", "Pod")

    def describe(self) -> str:
        """For the plan."""
        return "the GPU agents settled: each agent DaemonSet rolled out, each pod Ready or stuck"

    def check(self, view: View) -> Result:
        """Holds once nothing of the GPU stack is still starting."""
        waiting: list[str] = []
        # Pods by owning DaemonSet, counted from the Pod watch: the DaemonSet's status and
        # its new pods arrive on two watches, and either may be seen first.
        owned: dict[tuple[str, str], int] = {}
        for pod in view.all("Pod"):
            meta = pod.get("metadata") or {}
            if meta.get("deletionTimestamp"):
                continue
            for ref in meta.get("ownerReferences") or []:
                if ref.get("kind") == "DaemonSet":
                    owner = (str(meta.get("namespace")), str(ref.get("name")))
                    owned[owner] = owned.get(owner, 0) + 1
        for ds in view.all("DaemonSet"):
            spec = (ds.get("spec") or {}).get("template", {}).get("spec") or {}
            if verdict.component(spec) is None:
                continue
            meta, st = ds.get("metadata") or {}, ds.get("status") or {}
            key = f"DaemonSet/{meta.get('namespace')}/{meta.get('name')}"
            desired = int(st.get("desiredNumberScheduled") or 0)
            pods = owned.get((str(meta.get("namespace")), str(meta.get("name"))), 0)
            if int(st.get("observedGeneration") or 0) < int(meta.get("generation") or 1):
                waiting.append(f"{key} rolling out")
            elif int(st.get("updatedNumberScheduled") or 0) < desired:
                waiting.append(f"{key} {st.get('updatedNumberScheduled') or 0}/{desired} updated")
            elif pods < desired:
                waiting.append(f"{key} {pods}/{desired} pods")
        for pod in view.all("Pod"):
            if (pod.get("metadata") or {}).get("deletionTimestamp") or _ready(pod):
                continue
            found = verdict.component(pod.get("spec") or {})
            if found is None or _stuck(pod):
                continue
            status = pod.get("status") or {}
            why = next(
                (w for c in status.get("containerStatuses") or [] if (w := _waiting(c))),
                str(status.get("phase") or "Pending"),
            )
            waiting.append(f"{found[0]} {pod_key(pod)} {why}")
        if not waiting:
            return True, "GPU agents settled"
        return False, "GPU agents settled: " + _few(waiting, 3)


#: kustomize-controller's and helm-controller's ``--requeue-dependency`` default: how soon an
#: object that waited on a dependency tries again.
REQUEUE_DEPENDENCY = "30s"


@dataclass(frozen=True, slots=True)
class DependentsRetried:
    """No Flux object is still waiting out its dependency retry: none is not Ready with
    reason ``DependencyNotReady`` while every object its ``dependsOn`` names is Ready.

    The merge recreates objects others depend on (the device plugin's Kustomization on the
    way back); a dependent that was reconciled before them stays ``DependencyNotReady`` until
    its controller retries, after ``--requeue-dependency`` (30 s by default). Judged before
    that, it reads as broken. A dependent whose dependency is itself not Ready, missing or
    suspended is not waited for: the verdict reports it as it is."""

    kinds = ("Kustomization", "HelmRelease")

    def describe(self) -> str:
        """For the plan."""
        return (
            "Flux objects that waited on a dependency now Ready have retried "
            f"(--requeue-dependency, {REQUEUE_DEPENDENCY} by default)"
        )

    def check(self, view: View) -> Result:
        """Holds once no object waits on a retry its dependencies no longer block."""
        waiting: list[str] = []
        for kind in self.kinds:
            for obj in view.all(kind):
                if _retrying(view, kind, obj):
                    meta = obj.get("metadata") or {}
                    waiting.append(f"{kind}/{meta.get('namespace')}/{meta.get('name')}")
        if not waiting:
            return True, "no Flux object waits on a dependency retry"
        return False, "the dependency retry of " + _few(waiting, 3)


def _retrying(view: View, kind: str, obj: Obj) -> bool:
    """Whether ``obj`` is not Ready only until its next dependency retry."""
    spec = obj.get("spec") or {}
    if spec.get("suspend") is True:
        return False
    cond, _current = flux.ready_condition(obj)
    if cond is None or cond.get("status") != "False" or cond.get("reason") != "DependencyNotReady":
        return False
    meta = obj.get("metadata") or {}
    own_ns = str(meta.get("namespace") or "")
    deps = [d for d in spec.get("dependsOn") or [] if isinstance(d, Mapping) and d.get("name")]
    if not deps:
        return False
    for dep in deps:
        found = view.get(kind, str(dep.get("namespace") or own_ns), str(dep["name"]))
        if found is None or (found.get("spec") or {}).get("suspend") is True:
            return False
        if not flux.object_ready(found)[0]:
            return False
    return True


Condition = (
    NoGpuPods
    | SourceRevision
    | Reconciled
    | Allocatable
    | DaemonSetsGone
    | DriverGone
    | OperatorCrsGone
    | UserClaimsGone
    | PoolsUp
    | WorkloadsUp
    | AgentsSettled
    | DependentsRetried
)
