"""What a real kubelet posts so that kube-controller-manager keeps its node Ready: a Lease in
``kube-node-lease`` renewed every 10 s (pkg/kubelet/nodelease, ``renewInterval`` = a quarter
of ``leaseDurationSeconds`` 40). The twin's own API server has no node lifecycle controller,
so only a cluster on a real API server runs this."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from gpushift.common import Obj, by_kind
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster._context import Context

NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
RENEW = LEASE_SECONDS / 4
_LEASE = by_kind("Lease")
_NODE = by_kind("Node")


def micro_time(at: datetime) -> str:
    """A ``metav1.MicroTime`` (RFC 3339 with microseconds)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Heartbeat:
    """Renews each node's Lease every :data:`RENEW` seconds of cluster time."""

    def __init__(self, ctx: Context, nodes: list[str]) -> None:
        self.ctx = ctx
        self.nodes = nodes
        self._next: dict[str, float] = {}
        self._uids: dict[str, str] = {}

    def sync(self) -> None:
        """Renew the Leases that are due, and ask to be woken for the next."""
        ctx = self.ctx
        now = ctx.now()
        for name in self.nodes:
            if now < self._next.get(name, 0.0):
                continue
            if self._renew(name):
                self._next[name] = now + RENEW
            else:
                self._next[name] = now + 1.0
        if self._next:
            ctx.wake_at(min(self._next.values()))

    def _renew(self, name: str) -> bool:
        ctx = self.ctx
        stamp = micro_time(ctx.clock.now())
        uid = self._uids.get(name)
        if uid is None:
            try:
                uid = str(ctx.store.peek(_NODE, name=name)["metadata"]["uid"])
            except ApiError:
                return False
            self._uids[name] = uid

        def renew(cur: Obj) -> Obj:
            spec = dict(cur.get("spec") or {})
            spec["holderIdentity"] = name
            spec["leaseDurationSeconds"] = LEASE_SECONDS
            spec["renewTime"] = stamp
            return {**cur, "spec": spec}

        try:
            ctx.store.update(_LEASE, name=name, namespace=NAMESPACE, mutate=renew)
            return True
        except ApiError as err:
            if err.code != 404:
                return False
        body: Obj = {
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
            },
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": stamp,
            },
        }
        with contextlib.suppress(ApiError):
            ctx.store.create(_LEASE, body, namespace=NAMESPACE)
            return True
        return False
