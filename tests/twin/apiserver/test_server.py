"""The twin's HTTP API: discovery, Status bodies, subresources, watch and faults."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from gpushift._kinds import by_kind
from gpushift.twin import FaultConfig, Store, Twin, run_twin

KUBECTL_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    with run_twin(tls=False, bookmark_interval=0.2) as running:
        yield running


def call(
    twin: Twin,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    token: str | None = "",
    content_type: str = "application/json",
) -> tuple[int, dict[str, str], Any]:
    url = urlsplit(twin.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token or twin.token}"
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        sent["Content-Type"] = content_type
    conn.request(method, path, body=data, headers=sent)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    parsed = json.loads(raw) if raw and raw[:1] in b"{[" else raw.decode()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed


def test_version_names_the_release_served(twin: Twin) -> None:
    status, _, body = call(twin, "GET", "/version")
    assert status == 200
    assert (body["major"], body["minor"], body["gitVersion"]) == ("1", "37", "v1.37.0")


def test_aggregated_discovery_when_asked_as_kubectl_asks(twin: Twin) -> None:
    status, headers, body = call(twin, "GET", "/apis", headers={"Accept": KUBECTL_DISCOVERY})
    assert status == 200
    assert headers["content-type"] == (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    assert body["kind"] == "APIGroupDiscoveryList"
    apps = next(g for g in body["items"] if g["metadata"]["name"] == "apps")
    (v1,) = apps["versions"]
    deploy = next(r for r in v1["resources"] if r["resource"] == "deployments")
    assert deploy["scope"] == "Namespaced" and deploy["shortNames"] == ["deploy"]
    scale = next(s for s in deploy["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    _, _, core = call(twin, "GET", "/api", headers={"Accept": KUBECTL_DISCOVERY})
    assert [g["metadata"].get("name", "") for g in core["items"]] == [""]


def test_legacy_discovery_lists_resources_and_subresources(twin: Twin) -> None:
    status, _, body = call(twin, "GET", "/api/v1")
    assert status == 200 and body["kind"] == "APIResourceList" and body["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in body["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["namespaced"] is True
    assert by_name["pods"]["categories"] == ["all"]
    assert by_name["pods/binding"]["verbs"] == ["create"]
    assert by_name["nodes"]["namespaced"] is False
    _, _, groups = call(twin, "GET", "/apis")
    names = [g["name"] for g in groups["groups"]]
    assert "resource.k8s.io" in names and "apps" in names
    dra = next(g for g in groups["groups"] if g["name"] == "resource.k8s.io")
    assert dra["preferredVersion"] == {"groupVersion": "resource.k8s.io/v1", "version": "v1"}


def test_missing_token_is_401_with_a_status_body(twin: Twin) -> None:
    status, _, body = call(twin, "GET", "/api/v1/namespaces", token=None)
    assert status == 401
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    assert call(twin, "GET", "/api/v1/namespaces", token="wrong")[0] == 401
    assert call(twin, "GET", "/healthz", token=None)[0] == 200


def test_not_found_status_over_http(twin: Twin) -> None:
    status, _, body = call(twin, "GET", "/apis/apps/v1/namespaces/default/deployments/none")
    assert status == 404
    assert body["message"] == 'deployments.apps "none" not found'
    assert body["details"] == {"name": "none", "group": "apps", "kind": "deployments"}
    assert call(twin, "GET", "/apis/apps/v1/widgets")[0] == 404


def test_pagination_over_http(twin: Twin) -> None:
    call(twin, "POST", "/api/v1/namespaces", {"metadata": {"name": "paged"}})
    for i in range(5):
        call(twin, "POST", "/api/v1/namespaces/paged/configmaps", {"metadata": {"name": f"p{i}"}})
    _, _, first = call(twin, "GET", "/api/v1/namespaces/paged/configmaps?limit=2")
    assert [o["metadata"]["name"] for o in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    _, _, second = call(
        twin, "GET", f"/api/v1/namespaces/paged/configmaps?limit=2&continue={token}"
    )
    assert [o["metadata"]["name"] for o in second["items"]] == ["p2", "p3"]
    assert first["kind"] == "ConfigMapList"


def test_binding_assigns_the_node_once(twin: Twin) -> None:
    call(twin, "POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "b"}, "spec": {}})
    target = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "b"},
        "target": {"kind": "Node", "name": "n1"},
    }
    status, _, body = call(twin, "POST", "/api/v1/namespaces/default/pods/b/binding", target)
    assert status == 201 and body["status"] == "Success"
    _, _, pod = call(twin, "GET", "/api/v1/namespaces/default/pods/b")
    assert pod["spec"]["nodeName"] == "n1"
    assert [c["type"] for c in pod["status"]["conditions"]] == ["PodScheduled"]
    status, _, again = call(twin, "POST", "/api/v1/namespaces/default/pods/b/binding", target)
    assert status == 409
    assert again["message"] == (
        'Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "n1"'
    )


def test_scale_is_an_autoscaling_v1_scale(twin: Twin) -> None:
    dep = {
        "metadata": {"name": "s"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "s"}}},
    }
    call(twin, "POST", "/apis/apps/v1/namespaces/default/deployments", dep)
    status, _, scale = call(twin, "GET", "/apis/apps/v1/namespaces/default/deployments/s/scale")
    assert status == 200
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["spec"] == {"replicas": 2} and scale["status"]["selector"] == "app=s"
    status, _, scaled = call(
        twin,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/s/scale",
        {"spec": {"replicas": 0}},
        content_type="application/merge-patch+json",
    )
    assert status == 200 and scaled["spec"] == {"replicas": 0}


def test_scale_selector_is_printed_as_kube_apiserver_prints_it(twin: Twin) -> None:
    # labels.Selector.String(): requirements ordered by key (not by their text), values sorted.
    selector = {
        "matchLabels": {"app-x": "1", "app": "t"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "api"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    dep = {"metadata": {"name": "t"}, "spec": {"replicas": 1, "selector": selector}}
    call(twin, "POST", "/apis/apps/v1/namespaces/default/deployments", dep)
    _, _, scale = call(twin, "GET", "/apis/apps/v1/namespaces/default/deployments/t/scale")
    assert scale["status"]["selector"] == "app=t,app-x=1,!canary,tier in (api,web)"


def test_server_side_apply_creates_and_records_the_manager(twin: Twin) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: b\n"
    path = "/api/v1/namespaces/default/configmaps/ssa?fieldManager=tester"
    status, _, body = call(
        twin, "PATCH", path, manifest, content_type="application/apply-patch+yaml"
    )
    assert status == 201 and body["data"] == {"a": "b"}
    managers = {(m["manager"], m["operation"]) for m in body["metadata"]["managedFields"]}
    assert ("tester", "Apply") in managers
    status, _, _ = call(
        twin,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/ssa",
        manifest,
        content_type="application/apply-patch+yaml",
    )
    assert status == 400


def test_delete_collection_by_label(twin: Twin) -> None:
    call(twin, "POST", "/api/v1/namespaces", {"metadata": {"name": "dc"}})
    for name, app in (("x1", "x"), ("x2", "x"), ("y1", "y")):
        call(
            twin,
            "POST",
            "/api/v1/namespaces/dc/configmaps",
            {"metadata": {"name": name, "labels": {"app": app}}},
        )
    status, _, body = call(twin, "DELETE", "/api/v1/namespaces/dc/configmaps?labelSelector=app%3Dx")
    assert status == 200 and sorted(o["metadata"]["name"] for o in body["items"]) == ["x1", "x2"]
    _, _, left = call(twin, "GET", "/api/v1/namespaces/dc/configmaps")
    assert [o["metadata"]["name"] for o in left["items"]] == ["y1"]


def test_table_when_asked(twin: Twin) -> None:
    status, _, table = call(twin, "GET", "/api/v1/namespaces", headers={"Accept": TABLE})
    assert status == 200 and table["kind"] == "Table"
    assert table["columnDefinitions"][0]["name"] == "Name"
    assert "default" in [row["cells"][0] for row in table["rows"]]
    assert int(table["metadata"]["resourceVersion"]) > 0


def _stream(twin: Twin, path: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    url = urlsplit(twin.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {twin.token}"})
    return conn, conn.getresponse()


def test_watch_sends_bookmarks_and_events(twin: Twin) -> None:
    rv = twin.store.resource_version
    conn, resp = _stream(
        twin,
        f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
        "&allowWatchBookmarks=true&timeoutSeconds=5",
    )
    try:
        bookmark = json.loads(resp.readline())
        assert bookmark["type"] == "BOOKMARK"
        assert bookmark["object"]["kind"] == "ConfigMap"
        assert int(bookmark["object"]["metadata"]["resourceVersion"]) >= rv
        twin.store.create(by_kind("ConfigMap"), {"metadata": {"name": "w", "namespace": "default"}})
        while True:
            event = json.loads(resp.readline())
            if event["type"] != "BOOKMARK":
                break
        assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "w"
    finally:
        conn.close()


def test_watch_from_an_expired_version_reports_410() -> None:
    store = Store(window=2)
    cm = by_kind("ConfigMap")
    for i in range(5):
        store.create(cm, {"metadata": {"name": f"c{i}", "namespace": "default"}})
    with run_twin(store=store, tls=False) as small:
        conn, resp = _stream(small, "/api/v1/configmaps?watch=true&resourceVersion=1")
        try:
            assert resp.status == 200
            event = json.loads(resp.readline())
        finally:
            conn.close()
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


def test_injected_429_carries_retry_after() -> None:
    faults = FaultConfig(error_rate=1.0, error_codes=(429,), retry_after=3, seed=1)
    with run_twin(tls=False, faults=faults) as faulty:
        status, headers, body = call(faulty, "GET", "/api/v1/namespaces")
    assert status == 429 and headers["retry-after"] == "3"
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 3


def test_seeded_faults_repeat() -> None:
    def codes() -> list[int]:
        faults = FaultConfig(error_rate=0.5, seed=42)
        with run_twin(tls=False, faults=faults) as faulty:
            return [call(faulty, "GET", "/api/v1/namespaces")[0] for _ in range(20)]

    first = codes()
    assert first == codes()
    assert {200} < set(first) and set(first) <= {200, 429, 500, 503}


def test_pause_holds_requests_until_resumed(twin: Twin) -> None:
    done: list[float] = []
    twin.faults.pause()
    start = time.monotonic()
    worker = threading.Thread(
        target=lambda: (call(twin, "GET", "/version"), done.append(time.monotonic()))
    )
    worker.start()
    time.sleep(0.3)
    assert done == []
    twin.faults.resume()
    worker.join(5)
    assert done and done[0] - start >= 0.3


def test_watch_streams_are_dropped_on_schedule() -> None:
    with run_twin(tls=False, faults=FaultConfig(drop_watch_every=0.3)) as dropping:
        conn, resp = _stream(dropping, "/api/v1/configmaps?watch=true&resourceVersion=0")
        start = time.monotonic()
        try:
            resp.read()  # returns when the server ends the stream
        finally:
            conn.close()
        assert 0.25 <= time.monotonic() - start < 5


def test_crd_lifecycle_in_discovery(twin: Twin) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.test.io"},
        "spec": {
            "group": "test.io",
            "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {
                        "scale": {
                            "specReplicasPath": ".spec.size",
                            "statusReplicasPath": ".status.size",
                        }
                    },
                }
            ],
        },
    }
    assert (
        call(twin, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)[0] == 201
    )
    _, _, listing = call(twin, "GET", "/apis/test.io/v1")
    assert [r["name"] for r in listing["resources"]] == ["gadgets", "gadgets/scale"]
    assert listing["resources"][0]["namespaced"] is False
    assert (
        call(
            twin,
            "POST",
            "/apis/test.io/v1/gadgets",
            {
                "apiVersion": "test.io/v1",
                "kind": "Gadget",
                "metadata": {"name": "g"},
                "spec": {"size": 2},
            },
        )[0]
        == 201
    )
    _, _, scale = call(twin, "GET", "/apis/test.io/v1/gadgets/g/scale")
    assert scale["spec"] == {"replicas": 2}
    status, _, _ = call(
        twin, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.test.io"
    )
    assert status == 200
    assert call(twin, "GET", "/apis/test.io/v1")[0] == 404
    assert call(twin, "GET", "/apis/test.io/v1/gadgets/g")[0] == 404


def test_unsupported_dry_run_value_is_a_bad_request(twin: Twin) -> None:
    status, _, body = call(
        twin,
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=Some",
        {"metadata": {"name": "d"}},
    )
    assert status == 400
    assert body["message"] == 'dryRun: Unsupported value: []string{"Some"}: supported values: "All"'


def test_watch_list_sends_initial_events_then_a_bookmark(twin: Twin) -> None:
    call(twin, "POST", "/api/v1/namespaces", {"metadata": {"name": "wl"}})
    for name in ("b", "a"):
        call(twin, "POST", "/api/v1/namespaces/wl/configmaps", {"metadata": {"name": name}})
    conn, resp = _stream(
        twin,
        "/api/v1/namespaces/wl/configmaps?watch=true&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2",
    )
    try:
        events = [json.loads(resp.readline()) for _ in range(3)]
    finally:
        conn.close()
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("BOOKMARK", None),
    ]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
