"""gpushift's client against the twin: the verbs, retries and the change log."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import lightkube
import pytest
from lightkube.config.kubeconfig import KubeConfig

from gpushift import kube
from gpushift._kinds import by_kind
from gpushift.kube import Kube, KubeError, ResourceRef
from gpushift_twin import FaultConfig, Twin, run_twin

CM = ResourceRef.named("ConfigMap")
DEP = ResourceRef.named("Deployment")
RS = ResourceRef.named("ReplicaSet")


def _client(twin: Twin, **kwargs: Any) -> Kube:
    config = KubeConfig.from_file(twin.kubeconfig).get()
    assert config is not None
    return Kube(lightkube.Client(config), **kwargs)


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    with run_twin(tls=True) as running:
        yield running


@pytest.fixture(scope="module")
def client(twin: Twin) -> Iterator[Kube]:
    with kube.connect(kubeconfig=twin.kubeconfig) as k:
        yield k


def _deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "app", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}
                    ]
                },
            },
        },
    }


def test_refs_come_from_the_kinds_table() -> None:
    assert ResourceRef.of(by_kind("Deployment")) == DEP
    assert (DEP.group, DEP.version, DEP.plural, DEP.namespaced) == (
        "apps",
        "v1",
        "deployments",
        True,
    )
    slices = ResourceRef.named("ResourceSlice", "resource.k8s.io/v1")
    assert slices.namespaced is False and slices.qualified == "resourceslices.resource.k8s.io"
    with pytest.raises(KeyError):
        ResourceRef.named("Widget", "example.com/v1")


def test_create_get_list_and_conflict(client: Kube) -> None:
    made = client.create(
        CM,
        {
            "metadata": {"name": "c1", "namespace": "default", "labels": {"tier": "a"}},
            "data": {"k": "v"},
        },
    )
    assert client.get(CM, name="c1", namespace="default")["data"] == {"k": "v"}
    client.create(CM, {"metadata": {"name": "c2", "namespace": "default", "labels": {"tier": "b"}}})
    assert [
        o["metadata"]["name"] for o in client.list(CM, namespace="default", labels={"tier": "a"})
    ] == ["c1"]
    client.patch(CM, name="c1", namespace="default", patch={"data": {"k": "w"}})
    with pytest.raises(KubeError) as err:
        client.replace(CM, made)
    assert err.value.code == 409 and err.value.reason == "Conflict"
    with pytest.raises(KubeError) as missing:
        client.get(CM, name="nope", namespace="default")
    assert missing.value.code == 404
    assert missing.value.message == 'configmaps "nope" not found'


def test_four_patch_types_and_scale(client: Kube) -> None:
    client.create(DEP, _deployment("p"))
    client.patch(
        DEP,
        name="p",
        namespace="default",
        type="strategic",
        patch={
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}
        },
    )
    client.patch(
        DEP,
        name="p",
        namespace="default",
        type="json",
        patch=[{"op": "add", "path": "/metadata/labels/extra", "value": "yes"}],
    )
    client.patch(DEP, name="p", namespace="default", patch={"metadata": {"labels": {"app": None}}})
    client.apply(
        DEP,
        {"metadata": {"name": "p", "namespace": "default"}, "spec": {"replicas": 3}},
        force=True,
    )
    scale = client.scale(DEP, name="p", namespace="default", replicas=5)
    assert (scale["kind"], scale["spec"]) == ("Scale", {"replicas": 5})
    dep = client.get(DEP, name="p", namespace="default")
    assert dep["spec"]["replicas"] == 5
    assert dep["metadata"]["labels"] == {"extra": "yes"}
    assert dep["spec"]["template"]["spec"]["containers"][0] == {
        "name": "app",
        "image": "nginx:2",
        "env": [{"name": "A", "value": "1"}],
    }


def test_dry_run_creates_nothing(client: Kube) -> None:
    out = client.create(CM, {"metadata": {"name": "dry", "namespace": "default"}}, dry_run=True)
    assert out["metadata"]["name"] == "dry"
    with pytest.raises(KubeError):
        client.get(CM, name="dry", namespace="default")


def test_delete_with_foreground_propagation(twin: Twin, client: Kube) -> None:
    owner = client.create(DEP, _deployment("owner"))
    ref = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    client.create(
        RS, {"metadata": {"name": "owner-1", "namespace": "default", "ownerReferences": [ref]}}
    )
    client.delete(DEP, name="owner", namespace="default", propagation="Foreground")
    assert "owner-1" not in [r["metadata"]["name"] for r in client.list(RS, namespace="default")]
    assert "owner" not in [d["metadata"]["name"] for d in client.list(DEP, namespace="default")]


def test_watch_streams_a_change_from_a_version(twin: Twin, client: Kube) -> None:
    rv = client.create(CM, {"metadata": {"name": "watched", "namespace": "default"}})["metadata"][
        "resourceVersion"
    ]
    threading.Timer(
        0.1,
        lambda: twin.store.create(
            by_kind("ConfigMap"), {"metadata": {"name": "later", "namespace": "default"}}
        ),
    ).start()
    event, obj = next(iter(client.watch(CM, namespace="default", resource_version=rv)))
    assert (event, obj["metadata"]["name"]) == ("ADDED", "later")


def test_wait_sees_a_change_made_elsewhere(twin: Twin, client: Kube) -> None:
    client.create(CM, {"metadata": {"name": "waited", "namespace": "default"}})

    def later() -> None:
        twin.store.update(
            by_kind("ConfigMap"),
            name="waited",
            namespace="default",
            mutate=lambda o: {**o, "data": {"ready": "yes"}},
        )

    timer = threading.Timer(0.2, later)
    timer.start()
    got = client.wait(
        CM,
        name="waited",
        namespace="default",
        until=lambda o: (o.get("data") or {}).get("ready") == "yes",
        timeout=10,
    )
    timer.join()
    assert got["data"] == {"ready": "yes"}
    with pytest.raises(KubeError) as err:
        client.wait(CM, name="waited", namespace="default", until=lambda o: False, timeout=1)
    assert err.value.reason == "Timeout"


def test_changes_are_logged_without_the_token(
    twin: Twin, client: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        made = client.create(CM, {"metadata": {"name": "logged", "namespace": "default"}})
        client.delete(CM, name="logged", namespace="default")
    mine = [r.getMessage() for r in caplog.records if r.name == "gpushift.kube"]
    assert mine == [
        f"created configmaps default/logged (rv {made['metadata']['resourceVersion']})",
        "deleted configmaps default/logged (Background)",
    ]
    assert all(twin.token not in r.getMessage() for r in caplog.records)


def test_retries_honour_retry_after() -> None:
    waits: list[float] = []
    faults = FaultConfig(error_rate=0.5, error_codes=(429,), retry_after=2, seed=3)
    with run_twin(tls=False, faults=faults) as faulty:
        client = _client(faulty, sleep=waits.append)
        for _ in range(10):
            client.list(CM, namespace="default")
    assert waits and set(waits) == {2.0}
    assert client.attempts == 10 + len(waits)


def test_retries_back_off_exponentially_without_retry_after() -> None:
    waits: list[float] = []
    faults = FaultConfig(error_rate=0.6, error_codes=(500,), seed=5)
    with run_twin(tls=False, faults=faults) as faulty:
        client = _client(faulty, sleep=waits.append, backoff=0.1, retries=10)
        for _ in range(10):
            client.create(CM, {"metadata": {"generateName": "r-", "namespace": "default"}})
        assert len(client.list(CM, namespace="default")) >= 10
    # Each call's waits double from 0.1: 0.1, 0.2, 0.4, ...
    assert waits and all(w in (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4) for w in waits)
    assert 0.1 in waits


def test_refusals_are_not_retried() -> None:
    with run_twin(tls=False) as plain:
        client = _client(plain, sleep=lambda s: None)
        with pytest.raises(KubeError):
            client.get(CM, name="absent", namespace="default")
        assert client.attempts == 1


def test_export_lists_every_object(client: Kube) -> None:
    doc = kube.export_all(client)
    assert doc["kind"] == "List"
    names = {(o["kind"], o["metadata"]["name"]) for o in doc["items"]}
    assert ("Namespace", "default") in names and ("ConfigMap", "c1") in names
    assert all("resourceVersion" not in o["metadata"] for o in doc["items"])


def test_list_in_chunks_walks_continue_tokens(twin: Twin, client: Kube) -> None:
    twin.store.create(by_kind("Namespace"), {"metadata": {"name": "chunks"}})
    for i in range(5):
        client.create(CM, {"metadata": {"name": f"k{i}", "namespace": "chunks"}})
    before = twin.server.requests
    names = [o["metadata"]["name"] for o in client.list(CM, namespace="chunks", chunk_size=2)]
    assert names == ["k0", "k1", "k2", "k3", "k4"]
    assert twin.server.requests - before == 3  # pages of 2, 2 and 1


def test_watch_from_a_version_out_of_the_window_is_410() -> None:
    from gpushift_twin import new_store

    with run_twin(store=new_store(window=3)) as small:
        client = kube.connect(kubeconfig=small.kubeconfig)
        first = client.create(CM, {"metadata": {"name": "c0", "namespace": "default"}})
        for i in range(1, 8):
            client.create(CM, {"metadata": {"name": f"c{i}", "namespace": "default"}})
        with pytest.raises(KubeError) as err:
            next(iter(client.watch(CM, resource_version=first["metadata"]["resourceVersion"])))
        assert err.value.code == 410
        items, version = client.list_at(CM, namespace="default")
        assert len(items) == 8 and version
        client.close()


def test_raw_paths_retry_throttling_and_server_errors_like_every_verb() -> None:
    # /version and the discovery paths go around lightkube; a 503 there once ended a cutover.
    waits: list[float] = []
    faults = FaultConfig(error_rate=0.5, error_codes=(503,), retry_after=3, seed=11)
    with run_twin(tls=False, faults=faults) as faulty:
        client = _client(faulty, sleep=waits.append, retries=20)
        for _ in range(10):
            assert client.get_path("/version")["gitVersion"].startswith("v1.")
            assert client.get_path("/apis/resource.k8s.io/v1")["kind"] == "APIResourceList"
    assert waits and set(waits) == {3.0}
    assert client.attempts == 20 + len(waits)


def test_raw_path_not_found_is_not_retried(twin: Twin) -> None:
    waits: list[float] = []
    client = _client(twin, sleep=waits.append)
    with pytest.raises(KubeError) as caught:
        client.get_path("/apis/nothing.example.com/v1")
    assert caught.value.code == 404 and waits == [] and client.attempts == 1
