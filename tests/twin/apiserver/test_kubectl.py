"""The real kubectl (the operators' 1.32) against the twin and against kube-apiserver, through
the kubeconfig each gives (tests/twin/apiserver/conftest.py)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from tests.twin.apiserver.conftest import KUBECTL, Server, eventually

from gpushift_twin import FaultConfig, run_twin, write_kubeconfig

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: app
        image: nginx:1
        env: [{{name: MODE, value: fast}}]
"""


#: What kube-apiserver defaults in a container (pkg/apis/core/v1 SetDefaults_Container; the pull
#: policy of an image with a tag other than "latest"); ResourceRequirements is a struct, so an
#: empty one is written.
CONTAINER_DEFAULTS: dict[str, Any] = {
    "imagePullPolicy": "IfNotPresent",
    "resources": {},
    "terminationMessagePath": "/dev/termination-log",
    "terminationMessagePolicy": "File",
}


def kubectl(
    server: Server,
    namespace: str,
    *args: str,
    stdin: str | None = None,
    check: bool = True,
    kubeconfig: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    return server.kubectl(
        *args, stdin=stdin, check=check, kubeconfig=kubeconfig, namespace=namespace
    )


def get_json(server: Server, namespace: str, *args: str) -> Any:
    return json.loads(kubectl(server, namespace, "get", *args, "-o", "json").stdout)


def test_apply_creates_then_configures_then_is_unchanged(server: Server, namespace: str) -> None:
    manifest = DEPLOYMENT.format(name="web", ns=namespace, replicas=1)
    assert kubectl(server, namespace, "apply", "-f", "-", stdin=manifest).stdout.strip() == (
        "deployment.apps/web created"
    )
    first = get_json(server, namespace, "deployment", "web")
    assert first["metadata"]["generation"] == 1
    assert first["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "MODE", "value": "fast"}
    ]
    assert "kubectl.kubernetes.io/last-applied-configuration" in first["metadata"]["annotations"]
    changed = DEPLOYMENT.format(name="web", ns=namespace, replicas=2)
    assert kubectl(server, namespace, "apply", "-f", "-", stdin=changed).stdout.strip() == (
        "deployment.apps/web configured"
    )
    second = get_json(server, namespace, "deployment", "web")
    assert second["spec"]["replicas"] == 2 and second["metadata"]["generation"] == 2
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert kubectl(server, namespace, "apply", "-f", "-", stdin=changed).stdout.strip() == (
        "deployment.apps/web unchanged"
    )


def test_three_patch_types(server: Server, namespace: str) -> None:
    kubectl(
        server,
        namespace,
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT.format(name="pt", ns=namespace, replicas=1),
    )
    # Strategic: containers merge by name, so the env survives an image change.
    kubectl(
        server,
        namespace,
        "patch",
        "deployment",
        "pt",
        "--type",
        "strategic",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:2"}]}}}}',
    )
    # Merge: a map is merged, null deletes.
    kubectl(
        server,
        namespace,
        "patch",
        "deployment",
        "pt",
        "--type",
        "merge",
        "-p",
        '{"metadata":{"labels":{"tier":"front","app":null}}}',
    )
    # JSON: an explicit operation list.
    kubectl(
        server,
        namespace,
        "patch",
        "deployment",
        "pt",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":4}]',
    )
    dep = get_json(server, namespace, "deployment", "pt")
    container: dict[str, Any] = {
        "name": "app",
        "image": "nginx:2",
        "env": [{"name": "MODE", "value": "fast"}],
    }
    if not server.is_twin:
        # kube-apiserver's defaults; the twin stores objects as sent (docs/twin.md).
        container |= CONTAINER_DEFAULTS
    assert dep["spec"]["template"]["spec"]["containers"] == [container]
    assert dep["metadata"]["labels"] == {"tier": "front"}
    assert dep["spec"]["replicas"] == 4
    # Image change and replicas change are spec changes; the label change is not.
    assert dep["metadata"]["generation"] == 3


def test_scale_goes_through_the_scale_subresource(server: Server, namespace: str) -> None:
    kubectl(
        server,
        namespace,
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT.format(name="sc", ns=namespace, replicas=1),
    )
    assert kubectl(
        server, namespace, "scale", "deployment", "sc", "--replicas=5"
    ).stdout.strip() == ("deployment.apps/sc scaled")
    assert get_json(server, namespace, "deployment", "sc")["spec"]["replicas"] == 5


WATCH_ARGS = ("get", "configmaps", "-w", "-o", "name")


def test_get_watch_catches_a_live_event(server: Server, namespace: str) -> None:
    # kubectl get -w lists, prints the list, then watches from the list's resourceVersion:
    # once the object made before is printed, one made after can only come as an event.
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {}}}\n"
    kubectl(server, namespace, "apply", "-f", "-", stdin=cm.format("before"))
    assert KUBECTL is not None
    proc = subprocess.Popen(
        [KUBECTL, "--cache-dir", str(server.cache), "-n", namespace, *WATCH_ARGS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KUBECONFIG": str(server.kubeconfig)},
    )
    lines: queue.Queue[str] = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None

    def pump() -> None:
        for line in stdout:
            lines.put(line.strip())

    threading.Thread(target=pump, daemon=True).start()

    def wait_for(name: str) -> None:
        seen: list[str] = []
        while name not in seen:
            seen.append(lines.get(timeout=10))

    try:
        wait_for("configmap/before")
        kubectl(server, namespace, "apply", "-f", "-", stdin=cm.format("live"))
        wait_for("configmap/live")
    finally:
        proc.terminate()
        proc.wait(10)
    before, live = (
        int(get_json(server, namespace, "configmap", name)["metadata"]["resourceVersion"])
        for name in ("before", "live")
    )
    assert live > before


def _with_replica_set(server: Server, namespace: str, name: str) -> None:
    """A Deployment and a ReplicaSet ``<name>-1`` it controls, both scaled to 0 (no pods)."""
    kubectl(
        server,
        namespace,
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT.format(name=name, ns=namespace, replicas=0),
    )
    uid = get_json(server, namespace, "deployment", name)["metadata"]["uid"]
    ref = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    labels = {"app": name}
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"{name}-1", "labels": labels, "ownerReferences": [ref]},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "nginx:0"}]},
            },
        },
    }
    kubectl(server, namespace, "create", "-f", "-", stdin=json.dumps(replica_set))


