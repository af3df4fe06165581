"""The HTTP API of the twin and of kube-apiserver (tests/twin/apiserver/conftest.py):
discovery, credentials, Status bodies, subresources and watch; the twin's own fault injection,
event window and bookmark cadence at the end."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests.twin.apiserver.conftest import Server, eventually

from gpushift._kinds import by_kind
from gpushift.upstream import VERSION
from gpushift_twin import FaultConfig, Store, Twin, run_twin

KUBECTL_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
APPLY = "application/apply-patch+yaml"


def _container() -> list[dict[str, str]]:
    return [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]


def _deployment(name: str, replicas: int, selector: dict[str, Any], labels: dict[str, str]) -> Any:
    """A valid Deployment (kube-apiserver wants a template its selector matches)."""
    return {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": {"metadata": {"labels": labels}, "spec": {"containers": _container()}},
        },
    }


def test_version_names_the_release_served(server: Server) -> None:
    status, _, body = server.call("GET", "/version")
    assert status == 200
    # The twin reports its --kubernetes-version (1.37.0 by default); kube-apiserver the
    # release `make upstream` built.
    release = "v1.37.0" if server.is_twin else VERSION
    assert (body["major"], body["minor"], body["gitVersion"]) == ("1", "37", release)


def test_aggregated_discovery_when_asked_as_kubectl_asks(server: Server) -> None:
    status, headers, body = server.call("GET", "/apis", headers={"Accept": KUBECTL_DISCOVERY})
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
    _, _, core = server.call("GET", "/api", headers={"Accept": KUBECTL_DISCOVERY})
    assert [g["metadata"].get("name", "") for g in core["items"]] == [""]


def test_legacy_discovery_lists_resources_and_subresources(server: Server) -> None:
    status, _, body = server.call("GET", "/api/v1")
    assert status == 200 and body["kind"] == "APIResourceList" and body["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in body["resources"]}
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["namespaced"] is True
    assert by_name["pods"]["categories"] == ["all"]
    assert by_name["pods/binding"]["verbs"] == ["create"]
    assert by_name["nodes"]["namespaced"] is False
    _, _, groups = server.call("GET", "/apis")
    names = [g["name"] for g in groups["groups"]]
    assert "resource.k8s.io" in names and "apps" in names
    dra = next(g for g in groups["groups"] if g["name"] == "resource.k8s.io")
    assert dra["preferredVersion"] == {"groupVersion": "resource.k8s.io/v1", "version": "v1"}


UNAUTHORIZED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


def test_a_wrong_token_is_401_with_a_status_body(server: Server) -> None:
    for path in ("/api/v1/namespaces", "/healthz", "/version"):
        status, _, body = server.call("GET", path, token="wrong")
        assert (status, body) == (401, UNAUTHORIZED), path


def test_no_credentials_is_the_anonymous_user(server: Server) -> None:
    # kube-apiserver's default --anonymous-auth: a request without credentials is
    # system:anonymous, whom RBAC lets read only the health and version endpoints
    # (system:public-info-viewer) and refuses everything else with 403.
    for path in ("/healthz", "/livez", "/readyz"):
        assert server.call("GET", path, admin=False)[:3:2] == (200, "ok"), path
    assert server.call("GET", "/version", admin=False)[0] == 200
    status, _, body = server.call("GET", "/api/v1/namespaces", admin=False)
    assert status == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'namespaces is forbidden: User "system:anonymous" cannot list resource '
        '"namespaces" in API group "" at the cluster scope',
        "reason": "Forbidden",
        "details": {"kind": "namespaces"},
        "code": 403,
    }
    _, _, body = server.call("GET", "/apis/apps/v1/namespaces/x/deployments/d/scale", admin=False)
    assert body["message"] == (
        'deployments.apps "d" is forbidden: User "system:anonymous" cannot get resource '
        '"deployments/scale" in API group "apps" in the namespace "x"'
    )
    assert body["details"] == {"name": "d", "group": "apps", "kind": "deployments"}
    _, _, body = server.call("GET", "/api/v1/namespaces/x", admin=False)
    assert body["message"] == (
        'namespaces "x" is forbidden: User "system:anonymous" cannot get resource '
        '"namespaces" in API group "" in the namespace "x"'
    )
    _, _, body = server.call("GET", "/api/v1/namespaces/x/configmaps?watch=true", admin=False)
    assert body["message"] == (
        'configmaps is forbidden: User "system:anonymous" cannot watch resource '
        '"configmaps" in API group "" in the namespace "x"'
    )
    _, _, body = server.call("DELETE", "/api/v1/namespaces/x/configmaps", admin=False)
    assert body["message"] == (
        'configmaps is forbidden: User "system:anonymous" cannot deletecollection resource '
        '"configmaps" in API group "" in the namespace "x"'
    )
    status, _, body = server.call("GET", "/api", admin=False)
    assert (status, body["message"], body["details"]) == (
        403,
        'forbidden: User "system:anonymous" cannot get path "/api"',
        {},
    )


def test_not_found_status_over_http(server: Server) -> None:
    status, _, body = server.call("GET", "/apis/apps/v1/namespaces/default/deployments/none")
    assert status == 404
    assert body["message"] == 'deployments.apps "none" not found'
    assert body["details"] == {"name": "none", "group": "apps", "kind": "deployments"}
    assert server.call("GET", "/apis/apps/v1/widgets")[0] == 404


def test_pagination_over_http(server: Server, namespace: str) -> None:
    # Secrets: no controller adds any to a namespace (kube-controller-manager adds the
    # ConfigMap kube-root-ca.crt to each), so the pages hold exactly what the test made.
    path = f"/api/v1/namespaces/{namespace}/secrets"
    for i in range(5):
        server.ok("POST", path, {"metadata": {"name": f"p{i}"}})
    _, _, first = server.call("GET", f"{path}?limit=2")
    assert first["kind"] == "SecretList"
    assert [o["metadata"]["name"] for o in first["items"]] == ["p0", "p1"]
    assert first["metadata"]["remainingItemCount"] == 3
    token = first["metadata"]["continue"]
    _, _, second = server.call("GET", f"{path}?limit=2&continue={token}")
    assert [o["metadata"]["name"] for o in second["items"]] == ["p2", "p3"]
    assert second["metadata"]["remainingItemCount"] == 1


def test_binding_assigns_the_node_once(server: Server, namespace: str) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    server.ok("POST", pods, {"metadata": {"name": "b"}, "spec": {"containers": _container()}})
    target = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "b"},
        "target": {"kind": "Node", "name": "n1"},
    }
    status, _, body = server.call("POST", f"{pods}/b/binding", target)
    assert status == 201 and body["status"] == "Success"
    _, _, pod = server.call("GET", f"{pods}/b")
    assert pod["spec"]["nodeName"] == "n1"
    assert [c["type"] for c in pod["status"]["conditions"]] == ["PodScheduled"]
    status, _, again = server.call("POST", f"{pods}/b/binding", target)
    assert status == 409
    assert again["message"] == (
        'Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "n1"'
    )


def test_scale_is_an_autoscaling_v1_scale(server: Server, namespace: str) -> None:
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    server.ok("POST", deployments, _deployment("s", 2, {"matchLabels": {"app": "s"}}, {"app": "s"}))
    status, _, scale = server.call("GET", f"{deployments}/s/scale")
    assert status == 200
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["spec"] == {"replicas": 2} and scale["status"]["selector"] == "app=s"
    status, _, scaled = server.call(
        "PATCH",
        f"{deployments}/s/scale",
        {"spec": {"replicas": 0}},
        content_type="application/merge-patch+json",
    )
    # autoscaling/v1 ScaleSpec's replicas is omitempty: zero replicas is an empty spec.
    assert status == 200 and scaled["spec"] == {}


def test_scale_selector_is_printed_as_kube_apiserver_prints_it(
    server: Server, namespace: str
) -> None:
    # labels.Selector.String(): requirements ordered by key (not by their text), values sorted.
    selector = {
        "matchLabels": {"app-x": "1", "app": "t"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["web", "api"]},
            {"key": "canary", "operator": "DoesNotExist"},
        ],
    }
    labels = {"app": "t", "app-x": "1", "tier": "web"}
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    server.ok("POST", deployments, _deployment("t", 1, selector, labels))
    _, _, scale = server.call("GET", f"{deployments}/t/scale")
    assert scale["status"]["selector"] == "app=t,app-x=1,!canary,tier in (api,web)"


def test_server_side_apply_creates_and_records_the_manager(server: Server, namespace: str) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: b\n"
    path = f"/api/v1/namespaces/{namespace}/configmaps/ssa"
    status, _, body = server.call(
        "PATCH",
        f"{path}?fieldManager=tester",
        manifest,
        content_type="application/apply-patch+yaml",
    )
    assert status == 201 and body["data"] == {"a": "b"}
    managers = {(m["manager"], m["operation"]) for m in body["metadata"]["managedFields"]}
    assert ("tester", "Apply") in managers
    # Apply without a field manager: metav1 validation.ValidatePatchOptions, a 422.
    status, _, body = server.call(
        "PATCH", path, manifest, content_type="application/apply-patch+yaml"
    )
    assert status == 422
    assert body["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch"
    )
    assert body["details"] == {
        "group": "meta.k8s.io",
        "kind": "PatchOptions",
        "causes": [
            {
                "reason": "FieldValueRequired",
                "message": "Required value: is required for apply patch",
                "field": "fieldManager",
            }
        ],
    }


def test_delete_collection_by_label(server: Server, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name, app in (("x1", "x"), ("x2", "x"), ("y1", "y")):
        server.ok("POST", path, {"metadata": {"name": name, "labels": {"app": app}}})
    status, _, body = server.call("DELETE", f"{path}?labelSelector=app%3Dx")
    assert status == 200 and body["kind"] == "ConfigMapList"
    assert sorted(o["metadata"]["name"] for o in body["items"]) == ["x1", "x2"]
    # Of the labelled ConfigMaps (not the controller's kube-root-ca.crt) only y1 is left.
    _, _, left = server.call("GET", f"{path}?labelSelector=app")
    assert [o["metadata"]["name"] for o in left["items"]] == ["y1"]


def test_table_when_asked(server: Server) -> None:
    status, _, table = server.call("GET", "/api/v1/namespaces", headers={"Accept": TABLE})
    assert status == 200 and table["kind"] == "Table"
    assert table["columnDefinitions"][0]["name"] == "Name"
    assert "default" in [row["cells"][0] for row in table["rows"]]
    assert int(table["metadata"]["resourceVersion"]) > 0


def test_crd_lifecycle_in_discovery(server: Server) -> None:
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
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
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
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
    assert server.call("POST", crds, crd)[0] == 201

    # kube-apiserver serves a new CRD once it is Established, which it sets asynchronously.
    def listing() -> Any:
        status, _, doc = server.call("GET", "/apis/test.io/v1")
        return doc if status == 200 else None

    found = eventually(listing, what="test.io/v1 in discovery")
    assert [r["name"] for r in found["resources"]] == ["gadgets", "gadgets/scale"]
    assert found["resources"][0]["namespaced"] is False
    gadget = {
        "apiVersion": "test.io/v1",
        "kind": "Gadget",
        "metadata": {"name": "g"},
        "spec": {"size": 2},
    }
    assert server.call("POST", "/apis/test.io/v1/gadgets", gadget)[0] == 201
    _, _, scale = server.call("GET", "/apis/test.io/v1/gadgets/g/scale")
    assert scale["spec"] == {"replicas": 2}
    status, _, _ = server.call("DELETE", f"{crds}/gadgets.test.io")
    assert status == 200
    # The CRD goes once its custom resources are deleted (kube-apiserver does that after
    # answering the DELETE); then neither the version nor the object is served.
    eventually(
        lambda: True if server.call("GET", "/apis/test.io/v1")[0] == 404 else None,
        what="test.io/v1 gone from discovery",
    )
    assert server.call("GET", "/apis/test.io/v1/gadgets/g")[0] == 404


def test_unsupported_dry_run_value_is_invalid(server: Server, namespace: str) -> None:
    # metav1 validation.ValidateCreateOptions: a field.NotSupported on the value list, 422.
    status, _, body = server.call(
        "POST",
        f"/api/v1/namespaces/{namespace}/configmaps?dryRun=Some",
        {"metadata": {"name": "d"}},
    )
    assert status == 422
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: '
        'supported values: "All"'
    )
    assert body["details"]["kind"] == "CreateOptions"


def test_watch_list_sends_initial_events_then_a_bookmark(server: Server, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("b", "a"):
        server.ok("POST", path, {"metadata": {"name": name, "labels": {"test": "wl"}}})
    # The label leaves out the controller's kube-root-ca.crt.
    conn, resp = server.stream(
        f"{path}?watch=true&sendInitialEvents=true&labelSelector=test%3Dwl"
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


def test_watch_from_a_list_delivers_later_changes(server: Server, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/secrets"
    rv = server.ok("GET", path)["metadata"]["resourceVersion"]
    conn, resp = server.stream(f"{path}?watch=true&resourceVersion={rv}&timeoutSeconds=5")
    try:
        server.ok("POST", path, {"metadata": {"name": "w"}})
        server.ok(
            "PATCH",
            f"{path}/w",
            {"metadata": {"labels": {"a": "b"}}},
            content_type="application/merge-patch+json",
        )
        server.ok("DELETE", f"{path}/w")
        events = [json.loads(resp.readline()) for _ in range(3)]
    finally:
        conn.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "w"),
        ("MODIFIED", "w"),
        ("DELETED", "w"),
    ]
    assert events[1]["object"]["metadata"]["labels"] == {"a": "b"}
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert int(rv) < versions[0] < versions[1] < versions[2]


# --- twin-only: its bookmark cadence, event window and fault injection --------------------


@pytest.fixture(scope="module")
def twin() -> Iterator[Twin]:
    """A plain-HTTP twin with a bookmark every 0.2 s (kube-apiserver's are a minute apart)."""
    with run_twin(tls=False, bookmark_interval=0.2) as running:
        yield running


def call(twin: Twin, method: str, path: str) -> tuple[int, dict[str, str], Any]:
    url = urlsplit(twin.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    conn.request(method, path, headers={"Authorization": f"Bearer {twin.token}"})
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    parsed = json.loads(raw) if raw and raw[:1] in b"{[" else raw.decode()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed


def _stream(twin: Twin, path: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    url = urlsplit(twin.url)
    conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
    conn.request("GET", path, headers={"Authorization": f"Bearer {twin.token}"})
    return conn, conn.getresponse()


def test_watch_sends_bookmarks_and_events(twin: Twin) -> None:
    # Twin-only: the bookmark interval is the twin's setting (kube-apiserver sends one about
    # a minute into a watch, and before its timeout).
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
    # Twin-only: the store's event window is the twin's setting (kube-apiserver's watch cache
    # here still holds every event since it started).
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
    # Twin-only: fault injection.
    faults = FaultConfig(error_rate=1.0, error_codes=(429,), retry_after=3, seed=1)
    with run_twin(tls=False, faults=faults) as faulty:
        status, headers, body = call(faulty, "GET", "/api/v1/namespaces")
    assert status == 429 and headers["retry-after"] == "3"
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 3


def test_seeded_faults_repeat() -> None:
    # Twin-only: fault injection.
    def codes() -> list[int]:
        faults = FaultConfig(error_rate=0.5, seed=42)
        with run_twin(tls=False, faults=faults) as faulty:
            return [call(faulty, "GET", "/api/v1/namespaces")[0] for _ in range(20)]

    first = codes()
    assert first == codes()
    assert {200} < set(first) and set(first) <= {200, 429, 500, 503}


def test_pause_holds_requests_until_resumed(twin: Twin) -> None:
    # Twin-only: fault injection.
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
    # Twin-only: fault injection.
    with run_twin(tls=False, faults=FaultConfig(drop_watch_every=0.3)) as dropping:
        conn, resp = _stream(dropping, "/api/v1/configmaps?watch=true&resourceVersion=0")
        start = time.monotonic()
        try:
            resp.read()  # returns when the server ends the stream
        finally:
            conn.close()
        assert 0.25 <= time.monotonic() - start < 5
