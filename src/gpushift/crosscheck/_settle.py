"""Let the controllers and kube-scheduler act, one pod at a time in simulate's queue order,
until nothing changes.

Every pending pod waits behind the scheduling gate :data:`._load.GATE`. :func:`release` lifts
it from one pod at a time, in simulate's queue order, and waits for kube-scheduler's attempt
(the pod bound, or its PodScheduled condition Unschedulable) before the next: kube-scheduler's
queue then meets the pods in the order simulate's does, instead of the order its informer
listed them (namespace and name). A preemption is followed to its end before the next pod:
the victims are deleted (see :func:`finish_terminating`), the preemptor binds, and a victim's
controller makes a new pod, which takes the victim's turn, as simulate puts the victim back in
its queue.

The one kubelet duty that matters here is played too: a pod with a ``deletionTimestamp`` (a
preemption victim) is deleted with grace period 0, as a kubelet would once its containers
stopped.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import lightkube

from gpushift import kube
from gpushift._errors import InputError
from gpushift._obj import Obj
from gpushift.crosscheck._load import GATE, Key, Plan, Slot, Written

_POD = kube.ResourceRef.named("Pod")
_CLAIM = kube.ResourceRef.named("ResourceClaim")
_RS = kube.ResourceRef.named("ReplicaSet")
_EVENT = kube.ResourceRef.named("Event")
#: kube-scheduler's PodScheduled reasons for a finished attempt that did not bind.
_FAILED = ("Unschedulable", "SchedulerError")


class SettleTimeoutError(Exception):
    """The cluster did not settle before the deadline; the message says what was left."""


@dataclass(slots=True)
class Settled:
    """What happened while the pods were released."""

    #: Pods the scheduler preempted, as last seen before they were deleted.
    victims: list[Obj] = field(default_factory=list)
    #: Turns for which no pod was there to release (a controller made fewer pods).
    skipped: list[Slot] = field(default_factory=list)
    #: Seconds: controllers' pods and claims, releasing, the final quiet period.
    timings: dict[str, float] = field(default_factory=dict)


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def gated(pod: Mapping[str, Any]) -> bool:
    """Whether the pod still carries :data:`GATE`."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == GATE for g in gates)