def _gone(server: Server, namespace: str, name: str) -> bool | None:
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets/{name}"
    return True if server.call("GET", path)[0] == 404 else None


def test_delete_cascades_by_default_and_orphans_on_request(server: Server, namespace: str) -> None:
    # kubectl deletes in the background by default: the Deployment goes at once, and the
    # garbage collector deletes the ReplicaSet after it, so the test waits for that.
    _with_replica_set(server, namespace, "gone")
    kubectl(server, namespace, "delete", "deployment", "gone")
    eventually(lambda: _gone(server, namespace, "gone-1"), what="gone-1 collected")
    # Foreground: the Deployment is deleted only after its blocking dependents, and kubectl
    # waits for the Deployment, so the ReplicaSet is gone when it returns.
    _with_replica_set(server, namespace, "fg")
    kubectl(server, namespace, "delete", "deployment", "fg", "--cascade=foreground")
    assert kubectl(server, namespace, "get", "replicaset", "fg-1", check=False).returncode == 1
    # Orphan: the owner reference is removed before the Deployment is.
    _with_replica_set(server, namespace, "kept")
    kubectl(server, namespace, "delete", "deployment", "kept", "--cascade=orphan")
    rs = get_json(server, namespace, "replicaset", "kept-1")
    assert "ownerReferences" not in rs["metadata"]


def test_server_dry_run_changes_nothing(server: Server, namespace: str) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dry}\ndata: {a: b}\n"
    out = kubectl(server, namespace, "apply", "--dry-run=server", "-f", "-", stdin=manifest)
    assert out.stdout.strip() == "configmap/dry created (server dry run)"
    assert kubectl(server, namespace, "get", "configmap", "dry", check=False).returncode == 1
    kubectl(server, namespace, "apply", "-f", "-", stdin=manifest)
    kubectl(server, namespace, "delete", "configmap", "dry", "--dry-run=server")
    assert get_json(server, namespace, "configmap", "dry")["data"] == {"a": "b"}


def test_label_and_field_selectors(server: Server, namespace: str) -> None:
    docs = []
    for name, labels in (
        ("s-a", "{app: a, tier: front}"),
        ("s-b", "{app: b, tier: back}"),
        ("s-c", "{app: c, gpu: 'yes'}"),
    ):
        docs.append(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {labels}}}\n"
        )
    kubectl(server, namespace, "apply", "-f", "-", stdin="---\n".join(docs))

    def names(*args: str) -> list[str]:
        return kubectl(server, namespace, "get", "configmaps", *args, "-o", "name").stdout.split()

    assert names("-l", "app=a") == ["configmap/s-a"]
    assert names("-l", "tier in (front,back)") == ["configmap/s-a", "configmap/s-b"]
    assert names("-l", "app,!gpu,app!=b") == ["configmap/s-a"]
    assert names("-l", "gpu") == ["configmap/s-c"]
    assert names("--field-selector", "metadata.name=s-b") == ["configmap/s-b"]
    bad = kubectl(
        server, namespace, "get", "configmaps", "--field-selector", "data.a=b", check=False
    )
    # ConfigMaps have no field label conversion of their own: apimachinery's default refuses.
    assert bad.returncode == 1
    assert bad.stderr.strip().endswith(
        'field selector "data.a=b": "data.a" is not a known field selector: '
        'only "metadata.name", "metadata.namespace"'
    )


def test_crd_then_custom_resource(server: Server, namespace: str) -> None:
    crd = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources: {status: {}}
