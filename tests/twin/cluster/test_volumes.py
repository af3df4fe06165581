"""Claims bound at once, StatefulSet claims, and the kubelet's FailedMount, through kubectl."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.twin.cluster.conftest import THREE_ONE_CARD_NODES, Driver, serve

from gpushift_twin.cluster._volumes import provisioned_volume, statefulset_claims


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    yield from serve(THREE_ONE_CARD_NODES, tmp_path_factory.mktemp("volumes"))


CLASS = """\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: ceph-block
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rook-ceph.rbd.csi.ceph.com
reclaimPolicy: Retain
"""


def _events(d: Driver, name: str, reason: str) -> list[dict[str, Any]]:
    items = d.get("events", "-n", "default", "--field-selector", f"involvedObject.name={name}")
    return [e for e in items["items"] if e["reason"] == reason]


def _phase(d: Driver, name: str) -> str:
    return str(d.get("pod", name, "-n", "default").get("status", {}).get("phase"))


def test_a_claim_is_bound_at_once_to_a_volume_of_its_size_and_class(d: Driver) -> None:
    d.apply(CLASS)
    d.apply(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: default}\n"
        "spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 5Gi}}\n"
    )
    claim = d.wait_for(
        "the claim to bind",
        lambda: (
            (c := d.get("pvc", "data", "-n", "default"))["status"].get("phase") == "Bound" and c
        ),
    )
    volume = d.get("pv", claim["spec"]["volumeName"])
    assert volume["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
    # No class on the claim: the default StorageClass is assigned, and its policy used.
    assert claim["spec"]["storageClassName"] == "ceph-block"
    assert volume["spec"]["storageClassName"] == "ceph-block"
    assert volume["spec"]["capacity"] == {"storage": "5Gi"}
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert volume["spec"]["claimRef"]["name"] == "data"
    assert volume["status"]["phase"] == "Bound"
    assert claim["status"]["capacity"] == {"storage": "5Gi"}
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert (
        volume["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"]
        == "rook-ceph.rbd.csi.ceph.com"
    )
    table = d.kubectl("get", "pvc", "data", "-n", "default").splitlines()
    assert table[0].split() == [
        "NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS", "AGE",
    ]  # fmt: skip
    assert table[1].split()[:7] == [
        "data", "Bound", volume["metadata"]["name"], "5Gi", "RWO", "ceph-block", "<unset>",
    ]  # fmt: skip
    d.kubectl("delete", "pvc", "data", "-n", "default")
    released = d.wait_for(
        "the retained volume to be Released",
        lambda: d.get("pv", volume["metadata"]["name"])["status"]["phase"] == "Released",
    )
    assert released


def test_statefulset_claim_templates_make_one_claim_per_ordinal(d: Driver) -> None:
    d.apply(
        """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: default}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres:17}]
  volumeClaimTemplates:
  - metadata: {name: pgdata}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: ceph-block
      resources: {requests: {storage: 2Gi}}
"""
    )
    d.wait_for("both replicas Running", lambda: _phase(d, "db-1") == "Running", timeout=30)
    for i in (0, 1):
        claim = d.get("pvc", f"pgdata-db-{i}", "-n", "default")
        assert claim["status"]["phase"] == "Bound"
        assert claim["metadata"]["labels"] == {"app": "db"}
        pod = d.get("pod", f"db-{i}", "-n", "default")
        assert {"name": "pgdata", "persistentVolumeClaim": {"claimName": f"pgdata-db-{i}"}} in (
            pod["spec"]["volumes"]
        )


def test_a_pod_waits_for_its_configmap_with_failed_mount_and_starts_once_it_exists(
    d: Driver,
) -> None:
    d.apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: needs-config, namespace: default}\n"
        "spec:\n  containers: [{name: app, image: busybox}]\n  volumes:\n"
        "  - {name: config, configMap: {name: app-config}}\n"
        "  - {name: extra, configMap: {name: nowhere, optional: true}}\n"
    )
    failed = d.wait_for("a FailedMount event", lambda: _events(d, "needs-config", "FailedMount"))
    assert failed[0]["message"] == (
        'MountVolume.SetUp failed for volume "config" : configmap "app-config" not found'
    )
    assert failed[0]["type"] == "Warning"
    assert failed[0]["source"]["component"] == "kubelet"
    pod = d.get("pod", "needs-config", "-n", "default")
    assert pod["status"]["phase"] == "Pending"
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == (
        "ContainerCreating"
    )
    d.apply("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config, namespace: default}\n")
    d.wait_for("the pod to start", lambda: _phase(d, "needs-config") == "Running")


def test_secret_and_claim_volumes_report_their_own_wording(d: Driver) -> None:
    d.apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: needs-secret, namespace: default}\n"
        "spec:\n  containers: [{name: app, image: busybox}]\n  volumes:\n"
        "  - {name: creds, secret: {secretName: app-creds}}\n"
        "---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: needs-claim, namespace: default}\n"
        "spec:\n  containers: [{name: app, image: busybox}]\n  volumes:\n"
        "  - {name: data, persistentVolumeClaim: {claimName: later}}\n"
    )
    secret = d.wait_for(
        "the secret's FailedMount", lambda: _events(d, "needs-secret", "FailedMount")
    )
    assert secret[0]["message"] == (
        'MountVolume.SetUp failed for volume "creds" : secret "app-creds" not found'
    )
    claim = d.wait_for("the claim's FailedMount", lambda: _events(d, "needs-claim", "FailedMount"))
    assert claim[0]["message"] == (
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], "
        "failed to process volumes=[data]: error processing PVC default/later: failed to fetch "
        'PVC from API server: persistentvolumeclaims "later" not found'
    )
    d.apply(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: later, namespace: default}\n"
        "spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: 1Gi}}\n"
    )
    d.wait_for("the claim pod to start", lambda: _phase(d, "needs-claim") == "Running")
    assert _phase(d, "needs-secret") == "Pending"


def test_provisioned_volume_and_claim_names_are_upstreams() -> None:
    claim = {
        "metadata": {"name": "c", "namespace": "n", "uid": "1234"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "3Gi"}}},
    }
    pv = provisioned_volume(claim, class_name="", storage_class=None)
    assert pv["metadata"]["name"] == "pvc-1234"
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert pv["spec"]["accessModes"] == ["ReadWriteMany"]
    sts = {
        "apiVersion": "apps/v1",
        "metadata": {"name": "web", "namespace": "n", "uid": "u"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"},
            "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {}}],
        },
    }
    (made,) = statefulset_claims(sts, 3)
    assert made["metadata"]["name"] == "www-web-3"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u"
