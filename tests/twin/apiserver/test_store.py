"""The store's write semantics, checked against what kube-apiserver does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpushift._kinds import by_kind, lookup
from gpushift_twin import ApiError, Event, Store

DEP = by_kind("Deployment")
RS = by_kind("ReplicaSet")
POD = by_kind("Pod")
CM = by_kind("ConfigMap")
NS = by_kind("Namespace")
NODE = by_kind("Node")


def _dep(name: str = "web", replicas: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"replicas": replicas}}


def _owned(kind_name: str, name: str, owner: dict[str, Any]) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    return {"metadata": {"name": name, "namespace": "default", "ownerReferences": [ref]}}


@pytest.fixture
def store() -> Store:
    return Store(seed=7)


def test_resource_versions_are_global_and_increase(store: Store) -> None:
    a = store.create(CM, {"metadata": {"name": "a", "namespace": "default"}})
    b = store.create(DEP, _dep())
    c = store.update(CM, name="a", namespace="default", mutate=lambda o: {**o, "data": {"k": "v"}})
    rvs = [int(x["metadata"]["resourceVersion"]) for x in (a, b, c)]
    assert rvs[0] < rvs[1] < rvs[2]
    assert rvs[1] == rvs[0] + 1 and rvs[2] == rvs[1] + 1


def test_create_stamps_identity_and_generation_one(store: Store) -> None:
    d = store.create(DEP, _dep())
    meta = d["metadata"]
    assert meta["generation"] == 1
    assert len(meta["uid"]) == 36 and meta["uid"][14] == "4"
    assert meta["creationTimestamp"].endswith("Z")
    assert d["apiVersion"] == "apps/v1" and d["kind"] == "Deployment"


def test_generation_follows_spec_not_metadata_or_status(store: Store) -> None:
    store.create(DEP, _dep())
    labelled = store.update(
        DEP,
        name="web",
        namespace="default",
        mutate=lambda o: {**o, "metadata": {**o["metadata"], "labels": {"a": "b"}}},
    )
    assert labelled["metadata"]["generation"] == 1
    status = store.update(
        DEP,
        name="web",
        namespace="default",
        subresource="status",
        mutate=lambda o: {**o, "status": {"replicas": 1}},
    )
    assert status["metadata"]["generation"] == 1 and status["status"] == {"replicas": 1}
    scaled = store.update(
        DEP, name="web", namespace="default", mutate=lambda o: {**o, "spec": {"replicas": 3}}
    )
    assert scaled["metadata"]["generation"] == 2


def test_main_resource_cannot_write_status_and_status_cannot_write_spec(store: Store) -> None:
    store.create(DEP, _dep())
    out = store.update(
        DEP, name="web", namespace="default", mutate=lambda o: {**o, "status": {"replicas": 9}}
    )
    assert "status" not in out
    out = store.update(
        DEP,
        name="web",
        namespace="default",
        subresource="status",
        mutate=lambda o: {**o, "spec": {"replicas": 9}, "status": {"replicas": 2}},
    )
    assert out["spec"] == {"replicas": 1} and out["status"] == {"replicas": 2}


def test_stale_resource_version_is_a_conflict_with_upstream_wording(store: Store) -> None:
    old = store.create(DEP, _dep())
    store.update(
        DEP, name="web", namespace="default", mutate=lambda o: {**o, "spec": {"replicas": 2}}
    )
    with pytest.raises(ApiError) as err:
        store.replace(DEP, old, name="web", namespace="default")
    assert err.value.code == 409 and err.value.reason == "Conflict"
    assert err.value.message == (
        'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_already_exists_and_not_found_bodies(store: Store) -> None:
    store.create(CM, {"metadata": {"name": "a", "namespace": "default"}})
    with pytest.raises(ApiError) as err:
        store.create(CM, {"metadata": {"name": "a", "namespace": "default"}})
    assert err.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "a" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "a", "kind": "configmaps"},
        "code": 409,
    }
    with pytest.raises(ApiError) as missing:
        store.get(DEP, name="nope", namespace="default")
    assert missing.value.code == 404
    assert missing.value.message == 'deployments.apps "nope" not found'
    assert missing.value.status()["details"] == {
        "name": "nope",
        "kind": "deployments",
        "group": "apps",
    }


def test_create_into_a_missing_namespace_is_not_found(store: Store) -> None:
    with pytest.raises(ApiError) as err:
        store.create(CM, {"metadata": {"name": "a", "namespace": "ghost"}})
    assert err.value.code == 404 and err.value.message == 'namespaces "ghost" not found'


def test_name_is_required_and_generate_name_appends_five_characters(store: Store) -> None:
    with pytest.raises(ApiError) as err:
        store.create(CM, {"metadata": {"namespace": "default"}})
    assert err.value.code == 422
    assert err.value.message == (
        'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    made = store.create(CM, {"metadata": {"generateName": "job-", "namespace": "default"}})
    name = made["metadata"]["name"]
    assert name.startswith("job-") and len(name) == len("job-") + 5


def test_dry_run_stores_nothing_and_issues_no_version(store: Store) -> None:
    before = store.resource_version
    out = store.create(CM, {"metadata": {"name": "a", "namespace": "default"}}, dry_run=True)
    assert out["metadata"]["name"] == "a" and "resourceVersion" not in out["metadata"]
    assert store.resource_version == before
    with pytest.raises(ApiError):
        store.get(CM, name="a", namespace="default")


def test_finalizers_hold_deletion_until_removed(store: Store) -> None:
    store.create(CM, {"metadata": {"name": "a", "namespace": "default", "finalizers": ["x/y"]}})
    marked = store.delete(CM, name="a", namespace="default")
    assert marked["metadata"]["deletionTimestamp"]
    assert store.get(CM, name="a", namespace="default")["metadata"]["finalizers"] == ["x/y"]
    store.update(
        CM,
        name="a",
        namespace="default",
        mutate=lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}},
    )
    with pytest.raises(ApiError):
        store.get(CM, name="a", namespace="default")


def test_background_deletion_collects_dependents_transitively(store: Store) -> None:
    d = store.create(DEP, _dep())
    rs = store.create(RS, _owned("ReplicaSet", "web-1", d))
    store.create(POD, _owned("Pod", "web-1-a", rs))
    store.create(POD, {"metadata": {"name": "lonely", "namespace": "default"}})
    store.delete(DEP, name="web", namespace="default", propagation="Background")
    assert store.objects(RS) == []
    assert [p["metadata"]["name"] for p in store.objects(POD)] == ["lonely"]


def test_foreground_deletion_waits_for_a_finalized_dependent(store: Store) -> None:
    d = store.create(DEP, _dep())
    rs = _owned("ReplicaSet", "web-1", d)
    rs["metadata"]["finalizers"] = ["hold"]
    store.create(RS, rs)
    store.delete(DEP, name="web", namespace="default", propagation="Foreground")
    owner = store.get(DEP, name="web", namespace="default")
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert store.get(RS, name="web-1", namespace="default")["metadata"]["deletionTimestamp"]
    store.update(
        RS,
        name="web-1",
        namespace="default",
        mutate=lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}},
    )
    assert store.objects(RS) == [] and store.objects(DEP) == []


def test_orphan_deletion_strips_owner_references(store: Store) -> None:
    d = store.create(DEP, _dep())
    store.create(RS, _owned("ReplicaSet", "web-1", d))
    store.delete(DEP, name="web", namespace="default", propagation="Orphan")
    assert store.objects(DEP) == []
    (rs,) = store.objects(RS)
    assert "ownerReferences" not in rs["metadata"]


def test_deleting_a_namespace_deletes_its_content(store: Store) -> None:
    store.create(NS, {"metadata": {"name": "team"}})
    store.create(CM, {"metadata": {"name": "a", "namespace": "team"}})
    store.delete(NS, name="team")
    assert store.objects(CM, namespace="team") == []
    assert "team" not in [n["metadata"]["name"] for n in store.objects(NS)]


def test_watch_replays_from_a_version_then_streams(store: Store) -> None:
    first = store.create(CM, {"metadata": {"name": "a", "namespace": "default"}})
    store.create(CM, {"metadata": {"name": "b", "namespace": "default"}})
    seen: list[tuple[str, str]] = []

    def deliver(e: Event) -> None:
        seen.append((e.type, e.obj["metadata"]["name"]))

    watcher = store.watch(
        CM, deliver=deliver, resource_version=first["metadata"]["resourceVersion"]
    )
    store.delete(CM, name="a", namespace="default")
    watcher.cancel()
    store.create(CM, {"metadata": {"name": "c", "namespace": "default"}})
    assert seen == [("ADDED", "b"), ("DELETED", "a")]


def test_watch_from_a_version_older_than_the_window_is_gone() -> None:
    store = Store(window=3, namespaces=("default",))
    for i in range(6):
        store.create(CM, {"metadata": {"name": f"c{i}", "namespace": "default"}})
    with pytest.raises(ApiError) as err:
        store.watch(CM, deliver=lambda e: None, resource_version="2")
    assert err.value.code == 410 and err.value.reason == "Expired"
    assert err.value.message.startswith("too old resource version: 2 (")


def test_pagination_walks_every_object_once(store: Store) -> None:
    for i in range(7):
        store.create(CM, {"metadata": {"name": f"c{i}", "namespace": "default"}})
    names: list[str] = []
    token = ""
    pages = 0
    while True:
        page = store.list(CM, limit=3, continue_token=token)
        names += [o["metadata"]["name"] for o in page.objects]
        pages += 1
        token = page.continue_token
        if not token:
            break
    assert pages == 3 and names == [f"c{i}" for i in range(7)]


def test_protected_namespaces_cannot_be_deleted(store: Store) -> None:
    with pytest.raises(ApiError) as err:
        store.delete(NS, name="default")
    assert err.value.code == 403
    assert (
        err.value.message == 'namespaces "default" is forbidden: this namespace may not be deleted'
    )


def test_pod_status_starts_pending_with_qos_class(store: Store) -> None:
    pod = store.create(
        POD,
        {
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "containers": [
                    {"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}
                ]
            },
            "status": {"phase": "Running"},
        },
    )
    # Limits only: requests default to limits, so the pod is Guaranteed.
    assert pod["status"] == {"phase": "Pending", "qosClass": "Guaranteed"}


def test_node_status_is_kept_on_create(store: Store) -> None:
    node = store.create(NODE, {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4"}}})
    assert node["status"] == {"capacity": {"cpu": "4"}}


def test_readers_get_copies(store: Store) -> None:
    store.create(CM, {"metadata": {"name": "a", "namespace": "default"}, "data": {"k": "v"}})
    got = store.get(CM, name="a", namespace="default")
    got["data"]["k"] = "changed"
    assert store.get(CM, name="a", namespace="default")["data"] == {"k": "v"}


def test_event_kinds_from_two_groups_are_separate(store: Store) -> None:
    core = by_kind("Event")
    new = lookup("events.k8s.io/v1", "Event")
    assert new is not None
    store.create(core, {"metadata": {"name": "e", "namespace": "default"}})
    assert store.objects(new) == []


def test_selector_watch_sees_objects_enter_and_leave(store: Store) -> None:
    from gpushift_twin.apiserver import compile_fields, parse_fields

    seen: list[tuple[str, str]] = []
    on_node = compile_fields(parse_fields("spec.nodeName=n1"), POD)
    store.watch(
        POD, deliver=lambda e: seen.append((e.type, e.obj["metadata"]["name"])), fields=on_node
    )
    store.create(POD, {"metadata": {"name": "p", "namespace": "default"}, "spec": {}})

    def bind(node: str) -> None:
        store.update(
            POD, name="p", namespace="default", mutate=lambda o: {**o, "spec": {"nodeName": node}}
        )

    bind("n1")  # starts matching: ADDED
    store.update(
        POD,
        name="p",
        namespace="default",
        mutate=lambda o: {**o, "metadata": {**o["metadata"], "labels": {"a": "b"}}},
    )
    bind("n2")  # stops matching: DELETED
    bind("n3")  # still not matching: nothing
    assert seen == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


_ops = st.lists(
    st.tuples(
        st.sampled_from(["create", "update", "delete", "finalize"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 3),
    ),
    max_size=25,
)


@given(ops=_ops)
def test_a_watch_replays_into_the_stored_state(ops: list[tuple[str, str, int]]) -> None:
    store = Store(namespaces=("default",))
    seen: dict[str, dict[str, Any]] = {}
    versions: list[int] = []

    def deliver(e: Event) -> None:
        versions.append(e.rv)
        if e.type == "DELETED":
            seen.pop(e.obj["metadata"]["name"], None)
        else:
            seen[e.obj["metadata"]["name"]] = e.obj

    store.watch(CM, deliver=deliver, resource_version="0")
    for op, name, value in ops:
        try:
            if op == "create":
                meta: dict[str, Any] = {"name": name, "namespace": "default"}
                if value == 3:
                    meta["finalizers"] = ["hold"]
                store.create(CM, {"metadata": meta, "data": {"v": str(value)}})
            elif op == "update":
                store.update(
                    CM,
                    name=name,
                    namespace="default",
                    mutate=lambda o, v=value: {**o, "data": {"v": str(v)}},
                )
            elif op == "delete":
                store.delete(CM, name=name, namespace="default")
            else:
                store.update(
                    CM,
                    name=name,
                    namespace="default",
                    mutate=lambda o: {**o, "metadata": {**o["metadata"], "finalizers": []}},
                )
        except ApiError as err:
            assert err.code in (404, 409)
    assert versions == sorted(set(versions))
    stored = {o["metadata"]["name"]: o for o in store.objects(CM)}
    assert seen == stored


def test_selector_of_a_deployment_is_immutable(store: Store) -> None:
    dep = _dep()
    dep["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    store.create(DEP, dep)
    with pytest.raises(ApiError) as err:
        store.update(
            DEP,
            name="web",
            namespace="default",
            mutate=lambda o: {
                **o,
                "spec": {**o["spec"], "selector": {"matchLabels": {"app": "x"}}},
            },
        )
    assert err.value.code == 422
    assert err.value.message == (
        'Deployment.apps "web" is invalid: spec.selector: Invalid value: '
        '{"matchLabels":{"app":"x"}}: field is immutable'
    )
    assert err.value.status()["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: {"matchLabels":{"app":"x"}}: field is immutable',
            "field": "spec.selector",
        }
    ]


def test_resource_claim_spec_is_immutable_but_status_is_not(store: Store) -> None:
    claim = lookup("resource.k8s.io/v1", "ResourceClaim")
    assert claim is not None
    spec = {
        "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
    }
    store.create(claim, {"metadata": {"name": "c", "namespace": "default"}, "spec": spec})
    with pytest.raises(ApiError) as err:
        store.update(claim, name="c", namespace="default", mutate=lambda o: {**o, "spec": {}})
    assert err.value.message == (
        'ResourceClaim.resource.k8s.io "c" is invalid: spec: Invalid value: {}: field is immutable'
    )
    out = store.update(
        claim,
        name="c",
        namespace="default",
        subresource="status",
        mutate=lambda o: {**o, "status": {"allocation": {}}},
    )
    assert out["status"] == {"allocation": {}}


def test_an_immutable_configmap_keeps_its_data(store: Store) -> None:
    store.create(
        CM,
        {"metadata": {"name": "i", "namespace": "default"}, "data": {"a": "1"}, "immutable": True},
    )
    with pytest.raises(ApiError) as err:
        store.update(CM, name="i", namespace="default", mutate=lambda o: {**o, "data": {"a": "2"}})
    assert err.value.message == (
        'ConfigMap "i" is invalid: data: Forbidden: field is immutable when `immutable` is set'
    )
    labelled = store.update(
        CM,
        name="i",
        namespace="default",
        mutate=lambda o: {**o, "metadata": {**o["metadata"], "labels": {"x": "y"}}},
    )
    assert labelled["metadata"]["labels"] == {"x": "y"}


# --- shared writes: no copies in or out, the same stored result ---------------------------------


def _gpu_pod(name: str, limit: Any) -> dict[str, Any]:
    container = {"name": "app", "image": "x", "resources": {"limits": {"nvidia.com/gpu": limit}}}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": [container]}}


def test_shared_create_returns_the_stored_object_equal_to_a_copy() -> None:
    a, b = Store(seed=3), Store(seed=3)
    copied = a.create(POD, _gpu_pod("p", 2))
    shared = b.create(POD, _gpu_pod("p", 2), shared=True)
    assert shared == copied
    assert shared is b.list(POD).objects[0]  # not a copy
    assert copied is not a.list(POD).objects[0]
    # The quantity was canonicalised on the way in either way: an int 2 is stored as "2".
    assert shared["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert a.get_raw(POD, name="p", namespace="default") == b.get_raw(
        POD, name="p", namespace="default"
    )


def test_shared_update_hands_mutate_the_stored_object_and_stores_the_same_result() -> None:
    a, b = Store(seed=3), Store(seed=3)
    for s in (a, b):
        s.create(POD, _gpu_pod("p", "1"))
    seen: list[Any] = []

    def in_place(cur: dict[str, Any]) -> dict[str, Any]:
        cur["spec"]["nodeName"] = "n1"
        return cur

    def around(cur: dict[str, Any]) -> dict[str, Any]:
        seen.append(cur)
        return {**cur, "spec": {**cur["spec"], "nodeName": "n1"}}

    before = b.list(POD).objects[0]
    out_a = a.update(POD, name="p", namespace="default", mutate=in_place)
    out_b = b.update(POD, name="p", namespace="default", mutate=around, shared=True)
    assert seen == [before] and seen[0] is before  # the stored object, not a copy
    assert "nodeName" not in before["spec"]  # left as it was
    assert out_b == out_a
    assert out_b is b.list(POD).objects[0]
    assert a.get_raw(POD, name="p", namespace="default") == b.get_raw(
        POD, name="p", namespace="default"
    )


def test_shared_update_still_canonicalises_a_changed_quantity_beside_shared_parts() -> None:
    store = Store(seed=3)
    store.create(
        POD,
        {
            **_gpu_pod("p", "1"),
            "spec": {
                "containers": [
                    {"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                    {"name": "b", "image": "x", "resources": {"limits": {"cpu": "1"}}},
                ]
            },
        },
    )

    def second_to_half(cur: dict[str, Any]) -> dict[str, Any]:
        first, second = cur["spec"]["containers"]
        # The first container is kept as the very stored dict; the second gets 0.5 cpu.
        changed = {**second, "resources": {"limits": {"cpu": 0.5}}}
        return {**cur, "spec": {**cur["spec"], "containers": [first, changed]}}

    out = store.update(POD, name="p", namespace="default", mutate=second_to_half, shared=True)
    limits = [c["resources"]["limits"] for c in out["spec"]["containers"]]
    assert limits == [{"nvidia.com/gpu": "1"}, {"cpu": "500m"}]


def test_shared_update_that_changes_nothing_writes_nothing() -> None:
    store = Store(seed=3)
    store.create(POD, _gpu_pod("p", "1"))
    rv = store.resource_version
    out = store.update(POD, name="p", namespace="default", mutate=lambda cur: {**cur}, shared=True)
    assert store.resource_version == rv
    assert out is store.list(POD).objects[0]


@given(st.integers(min_value=0, max_value=2**32))
def test_uids_are_random_version_4_uuids_as_the_uuid_module_formats_them(seed: int) -> None:
    import random
    import uuid

    draws = random.Random(seed)
    # The store's four built-in namespaces take the first four draws, the pod the fifth.
    expected = [str(uuid.UUID(int=draws.getrandbits(128), version=4)) for _ in range(5)]
    store = Store(seed=seed)
    uids = [
        store.get(NS, name=n)["metadata"]["uid"]
        for n in ("default", "kube-system", "kube-public", "kube-node-lease")
    ]
    uids.append(store.create(POD, _gpu_pod("p", "1"))["metadata"]["uid"])
    assert uids == expected