"""
    kubectl(server, namespace, "apply", "-f", "-", stdin=crd)
    # kube-apiserver establishes a new CRD asynchronously (the twin at once): wait, as the
    # Kubernetes documentation tells clients to, before serving its resources.
    kubectl(
        server,
        namespace,
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/widgets.example.com",
    )
    established = get_json(server, namespace, "crd", "widgets.example.com")["status"]["conditions"]
    assert {c["type"]: c["status"] for c in established} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n"
    assert kubectl(server, namespace, "apply", "-f", "-", stdin=cr).stdout.strip() == (
        "widget.example.com/w1 created"
    )
    got = get_json(server, namespace, "wdg", "w1")
    assert got["spec"] == {"size": 3} and got["metadata"]["generation"] == 1
    # Custom resources take no strategic merge patch, as upstream.
    smp = kubectl(
        server,
        namespace,
        "patch",
        "widget",
        "w1",
        "--type",
        "strategic",
        "-p",
        '{"spec":{"size":4}}',
        check=False,
    )
    assert smp.returncode == 1
    assert smp.stderr.startswith(
        "error: application/strategic-merge-patch+json is not supported by example.com/v1, "
        "Kind=Widget: the body of the request was in an unknown format"
    )


def test_replace_with_a_stale_resource_version_is_a_conflict(
    server: Server, namespace: str
) -> None:
    kubectl(
        server,
        namespace,
        "apply",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stale}\ndata: {v: '1'}\n",
    )
    old = get_json(server, namespace, "configmap", "stale")
    kubectl(
        server,
        namespace,
        "patch",
        "configmap",
        "stale",
        "--type",
        "merge",
        "-p",
        '{"data":{"v":"2"}}',
    )
    old["data"]["v"] = "3"
    done = kubectl(server, namespace, "replace", "-f", "-", stdin=json.dumps(old), check=False)
    assert done.returncode == 1
    assert (
        'Error from server (Conflict): error when replacing "STDIN": Operation cannot be '
        'fulfilled on configmaps "stale": the object has been modified; please apply your '
        "changes to the latest version and try again"
    ) in done.stderr


def test_a_wrong_token_is_unauthorized(server: Server, namespace: str, tmp_path: Path) -> None:
    bad = write_kubeconfig(
        tmp_path / "bad", server=server.url, token="not-the-token", ca_pem=server.ca_pem
    )
    done = kubectl(server, namespace, "get", "configmaps", kubeconfig=bad, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == "error: You must be logged in to the server (Unauthorized)"
    if server.twin is not None:  # kube-apiserver here has no token of its own to leak
        assert server.twin.token not in done.stderr


def test_table_output_has_name_column(server: Server, namespace: str) -> None:
    out = kubectl(server, namespace, "get", "namespaces").stdout.splitlines()
    assert out[0].split()[0] == "NAME"
    assert namespace in [line.split()[0] for line in out[1:]]


def test_typed_create_commands_send_protobuf(server: Server, namespace: str) -> None:
    assert kubectl(server, namespace, "create", "namespace", "typed").stdout.strip() == (
        "namespace/typed created"
    )
    kubectl(server, namespace, "-n", "typed", "create", "configmap", "c", "--from-literal=a=b")
    kubectl(
        server, namespace, "-n", "typed", "create", "secret", "generic", "s", "--from-literal=p=q"
    )
    assert get_json(server, namespace, "-n", "typed", "configmap", "c")["data"] == {"a": "b"}
    assert get_json(server, namespace, "-n", "typed", "secret", "s")["data"] == {"p": "cQ=="}
    ns = get_json(server, namespace, "namespace", "typed")
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}


def test_server_side_apply_conflict_then_force(server: Server, namespace: str) -> None:
    kubectl(
        server,
        namespace,
        "apply",
        "--server-side",
        "-f",
        "-",
        stdin=DEPLOYMENT.format(name="ssa", ns=namespace, replicas=1),
    )
    other = DEPLOYMENT.format(name="ssa", ns=namespace, replicas=6)
    refused = kubectl(
        server,
        namespace,
        "apply",
        "--server-side",
        "--field-manager=other",
        "-f",
        "-",
        stdin=other,
        check=False,
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        'error: Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    )
    kubectl(
        server,
        namespace,
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        "-",
        stdin=other,
    )
    dep = get_json(server, namespace, "deployment", "ssa")
    assert dep["spec"]["replicas"] == 6


def test_kubectl_retries_through_injected_429s(tmp_path: Path) -> None:
    # Twin-only: fault injection.
    assert KUBECTL is not None
    faults = FaultConfig(error_rate=0.3, error_codes=(429,), retry_after=0, seed=2)
    with run_twin(tls=True, faults=faults) as faulty:
        done = subprocess.run(
            [KUBECTL, "--cache-dir", str(tmp_path), "get", "namespaces", "-o", "name"],
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": str(faulty.kubeconfig)},
            timeout=60,
        )
        assert faulty.faults.injected > 0
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "namespace/default",
        "namespace/kube-node-lease",
        "namespace/kube-public",
        "namespace/kube-system",
    ]