def scheduled_condition(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's PodScheduled condition."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c  # type: ignore[no-any-return]
    return None


def attempted(pod: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler has finished an attempt at this (ungated) pod: it is bound, or
    its PodScheduled condition says it did not fit."""
    # kubernetes pkg/scheduler schedule_one.go handleSchedulingFailure: the condition's
    # reason is Unschedulable for a fit error, SchedulerError for anything else.
    if (pod.get("spec") or {}).get("nodeName"):
        return True
    cond = scheduled_condition(pod)
    return cond is not None and cond.get("reason") in _FAILED


def nominated(pod: Mapping[str, Any]) -> str:
    """The node an unbound pod is nominated to (a preemption under way), else ``""``."""
    if (pod.get("spec") or {}).get("nodeName"):
        return ""
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def pinned_node(pod: Mapping[str, Any]) -> str:
    """The node a DaemonSet pod's required affinity pins (``metadata.name In [node]``)."""
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            values = f.get("values") or []
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return ""


def missing_claims(pod: Mapping[str, Any], claims: Iterable[str]) -> list[str]:
    """Claims the pod names that do not exist (``claims``: ``namespace/name`` of those that
    do): kube-scheduler's DynamicResources PreEnqueue keeps such a pod out of its queue
    without writing any condition."""
    # kubernetes pkg/scheduler/framework/plugins/dynamicresources PreEnqueue
    # (foreachPodResourceClaim): a claim named in the spec or in resourceClaimStatuses.
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    have = set(claims)
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out = []
    for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = pc.get("resourceClaimName") or statuses.get(pc.get("name"))
        if not name or f"{ns}/{name}" not in have:
            out.append(str(pc.get("name")))
    return out


#: dynamicresources PostFilter: it changed a claim, whose update requeues the pod.
_POSTFILTER_CHANGES = ("deallocation of ResourceClaim completed", "deletion of ResourceClaim")


def _retried_after_postfilter(pod: Mapping[str, Any]) -> bool:
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    message = str((scheduled_condition(pod) or {}).get("message") or "")
    return any(text in message for text in _POSTFILTER_CHANGES)


class Driver:
    """Releases pods and follows preemptions on one cluster (see the module docstring)."""

    def __init__(
        self,
        client: kube.Kube,
        the_plan: Plan,
        written: Written,
        *,
        deadline: float,
        poll: float = 0.02,
        quiet: float = 2.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.plan = the_plan
        self.written = written
        self.deadline = deadline
        self.poll = poll
        self.quiet = quiet
        self.progress = progress or (lambda _line: None)
        self.settled = Settled()
        self.released: dict[str, tuple[int, str, int]] = {}  # pod uid -> its queue key
        self.by_uid: dict[str, Key] = {uid: k for k, uid in written.uids.items()}
        self._owner_of: dict[str, str] = {}  # ReplicaSet uid -> its controller's uid
        self._seen_victims: set[str] = set()

    # --- reading ---------------------------------------------------------------------------

    def pods(self) -> list[Obj]:
        """Every pod of the input's namespaces."""
        return self.client.list(_POD)

    def claim_names(self) -> set[str]:
        """``namespace/name`` of every ResourceClaim."""
        out = set()
        for c in self.client.list(_CLAIM):
            meta = c.get("metadata") or {}
            out.add(f"{meta.get('namespace')}/{meta.get('name')}")
        return out

    def chain(self, pod: Mapping[str, Any]) -> list[str]:
        """The uids of the pod's controller and of that controller's controller."""
        out = []
        for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
            if not ref.get("controller"):
                continue
            uid = str(ref.get("uid"))
            out.append(uid)
            if ref.get("kind") == "ReplicaSet":
                if uid not in self._owner_of:
                    self._read_replicasets()
                if self._owner_of.get(uid):
                    out.append(self._owner_of[uid])
        return out

    def _read_replicasets(self) -> None:
        for rs in self.client.list(_RS):
            meta = rs.get("metadata") or {}
            owners = [r for r in meta.get("ownerReferences") or [] if r.get("controller")]
            self._owner_of[str(meta.get("uid"))] = str(owners[0]["uid"]) if owners else ""

    def workload_of(self, pod: Mapping[str, Any]) -> Key | None:
        """The written workload the pod belongs to (the topmost of its controllers)."""
        found = None
        for uid in self.chain(pod):
            if uid in self.by_uid:
                found = self.by_uid[uid]
        return found

    def _expired(self) -> bool:
        return time.monotonic() > self.deadline

    # --- the controllers' part ---------------------------------------------------------------

    def wait_for_controllers(self) -> None:
        """Wait until every workload has the pods simulate expands it into and every pod its
        claims from templates (kube-controller-manager's ReplicaSet, StatefulSet, DaemonSet and
        resourceclaim controllers), so that kube-scheduler starts with all of them."""
        begin = time.monotonic()
        want: dict[tuple[Key, str], int] = {}
        for slot in self.plan.queue:
            if slot.workload is not None:
                k = (slot.workload, slot.node)
                want[k] = want.get(k, 0) + 1
        while True:
            pods = self.pods()
            have: dict[tuple[Key, str], int] = {}
            for p in pods:
                w = self.workload_of(p)
                if w is not None:
                    k = (w, pinned_node(p) if w[0] == "DaemonSet" else "")
                    have[k] = have.get(k, 0) + 1
            claims = self.claim_names()
            short = [k for k, n in want.items() if have.get(k, 0) < n]
            unclaimed = [
                pod_key(p)
                for p in pods
                if any(
                    pc.get("resourceClaimTemplateName")
                    for pc in p["spec"].get("resourceClaims") or []
                )
                and self._template_claims_missing(p, claims)
            ]
            if not short and not unclaimed:
                break
            if short:
                self._refused_by_admission()
            if time.monotonic() - begin > 30 or self._expired():
                # A workload the controllers will not fill (a bad template): go on without it;
                # its turns are skipped and reported.
                break
            time.sleep(0.05)
        self.settled.timings["controllers"] = time.monotonic() - begin

    def _refused_by_admission(self) -> None:
        """Raise InputError when a controller could not create a pod (a FailedCreate event:
        kube-apiserver refused the workload's pod template)."""
        for e in self.client.list(_EVENT):
            if e.get("reason") == "FailedCreate":
                what = e.get("involvedObject") or {}
                raise InputError(
                    f"the {what.get('kind')} controller cannot create its pods: {e.get('message')}",
                    obj=f"{what.get('kind')}/{what.get('namespace')}/{what.get('name')}",
                )

    def _template_claims_missing(self, pod: Mapping[str, Any], claims: set[str]) -> bool:
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace")
        templates = self.plan_templates()
        statuses = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for pc in (pod.get("spec") or {}).get("resourceClaims") or []:
            t = pc.get("resourceClaimTemplateName")
            if not t or f"{ns}/{t}" not in templates:
                continue  # no template: the controller can make no claim
            name = statuses.get(pc.get("name"))
            if not name or f"{ns}/{name}" not in claims:
                return True
        return False

    def plan_templates(self) -> set[str]:
        """``namespace/name`` of the ResourceClaimTemplates written."""
        return {
            f"{t['metadata'].get('namespace') or 'default'}/{t['metadata']['name']}"
            for t in self.plan.templates
        }

    # --- the scheduler's part ----------------------------------------------------------------

    def release_all(self) -> None:
        """Release every slot of the plan's queue in order (see the module docstring)."""
        begin = time.monotonic()
        heap: list[tuple[tuple[int, str, int], int, Slot]] = []
        seq = 0
        for slot in self.plan.queue:
            heap.append((slot.key, seq, slot))
            seq += 1
        heapq.heapify(heap)
        while heap:
            if self._expired():
                raise SettleTimeoutError(f"{len(heap)} pods not yet released")
            _, _, slot = heapq.heappop(heap)
            if slot.gated:
                continue  # gates of its own: kube-scheduler never tries it
            pod = self._find(slot)
            if pod is None:
                self.settled.skipped.append(slot)
                continue
            self._ungate(pod, slot.key)
            done = self._wait_attempt(pod)
            while done is not None and _retried_after_postfilter(done):
                # DynamicResources' PostFilter freed a claim: the claim's update requeues the
                # pod, and simulate tries it again at once.
                done = self._wait_attempt(done, after=scheduled_condition(done))
            if done is not None and nominated(done):
                self.progress(f"{pod_key(done)} preempts on {nominated(done)}")
                for victim, key in self._follow_preemption(done):
                    w = self.workload_of(victim)
                    if w is None:
                        continue  # a bare pod: nothing makes it again
                    node = pinned_node(victim) if w[0] == "DaemonSet" else ""
                    heapq.heappush(heap, (key, seq, Slot(key, workload=w, node=node)))
                    seq += 1
        self.settled.timings["release"] = time.monotonic() - begin

    def _find(self, slot: Slot) -> Obj | None:
        """The gated pod that takes ``slot``'s turn (a workload's may still be on its way)."""
        wait_until = time.monotonic() + 10.0
        while True:
            for p in self.pods():
                if not gated(p) or p["metadata"]["uid"] in self.released:
                    continue
                if (p.get("metadata") or {}).get("deletionTimestamp"):
                    continue
                if slot.pod:
                    if pod_key(p) == slot.pod:
                        return p
                    continue
                if self.workload_of(p) != slot.workload:
                    continue
                if slot.node and pinned_node(p) != slot.node:
                    continue
                return p
            if slot.pod or time.monotonic() > wait_until or self._expired():
                return None
            time.sleep(0.05)

    def _ungate(self, pod: Obj, key: tuple[int, str, int]) -> None:
        meta = pod["metadata"]
        rest = [g for g in pod["spec"].get("schedulingGates") or [] if g.get("name") != GATE]
        self.released[str(meta["uid"])] = key
        self.client.patch(
            _POD,
            name=meta["name"],
            namespace=meta["namespace"],
            patch={"spec": {"schedulingGates": rest}},
        )

    def _get(self, pod: Mapping[str, Any]) -> Obj | None:
        meta = pod.get("metadata") or {}
        try:
            found = self.client.get(_POD, name=meta["name"], namespace=meta["namespace"])
        except kube.KubeError as err:
            if err.code == 404:
                return None
            raise
        if found["metadata"]["uid"] != meta.get("uid"):
            return None
        return found

    def _wait_attempt(
        self, pod: Obj, *, timeout: float = 30.0, after: Mapping[str, Any] | None = None
    ) -> Obj | None:
        """The pod once kube-scheduler has tried it (None when it is gone); with ``after``,
        once it has tried it again (its PodScheduled condition is no longer ``after``). A pod
        whose claims do not exist is not tried at all (PreEnqueue): it is given up on after a
        second."""
        begin = time.monotonic()
        checked_claims = False
        while True:
            now = self._get(pod)
            if now is None:
                return now
            if attempted(now) and (
                after is None or now["spec"].get("nodeName") or scheduled_condition(now) != after
            ):
                return now
            waited = time.monotonic() - begin
            if waited > 1.0 and not checked_claims:
                checked_claims = True
                if missing_claims(now, self.claim_names()):
                    return now
            if waited > timeout or self._expired():
                return now
            time.sleep(self.poll)

    def finish_terminating(self, pods: Iterable[Obj]) -> int:
        """Delete, with grace period 0, every pod that has a deletionTimestamp (a kubelet
        would, once its containers stopped); each is kept in ``victims``. Returns how many."""
        # kubernetes pkg/kubelet status_manager.go: the kubelet deletes a terminated pod with
        # grace period 0 once its containers are gone.
        n = 0
        for p in pods:
            meta = p.get("metadata") or {}
            if not meta.get("deletionTimestamp"):
                continue
            n += 1
            uid = str(meta.get("uid"))
            if uid not in self._seen_victims:
                self._seen_victims.add(uid)
                self.settled.victims.append(p)
            try:
                self.client.client.delete(
                    _POD.model, meta["name"], namespace=meta["namespace"], grace_period=0
                )
            except lightkube.ApiError as err:
                if err.status.code != 404:  # gone already
                    raise
        return n

    def _follow_preemption(self, preemptor: Obj) -> list[tuple[Obj, tuple[int, str, int]]]:
        """Follow one preemption to its end: victims deleted, the preemptor bound (or failed
        again without a nomination). Returns the victims with their queue keys."""
        before = len(self.settled.victims)
        while True:
            if self._expired():
                raise SettleTimeoutError(f"preemption by {pod_key(preemptor)} did not finish")
            self.finish_terminating(self.pods())
            now = self._get(preemptor)
            if now is None or (now["spec"].get("nodeName")) or not nominated(now):
                break
            time.sleep(self.poll * 2)
        out = []
        for v in self.settled.victims[before:]:
            uid = str(v["metadata"]["uid"])
            key = self.released.get(uid) or self.plan.keys.get(pod_key(v))
            if key is not None:
                out.append((v, key))
        return out

    # --- the end -----------------------------------------------------------------------------

    def settle(self) -> None:
        """Wait until nothing changes: no pod terminating, none nominated and unbound, no claim
        reserved for or owned by a pod that is gone, and no resourceVersion of a pod or claim
        changed for ``quiet`` seconds. Gated pods left over (a workload's extra pod) are
        released on the way.

        Raises:
            SettleTimeoutError: at the deadline.
        """
        begin = time.monotonic()
        last: object = None
        since = time.monotonic()
        while True:
            pods = self.pods()
            claims = self.client.list(_CLAIM)
            busy: list[str] = []
            if self.finish_terminating(pods):
                busy.append("pods terminating")
            for p in pods:
                if gated(p) and p["metadata"]["uid"] not in self.released:
                    self._ungate(p, (0, "", 0))
                    busy.append(f"{pod_key(p)} released")
                elif nominated(p):
                    busy.append(f"{pod_key(p)} nominated to {nominated(p)}")
            uids = {str(p["metadata"]["uid"]) for p in pods}
            for c in claims:
                meta = c.get("metadata") or {}
                owners = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Pod"]
                gone = [r for r in owners if str(r.get("uid")) not in uids]
                stale = [
                    r
                    for r in (c.get("status") or {}).get("reservedFor") or []
                    if r.get("resource") == "pods" and str(r.get("uid")) not in uids
                ]
                if gone or stale:
                    busy.append(f"claim {meta.get('namespace')}/{meta.get('name')} of a pod gone")
            state = sorted(
                (str(o["metadata"]["uid"]), str(o["metadata"].get("resourceVersion")))
                for o in [*pods, *claims]
            )
            now = time.monotonic()
            if state != last or busy:
                last, since = state, now
            elif now - since >= self.quiet:
                break
            if self._expired():
                what = "; ".join(busy[:5]) or "objects still changing"
                raise SettleTimeoutError(f"the cluster did not settle: {what}")
            time.sleep(0.1)
        self.settled.timings["settle"] = time.monotonic() - begin
