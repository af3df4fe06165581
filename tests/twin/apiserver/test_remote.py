"""ApiStore: the Store interface over HTTP, here against the twin's own API server, so the
informer cache, read-your-writes, conflict retries, the status subresource, graceful deletion
options and server-side apply are held to what a server answers."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gpushift import kube
from gpushift._kinds import by_kind
from gpushift_twin.apiserver import ApiError, ApiStore, Twin, run_twin

CM = by_kind("ConfigMap")
NODE = by_kind("Node")


@pytest.fixture
def twin_store() -> Iterator[tuple[Twin, ApiStore]]:
    with run_twin() as twin:
        client = kube.connect(kubeconfig=twin.kubeconfig)
        store = ApiStore(client)
        try:
            yield twin, store
        finally:
            store.close()
            client.close()


def _until(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def test_reads_come_from_a_cache_the_watch_keeps_current(
    twin_store: tuple[Twin, ApiStore],
) -> None:
    twin, store = twin_store
    assert store.list(CM, namespace="default").objects == []
    twin.store.create(CM, {"metadata": {"name": "a", "namespace": "default"}, "data": {"k": "1"}})
    _until(lambda: [o["metadata"]["name"] for o in store.list(CM).objects] == ["a"])
    before = store.changed_at(CM)
    twin.store.update(CM, name="a", namespace="default", mutate=lambda o: {**o, "data": {"k": "2"}})
    _until(lambda: store.peek(CM, name="a", namespace="default")["data"] == {"k": "2"})
    assert store.changed_at(CM) > before
    twin.store.delete(CM, name="a", namespace="default")
    _until(lambda: store.list(CM).objects == [])


def test_writes_go_to_the_server_and_are_read_back_at_once(
    twin_store: tuple[Twin, ApiStore],
) -> None:
    twin, store = twin_store
    store.list(CM)  # informed: the write's answer lands in the cache
    made = store.create(CM, {"metadata": {"name": "b"}, "data": {"x": "1"}}, namespace="default")
    assert twin.store.get(CM, name="b", namespace="default")["data"] == {"x": "1"}
    assert (
        store.peek(CM, name="b", namespace="default")["metadata"]["uid"] == made["metadata"]["uid"]
    )
    with pytest.raises(ApiError) as err:
        store.create(CM, {"metadata": {"name": "b"}}, namespace="default")
    assert err.value.code == 409


def test_a_conflict_runs_mutate_again_on_the_fresh_object(
    twin_store: tuple[Twin, ApiStore],
) -> None:
    twin, store = twin_store
    store.create(CM, {"metadata": {"name": "c"}, "data": {"n": "0"}}, namespace="default")
    calls = []

    def bump(obj: dict) -> dict:  # type: ignore[type-arg]
        calls.append(obj["data"]["n"])
        if len(calls) == 1:  # someone else writes in between
            twin.store.update(
                CM, name="c", namespace="default", mutate=lambda o: {**o, "data": {"n": "5"}}
            )
        return {**obj, "data": {"n": str(int(obj["data"]["n"]) + 1)}}

    out = store.update(CM, name="c", namespace="default", mutate=bump)
    assert calls == ["0", "5"]
    assert out["data"] == {"n": "6"}
    assert twin.store.get(CM, name="c", namespace="default")["data"] == {"n": "6"}


def test_status_goes_through_the_status_subresource(twin_store: tuple[Twin, ApiStore]) -> None:
    twin, store = twin_store
    store.list(NODE)
    store.create(NODE, {"metadata": {"name": "n1"}})

    def ready(obj: dict) -> dict:  # type: ignore[type-arg]
        return {**obj, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    # The main resource ignores status, as kube-apiserver does; the subresource writes it.
    store.update(NODE, name="n1", mutate=ready)
    assert "conditions" not in (twin.store.get(NODE, name="n1").get("status") or {})
    store.update(NODE, name="n1", mutate=ready, subresource="status")
    assert twin.store.get(NODE, name="n1")["status"]["conditions"][0]["type"] == "Ready"
    sent = store.requests
    store.update(NODE, name="n1", mutate=ready, subresource="status")
    assert store.requests == sent  # a write that changes nothing is not sent


def test_delete_and_server_side_apply(twin_store: tuple[Twin, ApiStore]) -> None:
    twin, store = twin_store
    events: list[str] = []
    store.watch(CM, deliver=lambda e: events.append(f"{e.type} {e.obj['metadata']['name']}"))
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "d", "namespace": "default"},
        "data": {"a": "1"},
    }
    out = store.apply(CM, body, manager="kustomize-controller")
    assert out["data"] == {"a": "1"}
    managers = [
        m["manager"]
        for m in twin.store.get(CM, name="d", namespace="default")["metadata"]["managedFields"]
    ]
    assert managers == ["kustomize-controller"]
    store.delete(CM, name="d", namespace="default", grace_period_seconds=0)
    with pytest.raises(ApiError) as err:
        twin.store.get(CM, name="d", namespace="default")
    assert err.value.code == 404
    assert store.list(CM, namespace="default").objects == []
    _until(lambda: "DELETED d" in events)
    time.sleep(0.2)  # the watch's own events of d arrive after the delete: d stays gone
    assert store.list(CM, namespace="default").objects == []


def test_an_object_kept_by_a_finalizer_stays_when_the_watch_brings_its_deletion_first(
    twin_store: tuple[Twin, ApiStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race kube-apiserver showed: the watch's MODIFIED event (deletionTimestamp set) lands
    # in the cache before the DELETE's answer, with the same resourceVersion. The object is
    # still there until its finalizer goes; taking it for gone left a Flux HelmRelease
    # undeleted for good, as its controller never saw it again.
    _, store = twin_store
    store.create(
        CM,
        {"metadata": {"name": "f", "finalizers": ["finalizers.fluxcd.io"]}},
        namespace="default",
    )
    request = store._request

    def watch_first(method: str, path: str, **kw: object) -> dict:  # type: ignore[type-arg]
        out = request(method, path, **kw)  # type: ignore[arg-type]
        if method == "DELETE":
            rv = out["metadata"]["resourceVersion"]
            _until(
                lambda: (
                    store.peek(CM, name="f", namespace="default")["metadata"]["resourceVersion"]
                    == rv
                )
            )
        return out

    monkeypatch.setattr(store, "_request", watch_first)
    store.delete(CM, name="f", namespace="default", propagation="Background")
    time.sleep(0.2)
    (left,) = store.list(CM, namespace="default").objects
    assert left["metadata"]["deletionTimestamp"]
    store.update(
        CM,
        name="f",
        namespace="default",
        mutate=lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}},
    )
    _until(lambda: store.list(CM, namespace="default").objects == [])
