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
from collections.abc import Callable, Mapping

from gpushift.common import Obj, by_kind, lookup
from gpushift.common import as_dict as d
from gpushift_twin.apiserver import ApiError, Store
from gpushift_twin.charts import _gpu_operator, _llmkube
from gpushift_twin.charts._accounts import service_accounts
from gpushift_twin.charts._common import get
from gpushift_twin.charts._writes import apply, delete, served

log = logging.getLogger("gpushift_twin.charts")
_GPU_PRESENT = "nvidia.com/gpu.present"
_POLICY = ("nvidia.com/v1", "ClusterPolicy")
_GPU_CLUSTER = ("nvidia.com/v1alpha1", "GPUCluster")
#: controllers/state_manager.go gpuStateLabels[container]: every operand's deploy label.
_DEPLOY_LABELS = (
    "nvidia.com/gpu.deploy.driver",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.container-toolkit",
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.node-status-exporter",
    "nvidia.com/gpu.deploy.operator-validator",
)
_MIG_MANAGER = "nvidia.com/gpu.deploy.mig-manager"
#: state_manager.go gpuNodeLabels: NFD's labels for an NVIDIA PCI device.
_NFD_GPU = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
_OPERANDS = "nvidia.com/gpu.deploy.operands"
_DRIVER = "nvidia.com/gpu.deploy.driver"


