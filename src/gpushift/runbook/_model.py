"""The cutover's values: objects, changes, waits, steps and the plan they make.

Everything here is frozen data; the planner builds it from observations and the executor
carries it out. A change names one field of one object with its value before and after, and
the JSON merge patch that sets it (and the one that sets it back).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpushift._kinds import lookup
from gpushift._obj import Obj
from gpushift.kube import ResourceRef

Direction = Literal["dra", "device-plugin"]

#: The steps in order; the same strings in the journal, the events and ``rehearse --kill-at``.
STEPS: tuple[str, ...] = (
    "preflight",
    "snapshot",
    "suspend",
    "drained",
    "merge",
    "old-allocator-gone",
    "new-allocator-up",
    "resume",
    "resume-bridged",
    "verdict",
)

#: The DRA driver's name, its DeviceClass and the device plugin's resource.
DRA_DRIVER = "gpu.nvidia.com"
GPU_RESOURCE = "nvidia.com/gpu"
#: The label a drained DaemonSet's pods must match: no node carries it.
PARKED_LABEL = "gpushift.dev/cutover-parked"
#: The taint that holds every GPU node between the merge and the moment the old allocator is
#: gone: neither the new allocator's agent (the preflight checks that it does not tolerate it)
#: nor any other pod that does not starts there, so the node never advertises through both
#: ledgers (docs/runbook.md, the merge step).
CUTOVER_TAINT = "gpushift.dev/cutover"
#: The barrier's key when the new allocator's agents tolerate ``CUTOVER_TAINT`` by its key
#: (see :mod:`gpushift.runbook._barrier`).
BARRIER_TAINT = "gpushift.dev/cutover-barrier"


def resource_ref(api_version: str, kind: str) -> ResourceRef:
    """The ResourceRef of an apiVersion and kind: from the kinds table, else by the API's
    plural convention (operator resources gpushift does not know)."""
    found = lookup(api_version, kind)
    if found is not None:
        return ResourceRef.of(found)
    group, _, version = api_version.rpartition("/")
    return ResourceRef(group, version, kind, kind.lower() + "s", True)


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    """One object: ``Kind/namespace/name`` in messages and the journal."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped)."""
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"

    @property
    def ref(self) -> ResourceRef:
        """The resource type, for the client."""
        return resource_ref(self.api_version, self.kind)

    def to_json(self) -> Obj:
        """As stored in the journal."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ObjectRef:
        """From :meth:`to_json`."""
        return cls(
            str(data["apiVersion"]),
            str(data["kind"]),
            str(data.get("namespace") or ""),
            str(data["name"]),
        )

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The reference of an object body."""
        meta = obj.get("metadata") or {}
        return cls(
            str(obj.get("apiVersion") or ""),
            str(obj.get("kind") or ""),
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
        )


def show_path(path: tuple[str, ...]) -> str:
    """``spec.template.spec.nodeSelector["gpushift.dev/x"]``: dots between plain keys,
    brackets around keys that hold dots or slashes."""
    out = ""
    for seg in path:
        if any(c in seg for c in "./") or not seg:
            out += f"[{json.dumps(seg)}]"
        else:
            out += ("." if out else "") + seg
    return out


