"""What probes read: the snapshot, container logs and RBAC objects, behind small callables so
a probe is a pure function of what it is given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpushift._obj import Obj

#: ``(namespace, pod, container, previous) -> log text``, None when there is none.
LogReader = Callable[[str, str, str, bool], str | None]
#: ``kind -> objects`` (ClusterRole, ClusterRoleBinding).
Lister = Callable[[str], list[Obj]]


@dataclass(slots=True)
class Context:
    """The cluster as the probes see it; ``node`` limits them to one node."""

    snapshot: Obj
    read_log: LogReader
    list_kind: Lister
    node: str | None = None
    _cache: dict[str, list[Obj]] = field(default_factory=dict)

    def objects(self, kind: str) -> list[Obj]:
        """Objects of a kind, listed once."""
        if kind not in self._cache:
            self._cache[kind] = self.list_kind(kind)
        return self._cache[kind]

    def wanted(self, node: str | None) -> bool:
        """Whether a node is in scope (every node without ``--node``)."""
        return self.node is None or node == self.node

    def agent_pods(self, component: str) -> list[Obj]:
        """The snapshot's pods of one agent (``device-plugin``, ``dra-kubelet-plugin``, …)."""
        for agent in self.snapshot.get("agents") or []:
            if agent.get("component") == component:
                return list(agent.get("pods") or [])
        return []

    def log(self, pod: Obj, container: str | None = None, *, previous: bool = False) -> list[str]:
        """A pod's container log as lines (the main container unless named); empty if none."""
        text = self.read_log(
            str(pod.get("namespace")),
            str(pod.get("name")),
            container or str(pod.get("mainContainer")),
            previous,
        )
        return [ln for ln in (text or "").splitlines() if ln.strip()]
