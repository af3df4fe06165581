"""The cluster's node side acting through the API (``ApiStore``), here against the twin's own
API server over HTTP: what ``twin serve --control-plane upstream`` runs against
kube-apiserver, without the upstream binaries. With a remote store the twin's scheduler and
controllers are off, so the test binds its pod itself, as kube-scheduler would."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from gpushift import kube
from gpushift._kinds import by_kind
from gpushift_twin.apiserver import ApiError, ApiStore, Twin, run_twin
from gpushift_twin.cluster import Cluster, Delays, from_text

POD = by_kind("Pod")
NODE = by_kind("Node")
LEASE = by_kind("Lease")


@pytest.fixture
def remote_cluster() -> Iterator[tuple[Twin, Cluster]]:
    with run_twin() as twin:
        client = kube.connect(kubeconfig=twin.kubeconfig)
        store = ApiStore(client)
        cluster = Cluster(
            store,
            from_text("nodes:\n- {name: n1, gpus: [{product: NVIDIA L4}]}\n"),
            time_scale=1.0,
            delays=Delays(pod_start=0.1),
        )
        try:
            with cluster:
                yield twin, cluster
        finally:
            store.close()
            client.close()


def _until(what: str, check: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _phase(twin: Twin, name: str) -> str | None:
    try:
        return twin.store.get(POD, name=name, namespace="default").get("status", {}).get("phase")
    except ApiError:
        return None


def test_the_kubelet_registers_renews_its_lease_and_runs_a_bound_pod(
    remote_cluster: tuple[Twin, Cluster],
) -> None:
    twin, cluster = remote_cluster
    assert cluster.remote
    node = twin.store.get(NODE, name="n1")
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True"
    _until(
        "the node's Lease",
        lambda: twin.store.list(LEASE, namespace="kube-node-lease").objects,
    )
    lease = twin.store.get(LEASE, name="n1", namespace="kube-node-lease")
    assert lease["spec"]["holderIdentity"] == "n1"
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]

    twin.store.create(
        POD,
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    _until("the pod Running", lambda: _phase(twin, "p") == "Running")
    # The twin's own scheduler (off here) would have bound it; nothing else touched it.
    assert not twin.store.get(POD, name="p", namespace="default")["metadata"].get("finalizers")


def test_an_unbound_pod_waits_for_a_scheduler_that_is_not_the_twins(
    remote_cluster: tuple[Twin, Cluster],
) -> None:
    twin, _ = remote_cluster
    twin.store.create(
        POD,
        {
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    time.sleep(1.0)
    pod = twin.store.get(POD, name="q", namespace="default")
    assert not pod["spec"].get("nodeName")
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}  # as created
