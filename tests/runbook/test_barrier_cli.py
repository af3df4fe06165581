"""The merge step's taint barrier, on the homelab twin over HTTP (`gpushift cutover` in a
separate process, as a user runs it): the default barrier, a refusal when the new
allocator's DaemonSet tolerates every taint (at the merge target, or in the cluster without
one), and a cutover whose kubelet plugin tolerates the default barrier's key, held off the
nodes by the other barrier until the device plugin is gone (and the rollback whose device
plugin does the same).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.runbook.conftest import Env, homelab, wait_for
from tests.runbook.test_homelab import _result, _unsuspended, _untouched, _versions

from gpushift.kube import ResourceRef
from gpushift.runbook import STEPS

pytestmark = [pytest.mark.slow(seconds=25)]

DRIVER = "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"
OPERATOR = "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"
RELEASE = "HelmRelease/gpu-operator/dra-driver-nvidia-gpu"
HOLD = {"key": "gpushift.dev/cutover", "value": "dra", "effect": "NoSchedule"}
ALT = {"key": "gpushift.dev/cutover-barrier", "value": "dra", "effect": "NoSchedule"}
NARROW = (
    "narrow its tolerations to the taints it needs (the NVIDIA charts tolerate "
    "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule} by default)"
)
DAEMONSET = ResourceRef.named("DaemonSet")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(tmp_path_factory.mktemp("homelab")) as e:
        yield e


def _with_values(env: Env, name: str, tree: Path, file: str, anchor: str, added: str) -> Path:
    """A copy of ``tree`` with ``added`` (values lines) written after the line ``anchor``
    of ``file``; returns the copy and checks the line the values start at."""
    copy = env.tmp / name
    shutil.copytree(tree, copy)
    path = copy / file
    text = path.read_text()
    assert text.count(anchor) == 1
    path.write_text(text.replace(anchor, anchor + added))
    return copy


def _line(tree: Path, file: str, text: str) -> int:
    return (tree / file).read_text().splitlines().index(text) + 1


def _plan(env: Env, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    before = _versions(env)
    code, out, err = env.cutover("cutover", "--plan", *args)
    _untouched(before, _versions(env))
    return code, out, err


def test_the_default_barrier_when_the_charts_tolerations_are_kept(env: Env) -> None:
    code, out, err = _plan(env, "--to", "dra", "--repo", str(env.plugin), "--target", str(env.dra))
    assert code == 0, err
    plan = out[0]
    assert plan["refusals"] == [] and plan["barrier"] == HOLD
    assert (
        f"the barrier gpushift.dev/cutover=dra:NoSchedule: {RELEASE} kubeletPlugin.tolerations "
        f"({DRIVER}:{_line(env.dra, DRIVER, '  values:')}, the chart's default) does not "
        "tolerate it;"
    ) in plan["steps"][0]["note"]
    merge = next(s for s in plan["steps"] if s["name"] == "merge")
    assert merge["note"] == (
        "the barrier: every GPU node tainted gpushift.dev/cutover=dra:NoSchedule until the old "
        "allocator is gone"
    )
    held = [a for a in merge["actions"] if a.get("field") == "spec.taints"]
    assert [(a["patch"], a["after"]) for a in held] == [
        (f"Node/{n}", [HOLD]) for n in ("k8s-1", "k8s-2", "k8s-3")
    ]


def test_a_target_kubelet_plugin_tolerating_every_taint_is_refused(env: Env) -> None:
    anchor = "    nvidiaDriverRoot: /usr/local\n"
    wide = _with_values(
        env, "wide", env.dra, DRIVER, anchor, "    kubeletPlugin:\n      tolerations:\n"
        "        - operator: Exists\n",
    )  # fmt: skip
    line = _line(wide, DRIVER, "      tolerations:")
    before = _versions(env)
    code, events, err = env.cutover(
        "cutover", "--to", "dra", "--repo", str(env.plugin), "--target", str(wide),
        "--merge", "false",
    )  # fmt: skip
    assert code == 4, err
    _untouched(before, _versions(env))
    result = _result(events)
    assert result["result"] == "refused"
    assert result["reasons"] == [
        f"{DRIVER}:{line}: {RELEASE} at the target: kubeletPlugin.tolerations has "
        "{operator: Exists}, which tolerates every taint, the cutover's barrier "
        "gpushift.dev/cutover=dra:NoSchedule among them, so the DRA kubelet plugin would start "
        f"beside the device plugin before that is gone; {NARROW}"
    ]
    # --plan says the same, and shows no barrier.
    code, out, _ = _plan(env, "--to", "dra", "--repo", str(env.plugin), "--target", str(wide))
    assert code == 4
    assert out[0]["refusals"] == result["reasons"] and out[0]["barrier"] is None
    merge = next(s for s in out[0]["steps"] if s["name"] == "merge")
    assert merge["note"].startswith("no barrier: ")
    assert not [a for a in merge["actions"] if a.get("field") == "spec.taints"]
    assert out[-1]["result"] == "refused"


def test_a_target_operator_tolerating_every_noschedule_taint_is_refused(env: Env) -> None:
    # The way back: the gpu-operator's daemonsets.tolerations go onto its device plugin.
    anchor = "  values:\n"
    wide = _with_values(
        env, "wide-operator", env.plugin, OPERATOR, anchor, "    daemonsets:\n"
        "      tolerations:\n        - {operator: Exists, effect: NoSchedule}\n",
    )  # fmt: skip
    line = _line(wide, OPERATOR, "      tolerations:")
    code, out, _ = _plan(
        env, "--to", "device-plugin", "--repo", str(env.dra), "--target", str(wide)
    )
    assert code == 4
    assert (
        f"{OPERATOR}:{line}: HelmRelease/gpu-operator/gpu-operator at the target: "
        "daemonsets.tolerations has {operator: Exists, effect: NoSchedule}, which tolerates "
        "every NoSchedule taint, the cutover's barrier "
        "gpushift.dev/cutover=device-plugin:NoSchedule among them (only a NoExecute taint would "
        "hold it off, and that evicts every pod of the node that does not tolerate it), so the "
        f"device plugin would start beside the DRA driver before that is gone; {NARROW}"
    ) in out[0]["refusals"]


KUBELET_PLUGIN = {
    "metadata": {"name": "dra-driver-nvidia-gpu-kubelet-plugin", "namespace": "default"},
    "spec": {
        "selector": {"matchLabels": {"app": "kubelet-plugin"}},
        "template": {
            "metadata": {"labels": {"app": "kubelet-plugin"}},
            "spec": {
                # Its pods go nowhere: only its tolerations are read.
                "nodeSelector": {"gpushift.test/nowhere": "true"},
                "tolerations": [{"operator": "Exists"}],
                "containers": [{"name": "plugin", "image": "example/idle:1"}],
            },
        },
    },
}


def test_without_a_target_the_clusters_kubelet_plugin_is_read(env: Env) -> None:
    with env.client() as c:
        c.create(DAEMONSET, KUBELET_PLUGIN, namespace="default")
        try:
            code, out, _ = _plan(env, "--to", "dra")
        finally:
            c.delete(DAEMONSET, name=KUBELET_PLUGIN["metadata"]["name"], namespace="default")
    assert code == 4
    assert out[0]["refusals"] == [
        "DaemonSet/default/dra-driver-nvidia-gpu-kubelet-plugin: spec.template.spec.tolerations "
        "has {operator: Exists}, which tolerates every taint, the cutover's barrier "
        "gpushift.dev/cutover=dra:NoSchedule among them, so the DRA kubelet plugin would start "
        f"beside the device plugin before that is gone; {NARROW}"
    ]


#: The new allocator's pods, by the name of their DaemonSet.
NEW_AGENT = {
    "dra": "dra-driver-nvidia-gpu-kubelet-plugin",
    "device-plugin": "nvidia-device-plugin-daemonset",
}


def _agent_nodes(env: Env, to: str) -> set[str]:
    """The nodes with a pod of the new allocator's DaemonSet."""
    return {
        str((p.get("spec") or {}).get("nodeName"))
        for p in env.objects("Pod")
        if p["metadata"]["name"].startswith(NEW_AGENT[to])
    }


