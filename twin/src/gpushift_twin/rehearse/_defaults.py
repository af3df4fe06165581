"""What ``rehearse --repo PATH`` makes of the repository alone.

Without ``--target``, the target is the repository as ``gpushift migrate --to dra --write``
writes it (:func:`migrated_copy`). Without ``--nodes``, the twin runs on three nodes
``gpu-node-0..2`` with one L4 each, and a label a GPU consumer's pod requires that no agent
sets goes on one of them (on each, for a DaemonSet) (:func:`default_inventory`,
:func:`label_nodes`), so the consumer is not left Pending for a label only the real
cluster's nodes carry.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpushift.common import InputError, Obj
from gpushift_twin.cluster import agent_label

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
        names = list(self.consumers)
        who = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        verb = "requires" if len(names) == 1 else "require"
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


@dataclass(frozen=True, slots=True)
class DefaultInventory:
    """The inventory text the twin gets without ``--nodes``, and the labels it added."""

    text: str
    labels: tuple[NodeLabel, ...] = ()


def required_labels(node_selector: object, affinity: object) -> dict[str, str]:
    """The labels a node needs for a pod with this ``nodeSelector`` and ``affinity``, leaving
    out those the node's agents set (the kubelet, NFD, gpu-feature-discovery, the GPU
    Operator): every ``nodeSelector`` entry; and, unless one of the required node affinity's
    ``nodeSelectorTerms`` asks for no such label already, the ``In`` (its first value) and
    ``Exists`` (``"true"``) expressions of the first term. ``NotIn`` and ``DoesNotExist``
    hold on a node without the label; ``Gt``, ``Lt`` and ``matchFields`` are not met by
    labelling. A key or value that is not a valid label (an unsubstituted ``${VAR}``, say) is
    left out."""
    from gpushift.gitops import node_pool

    pool = node_pool(node_selector, affinity)
    need: dict[str, str] = {}
    for req in pool.selector:
        if not agent_label(req.key):
            need[req.key] = req.values[0]
    asks = [
        [r for r in term if r.operator in ("In", "Exists") and not agent_label(r.key)]
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


def default_inventory(repo: Path, root: str | None = None) -> DefaultInventory:
    """The inventory of a ``--repo`` rehearsal without ``--nodes``: :data:`DEFAULT_NODES`,
    with the labels the repository's GPU consumers (``gpushift check``'s, active and not at
    ``replicas: 0``) require of their nodes (:func:`required_labels`, :func:`label_nodes`).
    A repository that cannot be read gets the plain three nodes (the twin reports it)."""
    from gpushift.gitops import load_repo, summarize

    try:
        model = load_repo([repo / root if root else repo])
    except InputError:
        return DefaultInventory(DEFAULT_NODES)
    found = summarize(model).consumers
    consumers = [
        (c.name, required_labels(c.workload.pod.node_selector, c.workload.pod.affinity))
        for c in found
    ]
    daemons = {c.name for c in found if c.kind == "DaemonSet"}
    labels = label_nodes(consumers, DEFAULT_NODE_NAMES, every_node=daemons)
    if not labels:
        return DefaultInventory(DEFAULT_NODES)
    nodes = []
    for name in DEFAULT_NODE_NAMES:
        node: Obj = {"name": name, "gpus": [{"product": _GPU_PRODUCT}]}
        mine = {lb.key: lb.value for lb in labels if lb.node == name}
        if mine:
            node["labels"] = mine
        nodes.append(node)
    text = yaml.safe_dump({"nodes": nodes}, sort_keys=False, default_flow_style=False)
    return DefaultInventory(text, labels)