def gpu_node_labels(
    labels: Mapping[str, str], deploy: tuple[str, ...] = _DEPLOY_LABELS
) -> dict[str, str]:
    """A node's labels after the operator's ``labelGPUNodes`` pass (state_manager.go).

    NFD's NVIDIA PCI labels make a node ``nvidia.com/gpu.present=true``; a node so labelled
    that no longer has them becomes ``false`` and loses every deploy label. On a GPU node
    ``nvidia.com/gpu.deploy.operands=false`` removes the deploy labels; otherwise the missing
    ones are added as ``true`` and a value already there (an admin's ``false``) is kept.
    """
    out = dict(labels)
    has_gpu = any(out.get(k) == "true" for k in _NFD_GPU)
    present = out.get(_GPU_PRESENT) == "true"
    state = (*_DEPLOY_LABELS, *deploy, _MIG_MANAGER)
    if not present and has_gpu:
        out[_GPU_PRESENT] = "true"
    elif present and not has_gpu:
        out[_GPU_PRESENT] = "false"
        for k in state:
            out.pop(k, None)
    if out.get(_GPU_PRESENT) == "true":
        if out.get(_OPERANDS) == "false":
            for k in state:
                out.pop(k, None)
        else:
            for k in deploy:
                out.setdefault(k, "true")
            if out.get("nvidia.com/mig.capable") == "true":
                out.setdefault(_MIG_MANAGER, "true")
    return out


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
        dues = [self._cluster_policies(), self._gpu_clusters()]
        self._inference_services()
        found = [x for x in dues if x is not None]
        return min(found) if found else None

    # -- gpu-operator --

    def _label_nodes(
        self, deploy: tuple[str, ...] = _DEPLOY_LABELS, *, host_driver: bool = False
    ) -> None:
        """The operator's node labelling (:func:`gpu_node_labels`). With ``host_driver`` the
        driver state is on: the twin's GPU nodes carry their driver on the host, so the driver
        DaemonSet's k8s-driver-manager labels each ``nvidia.com/gpu.deploy.driver=pre-installed``
        and leaves it, as it does on such a node."""
        node_kind = by_kind("Node")
        for node in self.store.list(node_kind).objects:
            labels = d(node["metadata"].get("labels"))
            want = gpu_node_labels(labels, deploy)
            if host_driver and want.get(_DRIVER) == "true":
                want[_DRIVER] = "pre-installed"
            if want == labels:
                continue

            def put(cur: Obj, want: dict[str, str] = want) -> Obj:
                cur["metadata"]["labels"] = want
                return cur

            self.store.update(
                node_kind, name=node["metadata"]["name"], mutate=put, manager="gpu-operator"
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
        clusters = [
            c
            for c in self._live(_GPU_CLUSTER)
            if _gpu_operator.GPU_CLUSTER_FINALIZER in (c["metadata"].get("finalizers") or [])
        ]
        if clusters:
            # One of the two CRs: the ClusterPolicy waits while a GPUCluster the operator took
            # on (its finalizer set) exists, deleting ones included, so until its operands are
            # gone. A GPUCluster refused beside this ClusterPolicy has no finalizer.
            self._set_state(policy, "notReady", namespace=ns)
            self._policy_seen[meta["uid"]] = (int(meta.get("generation", 1)), self.now() + 5.0)
            return
        spec = d(policy.get("spec"))
        self._label_nodes(host_driver=get(spec, "driver", "enabled", default=True) is not False)
        monitors = lookup("monitoring.coreos.com/v1", "ServiceMonitor")
        want, gone = _gpu_operator.operands(
            namespace=ns,
            spec=spec,
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

    # -- gpu-operator: GPUCluster --

    def _live(self, gvk: tuple[str, str], *, deleting: bool = True) -> list[Obj]:
        """The objects of a kind, if served; those being deleted only with ``deleting``."""
        kind = lookup(*gvk)
        if kind is None or not served(self.store, kind):
            return []
        return [
            o
            for o in self.store.list(kind).objects
            if deleting or not o["metadata"].get("deletionTimestamp")
        ]

    def _gpu_clusters(self) -> float | None:
        kind = lookup(*_GPU_CLUSTER)
        if kind is None or not served(self.store, kind):
            return None
        due: float | None = None
        now = self.now()
        for cluster in self.store.list(kind).objects:
            meta = cluster["metadata"]
            gen = int(meta.get("generation", 1))
            seen = self._policy_seen.get(meta["uid"])
            if seen is None or seen[0] != gen:
                seen = (gen, now + self.delay)
                self._policy_seen[meta["uid"]] = seen
            if seen[1] > now:
                due = seen[1] if due is None else min(due, seen[1])
                continue
            try:
                again = self._reconcile_gpu_cluster(cluster)
            except ApiError as err:
                log.debug("GPUCluster %s: %s", meta["name"], err)
                again = self.delay
            self._policy_seen[meta["uid"]] = (gen, self.now() + again)
            due = self.now() + again if due is None else min(due, self.now() + again)
        return due

    def _reconcile_gpu_cluster(self, cluster: Obj) -> float:
        """One reconcile of a GPUCluster; the virtual seconds until the next."""
        meta = cluster["metadata"]
        ns = str(d(meta.get("annotations")).get("meta.helm.sh/release-namespace") or "gpu-operator")
        if meta.get("deletionTimestamp"):
            # The finalizer the chart's pre-delete hook waits on: removed once the operands
            # are gone (field-2026.md §3).
            if self._teardown(ns):
                self._finalize(cluster)
                return 60.0
            self._set_cluster_status(cluster, "notReady", "Deleting", "removing the DRA stack")
            return 5.0
        policies = [p["metadata"]["name"] for p in self._live(_POLICY)]
        taken = _gpu_operator.GPU_CLUSTER_FINALIZER in (meta.get("finalizers") or [])
        if policies and not taken:
            # NVIDIA/gpu-operator#2696: the two CRs exclude each other; the refusal is in status.
            self._set_cluster_status(
                cluster,
                "notReady",
                "ClusterPolicyExists",
                f"ClusterPolicy {', '.join(policies)} exists: a cluster has either a ClusterPolicy "
                "or a GPUCluster, not both",
            )
            return 5.0
        if not taken:

            def add(cur: Obj) -> Obj:
                fins = list(cur["metadata"].get("finalizers") or [])
                cur["metadata"]["finalizers"] = [*fins, _gpu_operator.GPU_CLUSTER_FINALIZER]
                return cur

            self.store.update(
                by_kind("GPUCluster"), name=meta["name"], mutate=add, manager="gpu-operator"
            )
        self._label_nodes(_gpu_operator.GPU_CLUSTER_DEPLOY_LABELS)
        want = _gpu_operator.gpu_cluster_operands(namespace=ns, spec=d(cluster.get("spec")))
        owner = {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "GPUCluster",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        for obj in want:
            obj["metadata"]["ownerReferences"] = [owner]
            apply(self.store, obj, manager="gpu-operator")
        ready = all(self._ds_ready(o) for o in want if o["kind"] == "DaemonSet")
        if ready:
            self._set_cluster_status(cluster, "ready", "Reconciled", "the DRA stack is ready")
            return 60.0
        self._set_cluster_status(cluster, "notReady", "OperandsNotReady", "operands starting")
        return 5.0

    def _teardown(self, ns: str) -> bool:
        """Delete the GPUCluster's operands; whether they and their pods are gone."""
        gone = True
        for kind_name, name, namespaced in _gpu_operator.gpu_cluster_operand_names():
            kind = by_kind(kind_name)
            where = ns if namespaced else None
            try:
                self.store.get(kind, name=name, namespace=where)
            except ApiError:
                continue
            gone = False
            delete(self.store, kind, name=name, namespace=where)
        names = {n for k, n, _ in _gpu_operator.gpu_cluster_operand_names() if k == "DaemonSet"}
        for pod in self.store.list(by_kind("Pod"), namespace=ns).objects:
            owners = pod["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "DaemonSet" and o.get("name") in names for o in owners):
                gone = False
        return gone

    def _finalize(self, cluster: Obj) -> None:
        def drop(cur: Obj) -> Obj:
            fins = [
                f
                for f in cur["metadata"].get("finalizers") or []
                if f != _gpu_operator.GPU_CLUSTER_FINALIZER
            ]
            cur["metadata"]["finalizers"] = fins
            return cur

        with contextlib.suppress(ApiError):
            self.store.update(
                by_kind("GPUCluster"),
                name=cluster["metadata"]["name"],
                mutate=drop,
                manager="gpu-operator",
            )

    def _set_cluster_status(self, cluster: Obj, state: str, reason: str, message: str) -> None:
        status = d(cluster.get("status"))
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        if status.get("state") == state and ready and ready[0].get("reason") == reason:
            return
        condition = {
            "type": "Ready",
            "status": "True" if state == "ready" else "False",
            "reason": reason,
            "message": message,
        }

        def put(cur: Obj) -> Obj:
            cur["status"] = {**d(cur.get("status")), "state": state, "conditions": [condition]}
            return cur

        with contextlib.suppress(ApiError):
            self.store.update(
                by_kind("GPUCluster"),
                name=cluster["metadata"]["name"],
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