def _held(env: Env) -> set[str]:
    """The nodes carrying a barrier (either key)."""
    return {
        n["metadata"]["name"]
        for n in env.objects("Node")
        if any(
            t.get("key", "").startswith("gpushift.dev/cutover")
            for t in (n.get("spec") or {}).get("taints") or []
        )
    }


@contextlib.contextmanager
def _breaches(env: Env, to: str) -> Iterator[set[str]]:
    """Watch every node while the block runs: the nodes where a pod of the new allocator
    ever was while the barrier held the node (the barrier itself; the twin's monitor judges
    advertising). Pods are read before nodes, and a barrier once lifted is not put back, so
    a pod seen with a taint seen after it was there while the node was held."""
    breached: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            agents = _agent_nodes(env, to)
            breached.update(agents & _held(env))
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield breached
    finally:
        done.set()
        watcher.join()


def test_a_kubelet_plugin_tolerating_the_cutover_key_is_held_by_the_other_barrier(
    env: Env,
) -> None:
    # Last in the module: the twin ends on DRA.
    anchor = "    nvidiaDriverRoot: /usr/local\n"
    keyed = _with_values(
        env, "keyed", env.dra, DRIVER, anchor, "    kubeletPlugin:\n      tolerations:\n"
        "        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n"
        "        - {key: gpushift.dev/cutover, operator: Exists}\n",
    )  # fmt: skip
    code, out, err = _plan(env, "--to", "dra", "--repo", str(env.plugin), "--target", str(keyed))
    assert code == 0, err
    assert out[0]["barrier"] == ALT
    with _breaches(env, "dra") as breached:
        code, events, err = env.cutover(
            "cutover", "--to", "dra", "--repo", str(env.plugin), "--target", str(keyed),
            "--merge", env.merge(keyed), "--step-timeout", "90s",
        )  # fmt: skip
    result = _result(events)
    assert code == 0, (err, result)
    assert [s["result"] for s in result["steps"]] == ["done"] * len(STEPS)
    taints = [
        (e["step"], e["object"], json.dumps(e["after"]))
        for e in events
        if e.get("event") == "change" and e["field"] == "spec.taints"
    ]
    nodes = ("k8s-1", "k8s-2", "k8s-3")
    assert taints == [("merge", f"Node/{n}", json.dumps([ALT])) for n in nodes] + [
        ("new-allocator-up", f"Node/{n}", "null") for n in nodes
    ]
    assert breached == set()
    # The kubelet plugin did come up, with the toleration it was given, and the nodes are free.
    wait_for(lambda: _agent_nodes(env, "dra") == set(nodes), what="the kubelet plugin everywhere")
    ds = env.get("DaemonSet", "gpu-operator", "dra-driver-nvidia-gpu-kubelet-plugin")
    assert {"key": "gpushift.dev/cutover", "operator": "Exists"} in ds["spec"]["template"]["spec"][
        "tolerations"
    ]
    assert all(not (n.get("spec") or {}).get("taints") for n in env.objects("Node"))
    assert env.journal()["facts"]["barrier"] == ALT
    _unsuspended(env)
    assert env.violations() == []

    # And back: the gpu-operator's daemonsets.tolerations, on its device plugin, name the key.
    keyed_back = _with_values(
        env, "keyed-back", env.plugin, OPERATOR, "  values:\n", "    daemonsets:\n"
        "      tolerations:\n"
        "        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n"
        "        - {key: gpushift.dev/cutover, operator: Exists}\n",
    )  # fmt: skip
    with _breaches(env, "device-plugin") as breached_back:
        code, events, err = env.cutover(
            "rollback", "--repo", str(env.dra), "--target", str(keyed_back),
            "--merge", env.merge(keyed_back), "--step-timeout", "90s",
        )  # fmt: skip
    result = _result(events)
    assert code == 0, (err, result)
    assert result["to"] == "device-plugin" and result["result"] == "done"
    back = {**ALT, "value": "device-plugin"}
    assert [
        (e["step"], e["object"], json.dumps(e["after"]))
        for e in events
        if e.get("event") == "change" and e["field"] == "spec.taints"
    ] == [("merge", f"Node/{n}", json.dumps([back])) for n in nodes] + [
        ("new-allocator-up", f"Node/{n}", "null") for n in nodes
    ]
    assert breached_back == set()
    assert env.allocatable() == {n: "5" for n in nodes}
    ds = env.get("DaemonSet", "gpu-operator", "nvidia-device-plugin-daemonset")
    assert {"key": "gpushift.dev/cutover", "operator": "Exists"} in ds["spec"]["template"]["spec"][
        "tolerations"
    ]
    _unsuspended(env)
    assert env.violations() == []
