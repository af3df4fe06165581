"""What ``rehearse --repo PATH`` makes of the repository alone.

Without ``--target``, the target is the repository as ``gpushift migrate --to dra --write``
writes it (:func:`migrated_copy`). Without ``--nodes``, the twin runs on three nodes
``gpu-node-0..2`` with one L4 each, and a label that a pod the move depends on (a GPU
consumer's, or one of a release in their ``dependsOn`` chains) requires and that no agent of
the twin sets goes on one of them (on each, for a DaemonSet), with the extended resources
such a pod requests that no default node offers (:func:`default_inventory`,
:func:`label_nodes`, :func:`node_resources`), so the move is not left waiting for a label or
a device only the real cluster's nodes have.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from gpushift import common
from gpushift.common import InputError, Obj
from gpushift_twin.cluster import twin_label
from gpushift_twin.rehearse._settle import matters, model_seeds

if TYPE_CHECKING:
    from gpushift.gitops import Repo, Workload

#: The inventory a ``--repo`` rehearsal runs on without ``--nodes``: three nodes, one L4 each.
DEFAULT_NODES = """\
nodes:
- name: gpu-node
  count: 3
  gpus:
  - product: NVIDIA L4
"""
#: The names ``DEFAULT_NODES`` gives its nodes.
DEFAULT_NODE_NAMES = ("gpu-node-0", "gpu-node-1", "gpu-node-2")
_GPU_PRODUCT = "NVIDIA L4"
#: What makes the target without ``--target``, as the text and the JSON say it.
MIGRATE_TO_DRA = "gpushift migrate --to dra"

# A label's name (an optional DNS-subdomain prefix and a name) and value, as the API server
# validates them (k8s.io/apimachinery validation.IsQualifiedName, IsValidLabelValue).
_NAME = r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")


@dataclass(frozen=True, slots=True)
class MadeTarget:
    """The target made by ``gpushift migrate --to dra --write`` on a copy of the repository:
    where the copy is and the files the migration changed (added, edited or removed)."""

    path: Path
    files: tuple[str, ...]

    def line(self) -> str:
        """``target: the repository as `gpushift migrate --to dra` writes it (N files
        changed)``."""
        n = len(self.files)
        return (
            f"target: the repository as `{MIGRATE_TO_DRA}` writes it "
            f"({n} file{'' if n == 1 else 's'} changed)"
        )

    def as_json(self) -> Obj:
        """``{"madeBy": "gpushift migrate --to dra", "filesChanged": N, "files": [...]}``."""
        return {
            "madeBy": MIGRATE_TO_DRA,
            "filesChanged": len(self.files),
            "files": list(self.files),
        }


def migrated_copy(repo: Path, dest: Path) -> MadeTarget:
    """Copy the repository's tree (without ``.git``; symlinks as links) to ``dest`` and write
    ``gpushift migrate --to dra`` there, in this process, with migrate's defaults.

    Raises:
        InputError: migrate refused (its one line, prefixed with what this was doing, with the
            repository's paths in place of the copy's), or had nothing to do (the repository
            already runs DRA).
    """
    from gpushift.migrate import Options, migrate

    doing = f"making the target with `{MIGRATE_TO_DRA} --write` on a copy of the repository"
    shutil.copytree(repo, dest, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    try:
        result = migrate(dest, Options(to="dra"), write=True)
    except InputError as err:
        # The line `gpushift migrate REPO` prints: the copy's paths read as the repository's.
        line = str(err).replace(str(dest), str(repo))
        raise InputError(f"{doing}: {line}") from None
    if result.plan.empty:
        raise InputError(
            f"{doing}: nothing to do, the repository already uses {result.plan.to}; give "
            "--target for the tree to move to"
        )
    return MadeTarget(dest, result.plan.files())


@dataclass(frozen=True, slots=True)
class NodeLabel:
    """A label the default inventory gives ``node`` because the GPU consumers ``consumers``
    require it."""

    node: str
    key: str
    value: str
    consumers: tuple[str, ...]

    def line(self) -> str:
        """``node gpu-node-0 labelled K=V: frigate requires it; give --nodes for your real
        nodes``."""
        who, verb = _who(self.consumers)
        return (
            f"node {self.node} labelled {self.key}={self.value}: {who} {verb} it; give --nodes "
            "for your real nodes"
        )

    def as_json(self) -> Obj:
        """``{"node", "key", "value", "requiredBy"}``."""
        return {
            "node": self.node,
            "key": self.key,
            "value": self.value,
            "requiredBy": list(self.consumers),
        }


def _who(names: Sequence[str]) -> tuple[str, str]:
    """``a``, ``a and b``, ``a, b and c``, with the verb that agrees."""
    names = list(names)
    if len(names) == 1:
        return names[0], "requires"
    return f"{', '.join(names[:-1])} and {names[-1]}", "require"


@dataclass(frozen=True, slots=True)
class NodeResource:
    """An extended resource the default inventory gives ``node`` (``count`` of it) because
    the pods of ``consumers`` request it and no default node offers it."""

    node: str
    resource: str
    count: int
    consumers: tuple[str, ...]

    def line(self) -> str:
        """``node gpu-node-1 offers gpu.intel.com/i915: 1: immich-server requires it (another
        device plugin advertises it on the real cluster); give --nodes for your real
        nodes``."""
        who, verb = _who(self.consumers)
        return (
            f"node {self.node} offers {self.resource}: {self.count}: {who} {verb} it (another "
            "device plugin advertises it on the real cluster); give --nodes for your real nodes"
        )

    def as_json(self) -> Obj:
        """``{"node", "resource", "count", "requiredBy"}``."""
        return {
            "node": self.node,
            "resource": self.resource,
            "count": self.count,
            "requiredBy": list(self.consumers),
        }


@dataclass(frozen=True, slots=True)
class DefaultInventory:
    """The inventory text the twin gets without ``--nodes``, and the labels and extended
    resources it added."""

    text: str
    labels: tuple[NodeLabel, ...] = ()
    resources: tuple[NodeResource, ...] = ()


def required_labels(node_selector: object, affinity: object) -> dict[str, str]:
    """The labels a node needs for a pod with this ``nodeSelector`` and ``affinity``, leaving
    out those the twin's agents set (:func:`gpushift_twin.cluster.twin_label`: the kubelet's,
    NFD's NVIDIA PCI label, gpu-feature-discovery's, the GPU Operator's): every
    ``nodeSelector`` entry; and, unless one of the required node affinity's
    ``nodeSelectorTerms`` asks for no such label already, the ``In`` (its first value) and
    ``Exists`` (``"true"``) expressions of the first term. ``NotIn`` and ``DoesNotExist``
    hold on a node without the label; ``Gt``, ``Lt`` and ``matchFields`` are not met by
    labelling. A key or value that is not a valid label (an unsubstituted ``${VAR}``, say) is
    left out."""
    from gpushift.gitops import node_pool

    pool = node_pool(node_selector, affinity)
    need: dict[str, str] = {}
    for req in pool.selector:
        if not twin_label(req.key):
            need[req.key] = req.values[0]
    asks = [
        [r for r in term if r.operator in ("In", "Exists") and not twin_label(r.key)]
        for term in pool.terms
    ]
    if asks and all(asks):
        for req in asks[0]:
            if req.operator == "Exists":
                need.setdefault(req.key, "true")
            elif req.values and need.get(req.key, req.values[0]) not in req.values:
                continue  # the nodeSelector already asks for another value: it must hold
            elif req.values:
                need.setdefault(req.key, req.values[0])
    return {k: v for k, v in need.items() if _KEY.match(k) and _VALUE.match(v)}


def label_nodes(
    consumers: Sequence[tuple[str, dict[str, str]]],
    nodes: Sequence[str],
    *,
    every_node: Collection[str] = (),
) -> tuple[NodeLabel, ...]:
    """The labels to give ``nodes`` so each consumer (name, labels it requires) has a node.

    Consumers requiring the same labels share a node. Each set goes on one node, not on
    every node: on the first node that already carries all of it, else on the node with
    the fewest sets so far that carries none of its keys with another value (two consumers
    asking for ``zone=a`` and ``zone=b`` get different nodes). The consumers named in
    ``every_node`` (DaemonSets: a pod on each node they select, the GPU nodes on a real
    cluster) get theirs on every node that carries none of the keys with another value. A
    set no node can take is left out (the consumer stays Pending and the rehearsal explains
    it). Pure.
    """
    groups: dict[tuple[tuple[tuple[str, str], ...], bool], list[str]] = {}
    for name, need in consumers:
        if need:
            group = (tuple(sorted(need.items())), name in every_node)
            groups.setdefault(group, []).append(name)
    labels: list[dict[str, str]] = [{} for _ in nodes]
    load = [0] * len(nodes)
    by: dict[tuple[int, str], list[str]] = {}
    for (wanted, everywhere), names in groups.items():
        fits = [i for i in range(len(nodes)) if all(labels[i].get(k, v) == v for k, v in wanted)]
        if not fits:
            continue
        held = [i for i in fits if all(labels[i].get(k) == v for k, v in wanted)]
        if everywhere:
            chosen = fits
        else:
            chosen = [held[0] if held else min(fits, key=lambda i: (load[i], i))]
        for at in chosen:
            load[at] += 1
            for key, value in wanted:
                labels[at][key] = value
                who = by.setdefault((at, key), [])
                who += [n for n in names if n not in who]
    return tuple(
        NodeLabel(nodes[i], key, labels[i][key], tuple(by[i, key]))
        for i in range(len(nodes))
        for key in sorted(labels[i])
    )


# Resources the default nodes have: the kubelet's, and the NVIDIA ones the twin's agents
# advertise (or that no inventory may give).
_BASE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


def _extended(resource: str) -> bool:
    return not (
        resource in _BASE_RESOURCES
        or resource.startswith(("hugepages-", "nvidia.com/", "requests."))
        or "/" not in resource
    )


def pod_resources(workload: Workload) -> dict[str, int]:
    """The extended resources one pod of ``workload`` requests (limits win; the larger of
    the containers' sum and any one init container's, as the scheduler counts), other than
    :data:`_BASE_RESOURCES`, ``hugepages-*`` and ``nvidia.com/*``. An amount that is not a
    quantity is left out."""
    out: dict[str, int] = {}
    for init in (False, True):
        for container in workload.pod.all_containers:
            if container.init != init:
                continue
            for name in {*container.limits, *container.requests}:
                if not _extended(str(name)):
                    continue
                try:
                    amount = common.quantity_value(str(container.extended(name)))
                except (ValueError, InputError):
                    continue
                if init:
                    out[name] = max(out.get(name, 0), amount)
                else:
                    out[name] = out.get(name, 0) + amount
    return {k: v for k, v in sorted(out.items()) if v > 0}


def node_resources(
    requests: Sequence[tuple[str, Mapping[str, int], int]],
    labels: Sequence[NodeLabel],
    nodes: Sequence[str],
    *,
    every_node: Collection[str] = (),
) -> tuple[NodeResource, ...]:
    """The extended resources to give ``nodes`` so each requester (name, what one pod
    requests, pods) fits: on the nodes that got its labels (:func:`label_nodes`), else on
    every node for a DaemonSet (``every_node``, one pod each) and on the first node for the
    rest. A node offers the sum of what the requesters placed there ask (at least 1).
    Requesters with labels no node took are left out (they stay Pending). Pure."""
    count: dict[tuple[str, str], int] = {}
    by: dict[tuple[str, str], list[str]] = {}
    for name, wants, pods in requests:
        if not wants:
            continue
        placed = sorted({lb.node for lb in labels if name in lb.consumers}, key=nodes.index)
        daemon = name in every_node
        if not placed:
            placed = list(nodes) if daemon else [nodes[0]]
        for node in placed:
            for resource, amount in wants.items():
                at = (node, resource)
                count[at] = count.get(at, 0) + amount * (1 if daemon else max(pods, 1))
                who = by.setdefault(at, [])
                who += [name] if name not in who else []
    return tuple(
        NodeResource(node, resource, max(count[node, resource], 1), tuple(by[node, resource]))
        for node in nodes
        for resource in sorted(r for n, r in count if n == node)
    )


def _flux_objects(model: Repo) -> list[Obj]:
    """The repository's active Flux Kustomizations and HelmReleases as the twin would hold
    them, for :func:`~gpushift_twin.rehearse._settle.matters`: the applying Kustomization as
    kustomize-controller's owner labels."""
    out: list[Obj] = []
    for obj in (*(k.obj for k in model.kustomizations), *(h.obj for h in model.helm_releases)):
        if not obj.active:
            continue
        meta: Obj = {"name": obj.name, "namespace": obj.namespace or ""}
        if obj.kustomization is not None:
            meta["labels"] = {
                "kustomize.toolkit.fluxcd.io/name": obj.kustomization.name,
                "kustomize.toolkit.fluxcd.io/namespace": obj.kustomization.namespace,
            }
        out.append({"kind": obj.kind, "metadata": meta, "spec": obj.body.get("spec") or {}})
    return out


def depended_on(model: Repo) -> tuple[Workload, ...]:
    """The workloads the move depends on, as the rehearsal waits for them (``_settle``): the
    GPU consumers (``gpushift check``'s, active), then the workloads of the HelmReleases in
    :func:`~gpushift_twin.rehearse._settle.matters` of the repository's seeds (their
    ``dependsOn`` chains, health checks, parents), the workloads a Kustomization there
    applies with ``wait: true``, and those it health-checks. Not those at ``replicas: 0``."""
    from gpushift.gitops import summarize

    keys = matters(model_seeds(model), _flux_objects(model))
    waits = {(k.namespace, k.name): k for k in model.kustomizations if k.active}
    checked = {
        (hc.kind, hc.namespace or ks.namespace, hc.name)
        for ks in waits.values()
        if ("Kustomization", ks.namespace, ks.name) in keys
        for hc in ks.health_checks
    }

    def waited(w: Workload) -> bool:
        origin = w.origin
        if origin.kind == "HelmRelease":
            return ("HelmRelease", origin.namespace or "", origin.name) in keys
        if (w.kind, w.namespace or "", w.name) in checked:
            return True
        ref = origin.kustomization
        ks = waits.get((ref.namespace, ref.name)) if ref is not None else None
        return ks is not None and ks.wait and ("Kustomization", ks.namespace, ks.name) in keys

    out = [c.workload for c in summarize(model).consumers]
    seen = {(w.kind, w.namespace, w.name) for w in out}
    for w in model.workloads:
        if w.active and not w.parked and (w.kind, w.namespace, w.name) not in seen and waited(w):
            seen.add((w.kind, w.namespace, w.name))
            out.append(w)
    return tuple(out)


def stack_labels(target: Path, root: str | None = None) -> dict[str, str]:
    """Node labels the target tree's DRA kubelet plugin selects (``kubeletPlugin.nodeSelector``)
    that the twin's agents do not set: the migrated tree asks the operator to label the GPU
    nodes with them (render's ``nvidia.com/dra-kubelet-plugin`` when gpu-operator installs
    the driver), so the default GPU nodes carry them from the start."""
    from gpushift.gitops import load_repo

    try:
        model = load_repo([target / root if root else target])
    except InputError:
        return {}
    out: dict[str, str] = {}
    for hr in model.releases("dra-driver-nvidia-gpu"):
        selector = hr.value("kubeletPlugin", "nodeSelector")
        if isinstance(selector, Mapping):
            out.update({str(k): str(v) for k, v in selector.items() if not twin_label(str(k))})
    return out


def default_inventory(
    repo: Path, root: str | None = None, *, target: Path | None = None
) -> DefaultInventory:
    """The inventory of a ``--repo`` rehearsal without ``--nodes``: :data:`DEFAULT_NODES`,
    with the labels the workloads the move depends on (:func:`depended_on`) require of their
    nodes (:func:`required_labels`, :func:`label_nodes`) and the extended resources they
    request that no default node offers (:func:`pod_resources`, :func:`node_resources`).
    A repository that cannot be read gets the plain three nodes (the twin reports it)."""
    from gpushift.gitops import load_repo

    try:
        model = load_repo([repo / root if root else repo])
    except InputError:
        return DefaultInventory(DEFAULT_NODES)
    found = depended_on(model)
    wanted = [(w.name, required_labels(w.pod.node_selector, w.pod.affinity)) for w in found]
    daemons = {w.name for w in found if w.kind == "DaemonSet"}
    labels = label_nodes(wanted, DEFAULT_NODE_NAMES, every_node=daemons)
    if target is not None:
        plugin = "the DRA driver's kubelet plugin (the target tree)"
        have = {(lb.node, lb.key) for lb in labels}
        labels += tuple(
            NodeLabel(node, key, value, (plugin,))
            for key, value in sorted(stack_labels(target, root).items())
            for node in DEFAULT_NODE_NAMES
            if (node, key) not in have
        )
    requests = [(w.name, pod_resources(w), w.replicas or 1) for w in found]
    resources = node_resources(requests, labels, DEFAULT_NODE_NAMES, every_node=daemons)
    if not labels and not resources:
        return DefaultInventory(DEFAULT_NODES)
    nodes = []
    for name in DEFAULT_NODE_NAMES:
        node: Obj = {"name": name, "gpus": [{"product": _GPU_PRODUCT}]}
        mine = {lb.key: lb.value for lb in labels if lb.node == name}
        if mine:
            node["labels"] = mine
        offers = {r.resource: str(r.count) for r in resources if r.node == name}
        if offers:
            node["resources"] = offers
        nodes.append(node)
    text = yaml.safe_dump({"nodes": nodes}, sort_keys=False, default_flow_style=False)
    return DefaultInventory(text, labels, resources)
