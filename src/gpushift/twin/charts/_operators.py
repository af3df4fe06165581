"""The operators the charts install, acting on their custom resources in the twin.

gpu-operator: the ClusterPolicy controller labels GPU nodes ``nvidia.com/gpu.deploy.*`` and
renders the operands; a state that turns off is deleted in the operator's next reconcile,
``delay`` virtual seconds after the ClusterPolicy changed, so after the HelmRelease that
changed it is already Ready (controllers/object_controls.go, nvidia.md §6.2).
llmkube: every InferenceService becomes a Deployment.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from gpushift._kinds import by_kind, lookup
from gpushift._obj import Obj
from gpushift._obj import as_dict as d
from gpushift.twin.apiserver import ApiError, Store
from gpushift.twin.charts import _gpu_operator, _llmkube
from gpushift.twin.charts._accounts import service_accounts
from gpushift.twin.charts._writes import apply, delete, served

log = logging.getLogger("gpushift.twin.charts")
_GPU_PRESENT = "nvidia.com/gpu.present"
#: controllers/state_manager.go gpuStateLabels (the operands modelled here).
_DEPLOY_LABELS = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.operator-validator",
)


class Operators:
    """gpu-operator and llmkube controllers; :meth:`sync` runs one pass of both."""

    def __init__(self, store: Store, *, now: Callable[[], float], delay: float = 10.0) -> None:
        self.store = store
        self.now = now
        #: Virtual seconds from a ClusterPolicy change to the operator acting on it.
        self.delay = delay
        self._policy_seen: dict[str, tuple[int, float]] = {}
        self._isvc_seen: dict[str, tuple[str, str]] = {}

    def sync(self) -> float | None:
        """One pass; returns the virtual time the operator wants to look again, if any."""
        due = self._cluster_policies()
        self._inference_services()
        return due

    # -- gpu-operator --

    def _label_nodes(self) -> None:
        node_kind = by_kind("Node")
        for node in self.store.list(node_kind).objects:
            labels = d(node["metadata"].get("labels"))
            if labels.get(_GPU_PRESENT) != "true":
                continue
            # addGPUStateLabels honours a value an admin set (e.g. "false" on one node).
            missing = {k: "true" for k in _DEPLOY_LABELS if not labels.get(k)}
            if not missing:
                continue

            def add(cur: Obj, missing: dict[str, str] = missing) -> Obj:
                cur["metadata"]["labels"] = {**missing, **d(cur["metadata"].get("labels"))}
                return cur

            self.store.update(
                node_kind, name=node["metadata"]["name"], mutate=add, manager="gpu-operator"
            )

    def _cluster_policies(self) -> float | None:
        kind = lookup("nvidia.com/v1", "ClusterPolicy")
        if kind is None or not served(self.store, kind):
            return None
        due: float | None = None
        now = self.now()
        for policy in self.store.list(kind).objects:
            meta = policy["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            gen = int(meta.get("generation", 1))
            seen = self._policy_seen.get(meta["uid"])
            if seen is None or seen[0] != gen:
                seen = (gen, now + self.delay)
                self._policy_seen[meta["uid"]] = seen
                self._set_state(policy, "notReady")
            if seen[1] > now:
                due = seen[1] if due is None else min(due, seen[1])
                continue
            try:
                self._reconcile_policy(policy)
            except ApiError as err:
                log.debug("ClusterPolicy %s: %s", meta["name"], err)
                due = now + self.delay
        return due

    def _reconcile_policy(self, policy: Obj) -> None:
        meta = policy["metadata"]
        ns = str(d(meta.get("annotations")).get("meta.helm.sh/release-namespace") or "gpu-operator")
        self._label_nodes()
        monitors = lookup("monitoring.coreos.com/v1", "ServiceMonitor")
        want, gone = _gpu_operator.operands(
            namespace=ns,
            spec=d(policy.get("spec")),
            service_monitors=monitors is not None and served(self.store, monitors),
        )
        owner = {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        want = service_accounts(want, namespace=ns) + want
        for obj in want:
            if obj["kind"] != "RuntimeClass":
                obj["metadata"]["ownerReferences"] = [owner]
            apply(self.store, obj, manager="gpu-operator")
        for kind_name, name in gone:
            delete(self.store, by_kind(kind_name), name=name, namespace=ns)
        ready = all(self._ds_ready(o) for o in want if o["kind"] == "DaemonSet")
        self._set_state(policy, "ready" if ready else "notReady", namespace=ns)
        # The operator requeues every 5 s until its operands are ready, then resyncs (and so
        # restores an operand someone deleted) every minute.
        again = 5.0 if not ready else 60.0
        self._policy_seen[meta["uid"]] = (int(meta.get("generation", 1)), self.now() + again)

    def _ds_ready(self, obj: Obj) -> bool:
        try:
            ds = self.store.get(
                by_kind("DaemonSet"),
                name=obj["metadata"]["name"],
                namespace=obj["metadata"]["namespace"],
            )
        except ApiError:
            return False
        st = d(ds.get("status"))
        return int(st.get("numberAvailable") or 0) >= int(st.get("desiredNumberScheduled") or 0)

    def _set_state(self, policy: Obj, state: str, *, namespace: str | None = None) -> None:
        kind = by_kind("ClusterPolicy")
        status = d(policy.get("status"))
        if status.get("state") == state and (
            namespace is None or status.get("namespace") == namespace
        ):
            return

        def put(cur: Obj) -> Obj:
            st = d(cur.get("status"))
            st["state"] = state
            if namespace:
                st["namespace"] = namespace
            cur["status"] = st
            return cur

        with contextlib.suppress(ApiError):
            self.store.update(
                kind,
                name=policy["metadata"]["name"],
                mutate=put,
                subresource="status",
                manager="gpu-operator",
            )

    # -- llmkube --

    def _inference_services(self) -> None:
        kind = lookup("inference.llmkube.dev/v1alpha1", "InferenceService")
        model_kind = lookup("inference.llmkube.dev/v1alpha1", "Model")
        if kind is None or model_kind is None or not served(self.store, kind):
            return
        for isvc in self.store.list(kind).objects:
            meta = isvc["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            ns = str(meta.get("namespace"))
            ref = str(d(isvc.get("spec")).get("modelRef") or meta["name"])
            model: Obj | None
            try:
                model = self.store.get(model_kind, name=ref, namespace=ns)
            except ApiError:
                model = None
            key = (
                str(meta.get("generation")),
                str(model["metadata"].get("generation")) if model else "",
            )
            if self._isvc_seen.get(meta["uid"]) == key and self._exists(ns, meta["name"]):
                continue
            try:
                apply(self.store, _llmkube.inference_deployment(isvc, model), manager="llmkube")
            except ApiError as err:
                log.debug("InferenceService %s/%s: %s", ns, meta["name"], err)
                continue
            self._isvc_seen[meta["uid"]] = key

    def _exists(self, ns: str, name: str) -> bool:
        try:
            self.store.get(by_kind("Deployment"), name=name, namespace=ns)
        except ApiError:
            return False
        return True
