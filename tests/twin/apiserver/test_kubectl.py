"""The twin driven by the real kubectl, through the kubeconfig it emits."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpushift._kinds import by_kind
from gpushift.twin import FaultConfig, Twin, run_twin, write_kubeconfig

KUBECTL = shutil.which("kubectl")
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


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twin]:
    with run_twin(tls=True) as running:
        running.store.create(by_kind("Namespace"), {"metadata": {"name": "kt"}})
        yield running


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kubectl-cache")


def kubectl(
    twin: Twin,
    cache: Path,
    *args: str,
    stdin: str | None = None,
    check: bool = True,
    kubeconfig: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    env = {**os.environ, "KUBECONFIG": str(kubeconfig or twin.kubeconfig)}
    done = subprocess.run(
        [KUBECTL, "--cache-dir", str(cache), "-n", "kt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
    return done


def get_json(twin: Twin, cache: Path, *args: str) -> Any:
    return json.loads(kubectl(twin, cache, "get", *args, "-o", "json").stdout)


def test_apply_creates_then_configures_then_is_unchanged(twin: Twin, cache: Path) -> None:
    manifest = DEPLOYMENT.format(name="web", ns="kt", replicas=1)
    assert kubectl(twin, cache, "apply", "-f", "-", stdin=manifest).stdout.strip() == (
        "deployment.apps/web created"
    )
    first = get_json(twin, cache, "deployment", "web")
    assert first["metadata"]["generation"] == 1
    assert first["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "MODE", "value": "fast"}
    ]
    assert "kubectl.kubernetes.io/last-applied-configuration" in first["metadata"]["annotations"]
    changed = DEPLOYMENT.format(name="web", ns="kt", replicas=2)
    assert kubectl(twin, cache, "apply", "-f", "-", stdin=changed).stdout.strip() == (
        "deployment.apps/web configured"
    )
    second = get_json(twin, cache, "deployment", "web")
    assert second["spec"]["replicas"] == 2 and second["metadata"]["generation"] == 2
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["metadata"]["uid"] == first["metadata"]["uid"]
    assert kubectl(twin, cache, "apply", "-f", "-", stdin=changed).stdout.strip() == (
        "deployment.apps/web unchanged"
    )


def test_three_patch_types(twin: Twin, cache: Path) -> None:
    kubectl(
        twin, cache, "apply", "-f", "-", stdin=DEPLOYMENT.format(name="pt", ns="kt", replicas=1)
    )
    # Strategic: containers merge by name, so the env survives an image change.
    kubectl(
        twin,
        cache,
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
        twin,
        cache,
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
        twin,
        cache,
        "patch",
        "deployment",
        "pt",
        "--type",
        "json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":4}]',
    )
    dep = get_json(twin, cache, "deployment", "pt")
    assert dep["spec"]["template"]["spec"]["containers"] == [
        {"name": "app", "image": "nginx:2", "env": [{"name": "MODE", "value": "fast"}]}
    ]
    assert dep["metadata"]["labels"] == {"tier": "front"}
    assert dep["spec"]["replicas"] == 4
    # Image change and replicas change are spec changes; the label change is not.
    assert dep["metadata"]["generation"] == 3


def test_scale_goes_through_the_scale_subresource(twin: Twin, cache: Path) -> None:
    kubectl(
        twin, cache, "apply", "-f", "-", stdin=DEPLOYMENT.format(name="sc", ns="kt", replicas=1)
    )
    assert kubectl(twin, cache, "scale", "deployment", "sc", "--replicas=5").stdout.strip() == (
        "deployment.apps/sc scaled"
    )
    assert get_json(twin, cache, "deployment", "sc")["spec"]["replicas"] == 5


def test_get_watch_catches_a_live_event(twin: Twin, cache: Path) -> None:
    assert KUBECTL is not None
    env = {**os.environ, "KUBECONFIG": str(twin.kubeconfig)}
    proc = subprocess.Popen(
        [KUBECTL, "--cache-dir", str(cache), "-n", "kt", "get", "configmaps", "-w", "-o", "name"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(
        target=lambda: [lines.put(line.strip()) for line in proc.stdout],  # type: ignore[union-attr]
        daemon=True,
    ).start()
    try:
        before = twin.store.resource_version
        _wait_for_watchers(twin)
        kubectl(
            twin,
            cache,
            "apply",
            "-f",
            "-",
            stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: live}\n",
        )
        seen = []
        while "configmap/live" not in seen:
            seen.append(lines.get(timeout=10))
        assert twin.store.resource_version > before
    finally:
        proc.terminate()
        proc.wait(10)


def _wait_for_watchers(twin: Twin) -> None:
    import time

    deadline = time.monotonic() + 10
    key = ("", "configmaps")
    while time.monotonic() < deadline:
        if twin.store._watchers.get(key):
            return
        time.sleep(0.02)
    raise AssertionError("kubectl never started watching")


def _with_replica_set(twin: Twin, name: str) -> None:
    store = twin.store
    dep = store.create(
        by_kind("Deployment"),
        {"metadata": {"name": name, "namespace": "kt"}, "spec": {"replicas": 1}},
    )
    ref = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": name,
        "uid": dep["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    store.create(
        by_kind("ReplicaSet"),
        {"metadata": {"name": f"{name}-1", "namespace": "kt", "ownerReferences": [ref]}},
    )


def test_delete_cascades_by_default_and_orphans_on_request(twin: Twin, cache: Path) -> None:
    _with_replica_set(twin, "gone")
    kubectl(twin, cache, "delete", "deployment", "gone")
    assert kubectl(twin, cache, "get", "replicaset", "gone-1", check=False).returncode == 1
    _with_replica_set(twin, "fg")
    kubectl(twin, cache, "delete", "deployment", "fg", "--cascade=foreground")
    assert kubectl(twin, cache, "get", "replicaset", "fg-1", check=False).returncode == 1
    _with_replica_set(twin, "kept")
    kubectl(twin, cache, "delete", "deployment", "kept", "--cascade=orphan")
    rs = get_json(twin, cache, "replicaset", "kept-1")
    assert "ownerReferences" not in rs["metadata"]


def test_server_dry_run_changes_nothing(twin: Twin, cache: Path) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: dry}\ndata: {a: b}\n"
    out = kubectl(twin, cache, "apply", "--dry-run=server", "-f", "-", stdin=manifest)
    assert out.stdout.strip() == "configmap/dry created (server dry run)"
    assert kubectl(twin, cache, "get", "configmap", "dry", check=False).returncode == 1
    kubectl(twin, cache, "apply", "-f", "-", stdin=manifest)
    kubectl(twin, cache, "delete", "configmap", "dry", "--dry-run=server")
    assert get_json(twin, cache, "configmap", "dry")["data"] == {"a": "b"}


def test_label_and_field_selectors(twin: Twin, cache: Path) -> None:
    docs = []
    for name, labels in (
        ("s-a", "{app: a, tier: front}"),
        ("s-b", "{app: b, tier: back}"),
        ("s-c", "{app: c, gpu: 'yes'}"),
    ):
        docs.append(
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, labels: {labels}}}\n"
        )
    kubectl(twin, cache, "apply", "-f", "-", stdin="---\n".join(docs))

    def names(*args: str) -> list[str]:
        return kubectl(twin, cache, "get", "configmaps", *args, "-o", "name").stdout.split()

    assert names("-l", "app=a") == ["configmap/s-a"]
    assert names("-l", "tier in (front,back)") == ["configmap/s-a", "configmap/s-b"]
    assert names("-l", "app,!gpu,app!=b") == ["configmap/s-a"]
    assert names("-l", "gpu") == ["configmap/s-c"]
    assert names("--field-selector", "metadata.name=s-b") == ["configmap/s-b"]
    bad = kubectl(twin, cache, "get", "configmaps", "--field-selector", "data.a=b", check=False)
    assert bad.returncode == 1 and "field label not supported: data.a" in bad.stderr


def test_crd_then_custom_resource(twin: Twin, cache: Path) -> None:
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
    kubectl(twin, cache, "apply", "-f", "-", stdin=crd)
    established = get_json(twin, cache, "crd", "widgets.example.com")["status"]["conditions"]
    assert {c["type"]: c["status"] for c in established} == {
        "NamesAccepted": "True",
        "Established": "True",
    }
    cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n"
    assert kubectl(twin, cache, "apply", "-f", "-", stdin=cr).stdout.strip() == (
        "widget.example.com/w1 created"
    )
    got = get_json(twin, cache, "wdg", "w1")
    assert got["spec"] == {"size": 3} and got["metadata"]["generation"] == 1
    # Custom resources take no strategic merge patch, as upstream.
    smp = kubectl(
        twin,
        cache,
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


def test_replace_with_a_stale_resource_version_is_a_conflict(twin: Twin, cache: Path) -> None:
    kubectl(
        twin,
        cache,
        "apply",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: stale}\ndata: {v: '1'}\n",
    )
    old = get_json(twin, cache, "configmap", "stale")
    kubectl(
        twin, cache, "patch", "configmap", "stale", "--type", "merge", "-p", '{"data":{"v":"2"}}'
    )
    old["data"]["v"] = "3"
    done = kubectl(twin, cache, "replace", "-f", "-", stdin=json.dumps(old), check=False)
    assert done.returncode == 1
    assert (
        'Error from server (Conflict): error when replacing "STDIN": Operation cannot be '
        'fulfilled on configmaps "stale": the object has been modified; please apply your '
        "changes to the latest version and try again"
    ) in done.stderr


def test_a_wrong_token_is_unauthorized(twin: Twin, cache: Path, tmp_path: Path) -> None:
    bad = write_kubeconfig(
        tmp_path / "bad", server=twin.url, token="not-the-token", ca_pem=twin.ca_pem
    )
    done = kubectl(twin, cache, "get", "configmaps", kubeconfig=bad, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == "error: You must be logged in to the server (Unauthorized)"
    assert twin.token not in done.stderr


def test_table_output_has_name_column(twin: Twin, cache: Path) -> None:
    out = kubectl(twin, cache, "get", "namespaces").stdout.splitlines()
    assert out[0].split()[0] == "NAME"
    assert "kt" in [line.split()[0] for line in out[1:]]


def test_typed_create_commands_send_protobuf(twin: Twin, cache: Path) -> None:
    assert kubectl(twin, cache, "create", "namespace", "typed").stdout.strip() == (
        "namespace/typed created"
    )
    kubectl(twin, cache, "-n", "typed", "create", "configmap", "c", "--from-literal=a=b")
    kubectl(twin, cache, "-n", "typed", "create", "secret", "generic", "s", "--from-literal=p=q")
    assert get_json(twin, cache, "-n", "typed", "configmap", "c")["data"] == {"a": "b"}
    assert get_json(twin, cache, "-n", "typed", "secret", "s")["data"] == {"p": "cQ=="}
    ns = get_json(twin, cache, "namespace", "typed")
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}


def test_server_side_apply_conflict_then_force(twin: Twin, cache: Path) -> None:
    kubectl(
        twin,
        cache,
        "apply",
        "--server-side",
        "-f",
        "-",
        stdin=DEPLOYMENT.format(name="ssa", ns="kt", replicas=1),
    )
    other = DEPLOYMENT.format(name="ssa", ns="kt", replicas=6)
    refused = kubectl(
        twin,
        cache,
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
        twin,
        cache,
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        "-",
        stdin=other,
    )
    dep = get_json(twin, cache, "deployment", "ssa")
    assert dep["spec"]["replicas"] == 6


def test_kubectl_retries_through_injected_429s(tmp_path: Path) -> None:
    faults = FaultConfig(error_rate=0.3, error_codes=(429,), retry_after=0, seed=2)
    with run_twin(tls=True, faults=faults) as faulty:
        done = kubectl(faulty, tmp_path, "get", "namespaces", "-o", "name")
        assert faulty.faults.injected > 0
    assert done.stdout.split() == [
        "namespace/default",
        "namespace/kube-node-lease",
        "namespace/kube-public",
        "namespace/kube-system",
    ]
