"""Each scenario fault of the twin is named by `gpushift doctor`, with its evidence and fix.

Two twins carry two faults each, on different nodes; the third node of each stays clean. The
doctor runs through the CLI against the twin's kubeconfig (real HTTP, gpushift.kube)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tests.verdict.conftest import Env, homelab, wait_for

from gpushift import verdict
from gpushift.cli import main

Obj = dict[str, Any]


def _doctor(env: Env, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Obj]:
    code = main(
        [
            "doctor",
            "--kubeconfig",
            str(env.twin.kubeconfig),
            "--prometheus-url",
            env.twin.url,
            "-o",
            "json",
            *args,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def _agent(env: Env, component: str, node: str) -> Obj | None:
    with env.client() as c:
        snap = verdict.take_snapshot(c)
    for agent in snap["agents"]:
        if agent["component"] == component:
            for p in agent["pods"]:
                if p["node"] == node:
                    return dict(p)
    return None


def _plugin_settled(env: Env) -> bool:
    # The NVML node's plugin has crashed and the crash-looping one restarted at least twice.
    nvml = _agent(env, "device-plugin", "k8s-1")
    loop = _agent(env, "device-plugin", "k8s-2")
    return bool(nvml and nvml["restarts"] >= 1 and loop and loop["restarts"] >= 2)


@pytest.fixture(scope="module")
def plugin_faults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(
        tmp_path_factory.mktemp("plugin"),
        node_faults={"k8s-1": "nvml-init-failure", "k8s-2": "plugin-crashloop"},
        settle=_plugin_settled,
    ) as env:
        yield env


def _waiting_for_driver(env: Env) -> bool:
    plugin = _agent(env, "dra-kubelet-plugin", "k8s-2")
    return bool(plugin and plugin["reason"] == "Init:0/1")


@pytest.fixture(scope="module")
def driver_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    # The DRA plugin waits on k8s-2, so its HelmRelease never gets Ready and Flux holds back
    # everything that depends on it: what a real cluster does too.
    with homelab(
        tmp_path_factory.mktemp("root"),
        allocator="dra",
        node_faults={"k8s-2": "driver-root-missing"},
        settle=_waiting_for_driver,
    ) as env:
        yield env


@pytest.fixture(scope="module")
def dcgm_rbac(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(
        tmp_path_factory.mktemp("dcgm"), allocator="dra", node_faults={"k8s-3": "dcgm-rbac-missing"}
    ) as env:
        yield env


def _problems(report: Obj, probe: str, obj: str) -> list[Obj]:
    return [p for p in report["problems"] if p["probe"] == probe and p["object"] == obj]


def test_nvml_init_failure_is_named_with_the_talos_fix(
    plugin_faults: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _doctor(plugin_faults, capsys, "--node", "k8s-1")
    assert code == 1
    [problem] = report["problems"]
    assert problem["probe"] == "node-not-advertising" and problem["object"] == "Node/k8s-1"
    assert "kernel modules are not loaded" in problem["summary"]
    evidence = "\n".join(problem["evidence"])
    assert "allocatable nvidia.com/gpu: absent" in evidence
    assert "GFD labels: none" in evidence
    assert "Failed to initialize NVML: ERROR_DRIVER_NOT_LOADED." in evidence
    assert "CrashLoopBackOff" in evidence
    assert "GPU schematic" in problem["fix"]
    assert "talosctl -n k8s-1 dmesg" in problem["fix"]


def test_plugin_crashloop_is_named_with_its_restarts_and_fix(
    plugin_faults: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _doctor(plugin_faults, capsys, "--node", "k8s-2")
    assert code == 1
    [problem] = _problems(report, "node-not-advertising", "Node/k8s-2")
    assert problem["summary"].startswith("the GPU plugin crash-loops (")
    evidence = "\n".join(problem["evidence"])
    assert "last exit OOMKilled (code 137)" in evidence
    assert "resources.limits.memory" in problem["fix"]
    # GFD is fine on that node: its labels are there.
    assert "nvidia.com/gpu.count=1" in evidence
    # Restarts keep growing, as the kubelet's back-off restarts the container.
    first = _agent(plugin_faults, "device-plugin", "k8s-2")
    assert first is not None and first["reason"] == "CrashLoopBackOff"
    wait_for(
        lambda: (
            (_agent(plugin_faults, "device-plugin", "k8s-2") or {})["restarts"] > first["restarts"]
        ),
        what="another restart",
    )


def test_a_clean_node_has_nothing_wrong(
    plugin_faults: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _doctor(plugin_faults, capsys, "--node", "k8s-3")
    assert (code, report["problems"], report["healthy"]) == (0, [], True)


def test_unknown_node_is_bad_input(plugin_faults: Env, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--kubeconfig", str(plugin_faults.twin.kubeconfig), "--node", "k8s-9"])
    assert code == 2
    assert "no node 'k8s-9'" in capsys.readouterr().err


def test_driver_root_missing_names_the_value_talos_needs(
    driver_root: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _doctor(driver_root, capsys, "--node", "k8s-2")
    assert code == 1
    [problem] = report["problems"]
    assert problem["probe"] == "dra-driver-root"
    assert problem["object"].startswith("Pod/gpu-operator/dra-driver-nvidia-gpu-kubelet-plugin-")
    evidence = "\n".join(problem["evidence"])
    assert "Init:0/1" in evidence
    assert "NVIDIA_DRIVER_ROOT (nvidiaDriverRoot): /usr/local" in evidence
    assert "nvidia-smi: not found, libnvidia-ml.so.1: not found" in evidence
    assert "/usr/local" in problem["fix"] and "Talos" in problem["fix"]


def test_dcgm_rbac_missing_names_the_binding_and_the_env(
    dcgm_rbac: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _doctor(dcgm_rbac, capsys, "--node", "k8s-3")
    assert code == 1
    [problem] = report["problems"]
    assert problem["probe"] == "dcgm-attribution"
    evidence = "\n".join(problem["evidence"])
    assert "series of held cards without pod labels: gpu=0" in evidence
    assert 'cannot list resource "resourceslices" in API group "resource.k8s.io"' in evidence
    assert "ClusterRoleBinding" in problem["fix"] and "KUBERNETES_ENABLE_DRA=true" in problem["fix"]


def _verdict(env: Env, capsys: pytest.CaptureFixture[str]) -> tuple[int, Obj]:
    code = main(
        [
            "verdict",
            "live",
            "--kubeconfig",
            str(env.twin.kubeconfig),
            "--prometheus-url",
            env.twin.url,
            "-o",
            "json",
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def test_verdict_of_the_waiting_driver_is_broken_at_the_node(
    driver_root: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = _verdict(driver_root, capsys)
    assert code == 1 and result["verdict"] == "broken"
    assert set(result) == {"kind", "verdict", "reasons"}
    assert all(set(r) == {"severity", "object", "message"} for r in result["reasons"])
    by_object = {r["object"]: r for r in result["reasons"]}
    assert by_object["Node/k8s-2"]["severity"] == "error"  # no slice, no allocatable
    assert by_object["HelmRelease/gpu-operator/dra-driver-nvidia-gpu"]["severity"] == "error"


def test_verdict_of_unattributed_series_is_degraded(
    dcgm_rbac: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    code, result = _verdict(dcgm_rbac, capsys)
    assert code == 1 and result["verdict"] == "degraded"
    warnings = [r for r in result["reasons"] if r["severity"] == "warning"]
    assert [r["object"] for r in warnings] == ["Node/k8s-3"]
    assert "DCGM series of card gpu-0 carry no pod labels" in warnings[0]["message"]
