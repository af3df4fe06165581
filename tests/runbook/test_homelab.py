"""`gpushift cutover --to dra` and `gpushift rollback` on the homelab twin, end to end, as a
user runs them (a separate process over HTTP), with the twin's invariant monitor watching."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.runbook.conftest import MEDIA, Env, homelab, wait_for

from gpushift.kube import ResourceRef
from gpushift.runbook import JOURNAL_NAME, STEPS, chunk_name, read_local

pytestmark = [pytest.mark.slow(seconds=25)]

KS = "kustomize.toolkit.fluxcd.io/v1"
HR = "helm.toolkit.fluxcd.io/v2"
ISVC = "inference.llmkube.dev/v1alpha1"
DAEMONSET = ResourceRef.named("DaemonSet")
#: A GPU consumer applied by hand (no Flux owner): one encoder per GPU node.
ENCODER = {
    "metadata": {"name": "encoder", "namespace": "default"},
    "spec": {
        "selector": {"matchLabels": {"app": "encoder"}},
        "template": {
            "metadata": {"labels": {"app": "encoder"}},
            "spec": {
                "containers": [
                    {
                        "name": "enc",
                        "image": "encoder:1",
                        "resources": {"limits": {"nvidia.com/gpu": 1}},
                    }
                ],
                "tolerations": [{"operator": "Exists"}],
            },
        },
    },
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(tmp_path_factory.mktemp("homelab")) as e:
        yield e


def _versions(env: Env) -> dict[str, tuple[str, str]]:
    """(generation, resourceVersion) of every object."""
    out = {}
    for kind in env.twin.store.kinds():
        for o in env.twin.store.list(kind).objects:
            meta = o["metadata"]
            key = f"{kind.kind}/{meta.get('namespace')}/{meta['name']}"
            out[key] = (str(meta.get("generation")), str(meta["resourceVersion"]))
    return out


def _written_by_gpushift(env: Env) -> list[str]:
    """Objects whose managedFields name the field manager gpushift."""
    out = []
    for kind in env.twin.store.kinds():
        for o in env.twin.store.list(kind).objects:
            managers = {m.get("manager") for m in o["metadata"].get("managedFields") or []}
            if "gpushift" in managers:
                out.append(f"{kind.kind}/{o['metadata'].get('namespace')}/{o['metadata']['name']}")
    return out


def _untouched(before: dict[str, tuple[str, str]], after: dict[str, tuple[str, str]]) -> None:
    """No object was created, deleted or had its spec changed by the command (the Flux
    controllers still write status while it runs, so resourceVersions of status move)."""
    assert set(after) == set(before)
    assert {k: after[k][0] for k in after} == {k: before[k][0] for k in before}


def _unsuspended(env: Env) -> None:
    """Nothing the run suspended is left suspended, nothing left at 0."""
    for name in MEDIA:
        assert env.get("Kustomization", "media", name, KS)["spec"].get("suspend") in (None, False)
        assert env.get("HelmRelease", "media", name, HR)["spec"].get("suspend") in (None, False)
        assert env.get("Deployment", "media", name)["spec"]["replicas"] == 1
    assert env.get("Kustomization", "ai", "llmkube-models", KS)["spec"].get("suspend") in (
        None,
        False,
    )
    assert env.get("InferenceService", "ai", "llama-nvidia", ISVC)["spec"]["replicas"] == 1
    assert env.get("Deployment", "ai", "llama-nvidia")["spec"]["replicas"] == 1


def _short(key: str) -> str:
    kind, ns, name = key.split("/")
    return f"{kind}/{name}" if ns == "None" else f"{kind}/{ns}/{name}"


def _result(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert events[-1]["kind"] == "CutoverResult", events[-1]
    return events[-1]


def test_plan_changes_nothing_and_shows_every_patch_and_wait(env: Env) -> None:
    before = _versions(env)
    code, out, err = env.cutover("cutover", "--to", "dra", "--plan")
    assert code == 0, err
    _untouched(before, _versions(env))
    assert _written_by_gpushift(env) == []
    # The workloads and releases the plan would patch did not move at all (sources and the
    # root Kustomization get status writes from Flux on their own).
    named = {
        a["patch"]
        for st in out[0]["steps"]
        for a in st["actions"]
        if "patch" in a and a["patch"].split("/")[0] in ("Deployment", "InferenceService")
    }
    assert len(named) == 7
    after = _versions(env)
    assert {k: after[k] for k in after if _short(k) in named} == {
        k: before[k] for k in before if _short(k) in named
    }
    plan = out[0]
    assert plan["kind"] == "CutoverPlan"
    assert [s["name"] for s in plan["steps"]] == list(STEPS)
    suspend = next(s for s in plan["steps"] if s["name"] == "suspend")
    patched = {(a["patch"], a["field"]): (a["before"], a["after"]) for a in suspend["actions"]}
    # Six app-template releases, each under its own Kustomization, and the llmkube model.
    for name in MEDIA:
        assert patched[(f"Kustomization/media/{name}", "spec.suspend")] == (None, True)
        assert patched[(f"HelmRelease/media/{name}", "spec.suspend")] == (None, True)
        assert patched[(f"Deployment/media/{name}", "spec.replicas")] == (1, 0)
    # The operator resource is scaled, not the Deployment its controller would scale back.
    assert patched[("InferenceService/ai/llama-nvidia", "spec.replicas")] == (1, 0)
    assert ("Deployment/ai/llama-nvidia", "spec.replicas") not in patched
    assert ("Kustomization/flux-system/cluster-apps", "spec.suspend") not in patched
    waits = [a["wait"] for s in plan["steps"] for a in s["actions"] if "wait" in a]
    assert "allocatable nvidia.com/gpu: k8s-1 0, k8s-2 0, k8s-3 0" in waits
    assert any("shares 5" in w for w in waits)
    # The journal's objects are named too: the homelab's records fill one chunk.
    assert plan["journal"] == {
        "head": f"ConfigMap/flux-system/{JOURNAL_NAME}",
        "chunks": [f"ConfigMap/flux-system/{chunk_name(1)}"],
        "lease": "Lease/flux-system/gpushift-cutover",
        "deletes": f"ConfigMap/flux-system/{chunk_name(1)}… of the previous run",
    }
    assert out[-1]["result"] == "planned" and out[-1]["exitCode"] == 0


def test_preflight_refuses_with_every_reason_at_once(env: Env) -> None:
    with env.client() as c:
        c.patch(
            ResourceRef.named("Namespace"),
            name="gpu-operator",
            patch={"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}},
        )
        try:
            before = _versions(env)
            code, events, _ = env.cutover(
                "cutover", "--to", "dra", "--apps", "flux-system/nope", "--merge", "false"
            )
            after = _versions(env)
        finally:
            c.patch(
                ResourceRef.named("Namespace"),
                name="gpu-operator",
                patch={"metadata": {"labels": {"pod-security.kubernetes.io/enforce": None}}},
            )
    result = _result(events)
    assert code == 4 and result["result"] == "refused"
    assert result["reasons"] == [
        "Kustomization/flux-system/nope does not exist",
        "namespace gpu-operator enforces Pod Security 'baseline', which forbids the privileged "
        "pods the GPU driver runs (label it pod-security.kubernetes.io/enforce=privileged)",
    ]
    # A refused run changes nothing but the label this test set.
    _untouched(
        {k: v for k, v in before.items() if k != "Namespace/None/gpu-operator"},
        {k: v for k, v in after.items() if k != "Namespace/None/gpu-operator"},
    )


def test_without_a_tty_or_yes_it_refuses(env: Env) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushift",
            "cutover",
            "--to",
            "dra",
            "--kubeconfig",
            str(env.twin.kubeconfig),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 4
    final = json.loads(done.stdout.splitlines()[-1])
    assert final["reasons"] == [
        "no TTY to confirm on: give --yes to change the cluster, or --plan to see the plan"
    ]


def test_cutover_to_dra_then_rollback(env: Env) -> None:
    journal = env.tmp / "journal.json"
    with env.client() as c:
        c.create(DAEMONSET, ENCODER, namespace="default")
    wait_for(lambda: len(env.running("default")) == 3, what="the encoder DaemonSet's pods")
    first = env.start(
        "cutover",
        "--to",
        "dra",
        "--merge",
        env.merge(env.dra),
        "--prometheus-url",
        env.twin.url,
        "--step-timeout",
        "90s",
        journal=journal,
    )
    assert first.stdout is not None
    events = []
    for line in first.stdout:
        events.append(json.loads(line))
        if events[-1].get("event") == "step-start" and events[-1]["step"] == "suspend":
            break
    # A second run while the first holds the Lease is refused, naming the holder.
    code, second, _ = env.cutover("cutover", "--to", "dra", journal=env.tmp / "other.json")
    assert code == 4
    held = [r for r in _result(second)["reasons"] if "holds the lock" in r]
    assert len(held) == 1
    assert f"/{first.pid}/" in held[0] and "last renewed 20" in held[0]
    out, err = first.communicate(timeout=240)
    events += [json.loads(x) for x in out.splitlines() if x.strip()]
    code = first.returncode
    result = _result(events)
    assert code == 0, (err, result)
    assert result["result"] == "done" and result["to"] == "dra"
    assert [s["name"] for s in result["steps"]] == list(STEPS)
    assert all(s["result"] == "done" for s in result["steps"]), result["steps"]
    assert [e["step"] for e in events if e.get("event") == "step-start"] == list(STEPS)
    for e in events[:-1]:
        assert e["kind"] == "CutoverEvent" and e["time"].endswith("Z")
    changes = [e for e in events if e.get("event") == "change"]
    assert {
        (c["object"], c["field"], json.dumps(c["before"]), json.dumps(c["after"]))
        for c in changes
        if c["step"] == "suspend"
    } >= {("Deployment/media/plex", "spec.replicas", "1", "0")}
    # The device plugin is gone and DRA hands out shares.
    assert env.allocatable() == {"k8s-1": "0", "k8s-2": "0", "k8s-3": "0"}
    slices = env.objects("ResourceSlice")
    assert sorted(s["spec"]["nodeName"] for s in slices) == ["k8s-1", "k8s-2", "k8s-3"]
    media = env.running("media")
    assert len(media) == 6 and all(p["spec"].get("resourceClaims") for p in media)
    claims = {
        c["metadata"]["name"]: c
        for c in env.objects("ResourceClaim")
        if c["metadata"].get("namespace") == "media"
    }
    for pod in media:
        name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        assert claims[name]["status"]["allocation"]["devices"]["results"][0]["shareID"]
    llama = [p for p in env.running("ai") if p["metadata"]["name"].startswith("llama-nvidia")]
    assert len(llama) == 1
    assert llama[0]["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    _unsuspended(env)
    # The DaemonSet was parked on a nodeSelector no node matches, then set free again.
    parked = [c for c in changes if c["object"] == "DaemonSet/default/encoder"]
    assert [(c["step"], c["before"], c["after"]) for c in parked] == [
        ("suspend", None, "true"),
        ("resume", "true", None),
    ]
    encoder = env.get("DaemonSet", "default", "encoder")
    assert not encoder["spec"]["template"]["spec"].get("nodeSelector")
    assert len(env.running("default")) == 3
    assert env.violations() == []
    # The journal: finished, in the cluster and in the file, every change applied.
    stored = env.journal()
    assert stored["state"] == "done" and stored["run"] == result["run"]
    local = read_local(journal.read_text())
    assert local is not None and local.seq == stored["seq"] and local.to_json() == stored
    # Nothing outside the plan was written: the changed objects and the journal's.
    journal_objects = {
        f"ConfigMap/flux-system/{JOURNAL_NAME}",
        f"ConfigMap/flux-system/{chunk_name(1)}",
        "Lease/flux-system/gpushift-cutover",
    }
    written = set(_written_by_gpushift(env))
    assert written - {c["object"] for c in changes} == journal_objects
    assert {c["state"] for c in stored["changes"]} == {"applied"}
    lease = env.get("Lease", "flux-system", "gpushift-cutover")
    assert not lease["spec"].get("holderIdentity")
    if sum(s["seconds"] for s in result["steps"]) > 20:
        # Renewed every 15 s while the run held it.
        assert lease["spec"]["renewTime"] > lease["spec"]["acquireTime"]

    # A second cutover to DRA is refused: the cluster is there already.
    code, events, _ = env.cutover("cutover", "--to", "dra", journal=journal)
    assert code == 4
    assert "the cluster already allocates its GPUs through DRA" in _result(events)["reasons"]

    code, events, err = env.cutover(
        "rollback", "--merge", env.merge(env.plugin), "--step-timeout", "90s", journal=journal
    )
    result = _result(events)
    assert code == 0, (err, result)
    assert result["to"] == "device-plugin" and result["result"] == "done"
    assert [s["name"] for s in result["steps"]] == list(STEPS)
    assert env.allocatable() == {"k8s-1": "5", "k8s-2": "5", "k8s-3": "5"}
    assert env.objects("ResourceSlice") == []
    media = env.running("media")
    assert len(media) == 6 and not any(p["spec"].get("resourceClaims") for p in media)
    _unsuspended(env)
    assert env.violations() == []
    cm = env.get("ConfigMap", "flux-system", JOURNAL_NAME)
    history = json.loads(cm["data"]["history.json"])
    assert [h["to"] for h in history] == ["dra"]


def test_rollback_without_a_journal_is_refused(tmp_path: Path, env: Env) -> None:
    # A fresh local file but the cluster's journal decides: here the last run finished, so
    # rollback would move; with --abort there is nothing unfinished to undo.
    code, events, _ = env.cutover("rollback", "--abort", journal=tmp_path / "j.json")
    assert code == 4
    assert _result(events)["reasons"] == ["no unfinished cutover journal to abort"]


def test_ctrl_c_stops_between_changes_and_abort_undoes_the_journal(env: Env) -> None:
    journal = env.tmp / "abort.json"
    proc = env.start("cutover", "--to", "dra", "--step-timeout", "5m", journal=journal)
    assert proc.stdout is not None
    events = []
    for line in proc.stdout:
        events.append(json.loads(line))
        if events[-1].get("event") == "wait" and events[-1]["step"] == "merge":
            proc.send_signal(signal.SIGINT)  # waiting for a merge nobody makes
            break
    out, _err = proc.communicate(timeout=120)
    events += [json.loads(x) for x in out.splitlines() if x.strip()]
    result = _result(events)
    assert proc.returncode == 1
    assert result["result"] == "failed"
    assert result["reasons"] == ["interrupted: stopped between changes; --resume continues"]
    assert env.get("Deployment", "media", "plex")["spec"]["replicas"] == 0
    made = [e for e in events if e.get("event") == "change"]

    code, events, err = env.cutover("cutover", "--abort", journal=journal)
    result = _result(events)
    assert code == 0, err
    assert result["result"] == "aborted"
    undone = [e for e in events if e.get("event") == "change"]
    # Newest first, each set back to its value before; reconcile requests are not undone.
    expected = [
        {**c, "before": c["after"], "after": c["before"]}
        for c in reversed(made)
        if "requestedAt" not in c["field"]
    ]
    strip = lambda es: [(e["object"], e["field"], e["before"], e["after"]) for e in es]  # noqa: E731
    assert strip(undone) == strip(expected)
    wait_for(lambda: len(env.running("media")) == 6, what="media pods back")
    _unsuspended(env)
    stored = env.journal()
    assert stored["state"] == "aborted"
    assert {c["state"] for c in stored["changes"]} == {"undone"}
    assert env.violations() == []