def field_value(obj: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``obj`` (None when absent)."""
    cur: Any = obj
    for seg in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(seg)
    return cur


def merge_patch(path: tuple[str, ...], value: Any) -> Obj:
    """The JSON merge patch (RFC 7386) setting ``path`` to ``value`` (None removes it)."""
    out: Any = value
    for seg in reversed(path):
        out = {seg: out}
    result: Obj = out
    return result


@dataclass(frozen=True, slots=True)
class Change:
    """Set one field of one object, as a JSON merge patch through field manager gpushift.

    ``before`` is the value recorded before the run changed anything (None: absent);
    ``undo`` says whether ``--abort`` sets it back (a reconcile token is not undone).
    """

    step: str
    obj: ObjectRef
    path: tuple[str, ...]
    before: Any
    after: Any
    why: str = ""
    undo: bool = True

    @property
    def field(self) -> str:
        """The field as shown: ``spec.suspend``."""
        return show_path(self.path)

    @property
    def key(self) -> str:
        """``Kind/ns/name spec.suspend``: identifies the change in the journal."""
        return f"{self.obj.key} {self.field}"

    @property
    def patch(self) -> Obj:
        """The merge patch that makes it."""
        return merge_patch(self.path, self.after)

    @property
    def undo_patch(self) -> Obj:
        """The merge patch that sets ``before`` back."""
        return merge_patch(self.path, self.before)

    def to_json(self) -> Obj:
        """As stored in the journal (state is added by the journal)."""
        return {
            "step": self.step,
            "object": self.obj.key,
            "ref": self.obj.to_json(),
            "field": self.field,
            "path": list(self.path),
            "before": self.before,
            "after": self.after,
            "why": self.why,
            "undo": self.undo,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        """From :meth:`to_json`."""
        return cls(
            step=str(data["step"]),
            obj=ObjectRef.from_json(data["ref"]),
            path=tuple(str(p) for p in data["path"]),
            before=data.get("before"),
            after=data.get("after"),
            why=str(data.get("why") or ""),
            undo=bool(data.get("undo", True)),
        )


@dataclass(frozen=True, slots=True)
class Command:
    """A shell command the step runs (the user's merge), skipped once ``done_when`` holds."""

    step: str
    shell: str
    why: str = ""


@dataclass(frozen=True, slots=True)
class Wait:
    """Block until ``condition`` holds (see :mod:`gpushift.runbook._conditions`)."""

    step: str
    condition: Any  # a Condition; typed loosely to keep this module free of the evaluators
    why: str = ""


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete one object (already gone is done); not undone by a rollback."""

    step: str
    obj: ObjectRef
    why: str = ""


Action = Change | Command | Wait | Delete


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the runbook: its actions in order, and a note for the plan."""

    name: str
    actions: tuple[Action, ...] = ()
    note: str = ""
    skip: str = ""  # why the step has nothing to do (shown in the plan and the events)

    @property
    def changes(self) -> tuple[Change, ...]:
        """The changes among the actions."""
        return tuple(a for a in self.actions if isinstance(a, Change))

    @property
    def waits(self) -> tuple[Wait, ...]:
        """The waits among the actions."""
        return tuple(a for a in self.actions if isinstance(a, Wait))


@dataclass(frozen=True, slots=True)
class Consumer:
    """A GPU consumer: the workload to stop, what holds its replicas, its Flux owners.

    ``scale`` is the object and field holding the replica count (the workload itself, or the
    operator resource that owns it); ``flux`` the owning HelmRelease/Kustomization, innermost
    first; ``bridged`` a consumer that can only ask for ``nvidia.com/gpu`` (served under DRA
    through extended-resource bridging, resumed last). ``running`` is how many of its pods
    were Running when it was found, before the move (None: not recorded, as in journals
    written before it was); the move waits for no more than that many again.
    """

    workload: ObjectRef
    pods: tuple[str, ...] = ()
    owner: ObjectRef | None = None
    flux: tuple[ObjectRef, ...] = ()
    bridged: bool = False
    resources: tuple[str, ...] = ()
    running: int | None = None

    @property
    def top(self) -> ObjectRef:
        """The object that is scaled: the operator resource if there is one."""
        return self.owner or self.workload

    def to_json(self) -> Obj:
        """As stored in the journal."""
        return {
            "workload": self.workload.to_json(),
            "owner": self.owner.to_json() if self.owner else None,
            "flux": [f.to_json() for f in self.flux],
            "pods": list(self.pods),
            "bridged": self.bridged,
            "resources": list(self.resources),
            "running": self.running,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Consumer:
        """From :meth:`to_json`."""
        owner = data.get("owner")
        return cls(
            workload=ObjectRef.from_json(data["workload"]),
            owner=ObjectRef.from_json(owner) if owner else None,
            flux=tuple(ObjectRef.from_json(f) for f in data.get("flux") or ()),
            pods=tuple(str(p) for p in data.get("pods") or ()),
            bridged=bool(data.get("bridged")),
            resources=tuple(str(r) for r in data.get("resources") or ()),
            running=int(data["running"]) if data.get("running") is not None else None,
        )


@dataclass(frozen=True, slots=True)
class Options:
    """What the operator asked for.

    ``repo`` (with ``root`` below it) is the user's repository and ``target`` what the merge
    switches to, a directory or a git revision of ``repo`` (None: ``repo`` as checked out);
    with ``repo`` the preflight checks that tree (docs/runbook.md).
    """

    to: Direction
    source: ObjectRef = ObjectRef(
        "source.toolkit.fluxcd.io/v1", "GitRepository", "flux-system", "flux-system"
    )
    apps: ObjectRef | None = None
    merge: str | None = None
    revision: str | None = None
    expect_shares: int | None = None
    step_timeout: float = 600.0
    prometheus_url: str | None = None
    repo: Path | None = None
    root: str | None = None
    target: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """Every step, in order, for ``--plan`` and the executor."""

    options: Options
    steps: tuple[Step, ...]
    consumers: tuple[Consumer, ...] = ()
    refusals: tuple[str, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
