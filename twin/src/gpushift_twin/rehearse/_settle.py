"""Settling what the move depends on, and saying why the rest did not settle.

A rehearsal on an operator's repository waits for the Flux objects the move depends on (the
*matters* set), not for every object of the repository: a media app whose PersistentVolume
keeps it Pending does not stop the move to DRA from being rehearsed.

The set starts from *seeds*: the HelmReleases of the GPU stack (device plugin, DRA driver,
gpu-operator) and those that render GPU consumers, with the Kustomizations that apply them,
as :mod:`gpushift.gitops` reads them from the repository (:func:`repo_seeds`), and the
HelmReleases in the twin whose chart is one of the GPU stack's (:func:`live_seeds`). It
grows over the Flux objects in the twin (:func:`matters`): each member's ``dependsOn``, its
``healthChecks`` and (with ``wait: true``) its inventory entries of Flux kinds, its source,
and the Kustomizations that apply it, up to the root; a Kustomization reached through
``dependsOn`` also brings the HelmReleases it applies (what depends on it waits for them).
Health checks on other kinds need no member of their own: the Kustomization that checks them
is a member, and its Ready condition waits for them. While a seed the repository defines is
not applied yet, the roots (Kustomizations nothing applies) are members too: they are what
it waits on. Once the set has settled, the Flux owners of GPU workloads in the twin
(:func:`gpu_workload_owners`) join it, for a consumer the repository's model did not know.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpushift import kube
from gpushift.common import InputError, Obj, by_kind
from gpushift.runbook import scheduling_message, why_pending

if TYPE_CHECKING:
    from gpushift.gitops import Repo

#: (kind, namespace, name) of a Flux object; a namespace of "" matches any namespace (the
#: repository did not say, and its parent Kustomization's ``namespace`` decides).
FluxKey = tuple[str, str, str]

#: The charts of the GPU stack, as :func:`gpushift.gitops.chart_identity` names them.
GPU_STACK_CHARTS = frozenset({"gpu-operator", "nvidia-device-plugin", "dra-driver-nvidia-gpu"})

_KS_KIND, _HR_KIND = "Kustomization", "HelmRelease"
_KS_LABEL = "kustomize.toolkit.fluxcd.io"
_HR_LABEL = "helm.toolkit.fluxcd.io"
_FLUX_KINDS = (
    ("GitRepository", "source.toolkit.fluxcd.io/v1"),
    ("OCIRepository", "source.toolkit.fluxcd.io/v1"),
    (_KS_KIND, "kustomize.toolkit.fluxcd.io/v1"),
    (_HR_KIND, "helm.toolkit.fluxcd.io/v2"),
)
_WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> FluxKey:
    meta = _meta(obj)
    return str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name"))


def show(key: FluxKey) -> str:
    """``Kind/namespace/name`` (``Kind/name`` when the namespace is open)."""
    kind, ns, name = key
    return f"{kind}/{ns}/{name}" if ns else f"{kind}/{name}"


def repo_seeds(repo: Path, root: str | None = None) -> frozenset[FluxKey]:
    """The Flux objects of ``repo`` (under ``root`` when given) that deploy the GPU stack or a
    GPU consumer: those HelmReleases and the Kustomizations applying them, a device plugin's
    DaemonSet manifest or the consumers' manifests. Names with an unsubstituted ``${…}`` are
    left to :func:`live_seeds`.

    Raises:
        InputError: the repository cannot be read.
    """
    from gpushift.gitops import load_repo

    return model_seeds(load_repo([repo / root if root else repo]))


def model_seeds(model: Repo) -> frozenset[FluxKey]:
    """:func:`repo_seeds` of a repository already read."""
    from gpushift.gitops import summarize

    out: set[FluxKey] = set()

    def add_ks(ref: Any) -> str | None:
        ks = model.kustomization(ref)
        if ref is not None:
            out.add((_KS_KIND, str(ref.namespace or ""), str(ref.name)))
        return ks.target_namespace if ks is not None else None

    for hr in model.helm_releases:
        if hr.chart in GPU_STACK_CHARTS and hr.obj.active:
            target = add_ks(hr.obj.kustomization)
            out.add((_HR_KIND, str(hr.namespace or target or ""), hr.name))
    for plugin in model.device_plugins:
        # A device plugin applied as a DaemonSet manifest: the Kustomization applying it.
        if plugin.release is None and plugin.active:
            add_ks(plugin.obj.kustomization)
    for consumer in summarize(model).consumers:
        origin = consumer.workload.origin
        target = add_ks(origin.kustomization)
        if origin.kind == _HR_KIND:
            out.add((_HR_KIND, str(origin.namespace or target or ""), origin.name))
    return frozenset(k for k in out if "${" not in "".join(k))


def _chart_name(hr: Mapping[str, Any], sources: Mapping[FluxKey, Obj]) -> str:
    spec = hr.get("spec") or {}
    chart = ((spec.get("chart") or {}).get("spec") or {}).get("chart")
    if chart:
        return str(chart)
    ref = spec.get("chartRef") or {}
    ns = str(ref.get("namespace") or _meta(hr).get("namespace") or "")
    source = sources.get((str(ref.get("kind")), ns, str(ref.get("name"))))
    return str(((source or {}).get("spec") or {}).get("url") or "")


def live_seeds(objects: Sequence[Obj]) -> frozenset[FluxKey]:
    """The HelmReleases among the twin's Flux ``objects`` whose chart (by name, or by the
    OCIRepository url of its ``chartRef``) is one of :data:`GPU_STACK_CHARTS`."""
    from gpushift.gitops import chart_identity

    by_key = {_key(o): o for o in objects}
    return frozenset(
        _key(o)
        for o in objects
        if o.get("kind") == _HR_KIND and chart_identity(_chart_name(o, by_key)) in GPU_STACK_CHARTS
    )


def _owner(obj: Mapping[str, Any], prefix: str) -> tuple[str, str] | None:
    labels = _meta(obj).get("labels") or {}
    name, ns = labels.get(f"{prefix}/name"), labels.get(f"{prefix}/namespace")
    return (str(ns), str(name)) if name and ns else None


def _ref(spec_ref: Mapping[str, Any], *, kind: str, namespace: str) -> FluxKey:
    return (
        str(spec_ref.get("kind") or kind),
        str(spec_ref.get("namespace") or namespace),
        str(spec_ref.get("name")),
    )


def _inventory(obj: Mapping[str, Any]) -> Iterable[FluxKey]:
    # kustomize-controller's inventory ids: <namespace>_<name>_<group>_<kind>.
    for entry in ((obj.get("status") or {}).get("inventory") or {}).get("entries") or []:
        parts = str(entry.get("id") or "").split("_")
        if len(parts) == 4 and parts[3] in (_KS_KIND, _HR_KIND):
            yield parts[3], parts[0], parts[1]


def _resolve(keys: Iterable[FluxKey], index: Mapping[FluxKey, Obj]) -> set[FluxKey]:
    """The live objects ``keys`` name: the one in that namespace, else (an open namespace, or
    one the repository's reading got wrong) every one of that kind and name; a key no object
    answers stays as it is."""
    out: set[FluxKey] = set()
    for kind, ns, name in keys:
        if (kind, ns, name) in index:
            out.add((kind, ns, name))
            continue
        found = {k for k in index if k[0] == kind and k[2] == name}
        out.update(found or {(kind, ns, name)})
    return out


def matters(seeds: Iterable[FluxKey], objects: Sequence[Obj]) -> frozenset[FluxKey]:
    """The closure of ``seeds`` over the twin's Flux ``objects`` (see the module's contract).
    A seed no object answers stays in the set as it is."""
    index = {_key(o): o for o in objects}
    applies: dict[FluxKey, list[FluxKey]] = {}
    for k, o in index.items():
        if k[0] == _HR_KIND and (parent := _owner(o, _KS_LABEL)) is not None:
            applies.setdefault((_KS_KIND, *parent), []).append(k)
    out: set[FluxKey] = set()
    opened: set[FluxKey] = set()  # Kustomizations whose HelmReleases are in
    todo: list[tuple[FluxKey, bool]] = [(k, False) for k in _resolve(seeds, index)]
    while todo:
        key, depended = todo.pop()
        if depended and key[0] == _KS_KIND and key not in opened:
            opened.add(key)
            todo += [(k, False) for k in applies.get(key, [])]
        if key in out:
            continue
        out.add(key)
        obj = index.get(key)
        if obj is None:
            continue
        kind, ns, _ = key
        spec = obj.get("spec") or {}
        todo += [(_ref(d, kind=kind, namespace=ns), True) for d in spec.get("dependsOn") or []]
        if kind == _KS_KIND:
            source = spec.get("sourceRef") or {}
            todo.append((_ref(source, kind="GitRepository", namespace=ns), False))
            for check in spec.get("healthChecks") or []:
                if check.get("kind") in (_KS_KIND, _HR_KIND):
                    todo.append((_ref(check, kind=_HR_KIND, namespace=ns), False))
            if spec.get("wait") is True:
                todo += [(k, False) for k in _inventory(obj)]
        else:
            chart = (spec.get("chart") or {}).get("spec") or {}
            ref = spec.get("chartRef") or chart.get("sourceRef")
            if ref:
                todo.append((_ref(ref, kind="OCIRepository", namespace=ns), False))
        parent = _owner(obj, _KS_LABEL)
        if parent is not None:
            todo.append(((_KS_KIND, *parent), False))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Unsettled:
    """A Flux object that did not settle: what its Ready condition says it waits for, and
    the Pending pods it owns, each explained (:func:`~gpushift.runbook.why_pending`)."""

    key: FluxKey
    message: str
    pods: tuple[str, ...] = ()

    def line(self) -> str:
        """``Kind/ns/name: message``, then ``; pod …`` for each Pending pod."""
        head = f"{show(self.key)}: " if self.key[2] else ""
        return head + self.message + "".join(f"; {p}" for p in self.pods)

    def as_json(self) -> Obj:
        """``{"kind", "namespace", "name", "message", "pods"}``."""
        kind, ns, name = self.key
        return {
            "kind": kind,
            "namespace": ns,
            "name": name,
            "message": self.message,
            "pods": list(self.pods),
        }


@dataclass(frozen=True, slots=True)
class Settled:
    """Where the twin stood when the rehearsal stopped waiting for it.

    ``blocking`` is what the move depends on and had not settled (empty when it settled);
    ``others`` is everything else not settled, not waited for; ``pods`` explains each Pending
    pod of a GPU consumer or the GPU stack. ``matters`` is the set waited for (empty under
    ``--strict-settle``, which waits for everything).
    """

    blocking: tuple[Unsettled, ...]
    others: tuple[Unsettled, ...]
    pods: tuple[str, ...] = ()
    matters: frozenset[FluxKey] = field(default=frozenset())
    strict: bool = False

    @property
    def ok(self) -> bool:
        """Whether nothing the rehearsal waits for is left."""
        return not self.blocking


def _list(client: kube.Kube, kind: str, api_version: str | None = None) -> list[Obj]:
    ref = kube.ResourceRef.named(kind, api_version or by_kind(kind).api_version)
    try:
        return [{**o, "kind": kind} for o in client.list(ref)]
    except kube.KubeError:
        return []  # a kind the cluster does not serve (an OCIRepository CRD not installed)


def flux_objects(client: kube.Kube) -> list[Obj]:
    """The sources, Kustomizations and HelmReleases of the cluster, each with its ``kind``."""
    return [o for kind, version in _FLUX_KINDS for o in _list(client, kind, version)]


def _requests_gpu(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = c.get("resources") or {}
        if any(
            str(k).startswith("nvidia.com/")
            for p in ("requests", "limits")
            for k in res.get(p) or {}
        ):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Cluster:
    """What :func:`explain_pods` reads, listed once."""

    pods: tuple[Obj, ...]
    workloads: Mapping[tuple[str, str, str], Obj]
    nodes: tuple[Obj, ...]
    daemonsets: tuple[Obj, ...]
    runtime_classes: tuple[Obj, ...]

    @classmethod
    def read(cls, client: kube.Kube) -> Cluster:
        """List pods, workloads, nodes and RuntimeClasses."""
        workloads = {
            (kind, str(_meta(o).get("namespace")), str(_meta(o).get("name"))): o
            for kind in _WORKLOADS
            for o in _list(client, kind)
        }
        return cls(
            pods=tuple(_list(client, "Pod")),
            workloads=workloads,
            nodes=tuple(_list(client, "Node")),
            daemonsets=tuple(o for k, o in workloads.items() if k[0] == "DaemonSet"),
            runtime_classes=tuple(_list(client, "RuntimeClass")),
        )

    def flux_owner(self, obj: Mapping[str, Any]) -> FluxKey | None:
        """The HelmRelease or Kustomization that applied ``obj`` or the workload owning it."""
        cur: Mapping[str, Any] | None = obj
        for _ in range(4):  # pod → ReplicaSet → Deployment, or pod → Job → CronJob
            if cur is None:
                return None
            for prefix, kind in ((_HR_LABEL, _HR_KIND), (_KS_LABEL, _KS_KIND)):
                owner = _owner(cur, prefix)
                if owner is not None:
                    return (kind, *owner)
            meta = _meta(cur)
            ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
            if ref is None:
                return None
            cur = self.workloads.get(
                (str(ref.get("kind")), str(meta.get("namespace")), str(ref.get("name")))
            )
        return None

    def pending(self) -> list[Obj]:
        """The pods kube-scheduler tried and could not place (``PodScheduled=False``)."""
        return [
            p
            for p in self.pods
            if not (p.get("spec") or {}).get("nodeName")
            and not _meta(p).get("deletionTimestamp")
            and scheduling_message(p) is not None
        ]

    def explain(self, pod: Mapping[str, Any], *, device_plugin: bool = True) -> str:
        """:func:`~gpushift.runbook.why_pending` for one pod, against this cluster;
        ``device_plugin`` False on DRA (``nvidia.com/gpu`` allocatable 0 by design)."""
        return why_pending(
            pod,
            nodes=self.nodes,
            daemonsets=self.daemonsets,
            runtime_classes=self.runtime_classes,
            device_plugin=device_plugin,
        )


def explain_pods(
    cluster: Cluster, owners: frozenset[FluxKey] | None, *, device_plugin: bool = True
) -> dict[FluxKey | None, list[str]]:
    """Each Pending pod explained, by its Flux owner: every pod that asks for a GPU, and the
    pods whose owner is in ``owners`` (all of them when None)."""
    out: dict[FluxKey | None, list[str]] = {}
    for pod in cluster.pending():
        owner = cluster.flux_owner(pod)
        if _requests_gpu(pod) or owners is None or owner in owners:
            line = cluster.explain(pod, device_plugin=device_plugin)
            out.setdefault(owner, []).append(line)
    return out


def gpu_workload_owners(cluster: Cluster) -> frozenset[FluxKey]:
    """The HelmReleases and Kustomizations that applied a workload whose pods ask for a GPU
    (``nvidia.com/*`` resources or resource claims)."""
    out: set[FluxKey] = set()
    for obj in cluster.workloads.values():
        template = {"spec": ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}}
        if _requests_gpu(template) and (owner := cluster.flux_owner(obj)) is not None:
            out.add(owner)
    return frozenset(out)


def _state(
    client: kube.Kube, *, seeds: frozenset[FluxKey], strict: bool
) -> tuple[list[Unsettled], list[Unsettled], frozenset[FluxKey]]:
    from gpushift_twin.flux import not_ready_objects

    objects = flux_objects(client)
    members = frozenset() if strict else matters(seeds | live_seeds(objects), objects)
    present = {_key(o) for o in objects}
    # A seed the repository defines must have been applied before it can be waited for;
    # until then the roots (the Kustomizations nothing applies) and the Kustomizations they
    # apply are what it waits on: the older templates' self-syncing root applies the apps
    # root one level down (kubernetes/flux/config/cluster.yaml, then apps.yaml).
    named = {(k[0], k[2]) for k in present}
    missing = [k for k in sorted(seeds) if (k[0], k[2]) not in named]
    if missing and not strict:
        kss = [o for o in objects if o["kind"] == _KS_KIND]
        roots = {_key(o) for o in kss if not _owner(o, _KS_LABEL)}
        below = {
            _key(o) for o in kss if (owner := _owner(o, _KS_LABEL)) and (_KS_KIND, *owner) in roots
        }
        members = members | roots | below
    blocking: list[Unsettled] = []
    others: list[Unsettled] = []
    if not any(k[0] == _KS_KIND for k in present):
        blocking.append(Unsettled((_KS_KIND, "", ""), "no Kustomization yet"))
    for n in not_ready_objects(client):
        item = Unsettled((n.kind, n.namespace, n.name), n.message)
        (blocking if strict or item.key in members else others).append(item)
    blocking += [Unsettled(key, "not applied yet") for key in missing]
    return blocking, others, members


def settle(
    client: kube.Kube,
    *,
    seeds: frozenset[FluxKey],
    timeout: float,
    strict: bool = False,
    poll: float = 1.0,
    on_pending: Callable[[list[str]], None] | None = None,
) -> Settled:
    """Poll until nothing the move depends on is left unsettled (everything, when
    ``strict``), or ``timeout`` wall seconds pass; then explain the Pending pods: those of
    GPU consumers and the GPU stack, and those of every object left unsettled."""
    deadline = time.monotonic() + timeout
    found: frozenset[FluxKey] = frozenset()
    while True:
        blocking, others, members = _state(client, seeds=seeds | found, strict=strict)
        if not blocking and not strict:
            # What the repository's model missed: the Flux owners of the workloads in the
            # twin whose pods ask for a GPU. Once settled without them, look once more.
            more = gpu_workload_owners(Cluster.read(client)) - members
            if more:
                found |= more
                blocking, others, members = _state(client, seeds=seeds | found, strict=strict)
        if not blocking or time.monotonic() >= deadline:
            break
        if on_pending is not None:
            on_pending([u.line() for u in blocking])
        time.sleep(min(poll, max(deadline - time.monotonic(), 0.0)))
    cluster = Cluster.read(client)
    unsettled = frozenset(u.key for u in [*blocking, *others])
    pods = explain_pods(cluster, unsettled | members)

    def with_pods(items: list[Unsettled]) -> tuple[Unsettled, ...]:
        return tuple(Unsettled(u.key, u.message, tuple(pods.get(u.key, ()))) for u in items)

    gpu_pods = tuple(
        line
        for owner, lines in sorted(pods.items(), key=lambda kv: str(kv[0]))
        if owner is None or owner in members or strict
        for line in lines
    )
    return Settled(
        blocking=with_pods(blocking),
        others=with_pods(others),
        pods=gpu_pods,
        matters=members,
        strict=strict,
    )


def still_unsettled(client: kube.Kube, earlier: Sequence[Unsettled]) -> tuple[Unsettled, ...]:
    """Of ``earlier``, those still not settled now, with what they wait for now."""
    from gpushift_twin.flux import not_ready_objects

    now = {(n.kind, n.namespace, n.name): n.message for n in not_ready_objects(client)}
    keep = [u for u in earlier if u.key in now]
    if not keep:
        return ()
    cluster = Cluster.read(client)
    pods = explain_pods(cluster, frozenset(u.key for u in keep))
    return tuple(Unsettled(u.key, now[u.key], tuple(pods.get(u.key, ()))) for u in keep)


def load_seeds(repo: Path | None, root: str | None) -> frozenset[FluxKey]:
    """:func:`repo_seeds`, or none when there is no repository (the embedded example) or it
    cannot be read (the live seeds still find the GPU stack)."""
    if repo is None:
        return frozenset()
    try:
        return repo_seeds(repo, root)
    except InputError:
        return frozenset()
