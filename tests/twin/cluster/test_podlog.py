"""pods/log on the twin, read with kubectl and gpushift.kube: the agents' own lines, the
apiserver's options and its error wording."""

from __future__ import annotations

import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from tests.verdict.conftest import Env, homelab, wait_for

from gpushift.kube import KubeError

Obj = dict[str, Any]


def _plugin_pod(env: Env, node: str) -> Obj:
    for p in env.pods("gpu-operator"):
        if (
            p["metadata"]["name"].startswith("nvidia-device-plugin")
            # A pod the DaemonSet controller has just created may not be bound yet.
            and p["spec"].get("nodeName") == node
        ):
            return p
    raise AssertionError(f"no device plugin pod on {node}")


def _crashed_twice(env: Env) -> bool:
    try:
        pod = _plugin_pod(env, "k8s-2")
    except AssertionError:
        return False  # not created yet
    return any(
        s["name"] == "nvidia-device-plugin" and s["restartCount"] >= 2
        for s in pod["status"].get("containerStatuses") or []
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(
        tmp_path_factory.mktemp("logs"),
        node_faults={"k8s-2": "plugin-crashloop"},
        tls=True,
        settle=_crashed_twice,
    ) as e:
        yield e


def _kubectl(env: Env, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(env.twin.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_device_plugin_log_shows_its_registration(env: Env) -> None:
    pod = _plugin_pod(env, "k8s-1")["metadata"]["name"]
    out = _kubectl(env, "-n", "gpu-operator", "logs", pod, "-c", "nvidia-device-plugin")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].endswith("] Starting NVIDIA Device Plugin")
    assert lines[0].startswith("I")  # klog: level, date, time, pid, file:line
    assert lines[-1].endswith("] Registered device plugin for 'nvidia.com/gpu' with Kubelet")
    tail = _kubectl(
        env, "-n", "gpu-operator", "logs", pod, "-c", "nvidia-device-plugin", "--tail=2"
    )
    assert tail.stdout.splitlines() == lines[-2:]
    stamped = _kubectl(
        env, "-n", "gpu-operator", "logs", pod, "-c", "nvidia-device-plugin", "--timestamps"
    )
    first = stamped.stdout.splitlines()[0]
    assert first.split(" ", 1)[1] == lines[0]
    assert first.split(" ", 1)[0].endswith("Z") and "T" in first.split(" ", 1)[0]


def test_log_is_text_plain(env: Env) -> None:
    pod = _plugin_pod(env, "k8s-1")["metadata"]["name"]
    request = urllib.request.Request(
        f"{env.twin.url}/api/v1/namespaces/gpu-operator/pods/{pod}/log?container=config-manager",
        headers={"Authorization": f"Bearer {env.twin.token}"},
    )
    context = ssl.create_default_context(cadata=(env.twin.ca_pem or b"").decode())
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        assert response.read() == b""  # the config-manager sidecar prints nothing here


def test_a_container_name_is_needed_for_a_pod_with_several(env: Env) -> None:
    pod = _plugin_pod(env, "k8s-1")["metadata"]["name"]
    with env.client() as c, pytest.raises(KubeError) as err:
        c.logs(name=pod, namespace="gpu-operator")
    assert err.value.code == 400 and err.value.reason == "BadRequest"
    # pkg/registry/core/pod/strategy.go LogLocation
    assert err.value.message == (
        f"a container name must be specified for pod {pod}, choose one of: "
        "[nvidia-device-plugin config-manager] or one of the init containers: "
        "[toolkit-validation config-manager-init]"
    )
    with env.client() as c, pytest.raises(KubeError) as err:
        c.logs(name=pod, namespace="gpu-operator", container="nope")
    assert err.value.message == f"container nope is not valid for pod {pod}"


def test_previous_run_of_a_crash_looping_plugin(env: Env) -> None:
    pod = _plugin_pod(env, "k8s-2")["metadata"]["name"]
    out = _kubectl(env, "-n", "gpu-operator", "logs", pod, "-c", "nvidia-device-plugin", "-p")
    assert out.returncode == 0, out.stderr
    assert "] Retrieving plugins." in out.stdout
    assert "Registered device plugin" not in out.stdout  # it never gets that far
    healthy = _plugin_pod(env, "k8s-1")["metadata"]["name"]
    with env.client() as c, pytest.raises(KubeError) as err:
        c.logs(
            name=healthy, namespace="gpu-operator", container="nvidia-device-plugin", previous=True
        )
    assert err.value.message == (
        f'previous terminated container "nvidia-device-plugin" in pod "{healthy}" not found'
    )


def test_follow_ends_with_the_run(env: Env) -> None:
    pod = _plugin_pod(env, "k8s-2")["metadata"]["name"]
    # Each restart starts a new run; the kubelet's back-off is at most 300 cluster seconds,
    # 1.5 s at this time scale, so the stream ends on its own.
    out = _kubectl(
        env, "-n", "gpu-operator", "logs", pod, "-c", "nvidia-device-plugin", "-f", timeout=20
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].endswith("] Starting NVIDIA Device Plugin")


def test_follow_streams_through_the_fault_proxy(env: Env) -> None:
    from gpushift_twin import run_proxy, target_from_kubeconfig

    pod = _plugin_pod(env, "k8s-2")["metadata"]["name"]
    with run_proxy(target_from_kubeconfig(env.twin.kubeconfig, None)) as proxy:
        out = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(proxy.kubeconfig),
                "-n",
                "gpu-operator",
                "logs",
                pod,
                "-c",
                "nvidia-device-plugin",
                "-f",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].endswith("] Starting NVIDIA Device Plugin")


def test_crash_loop_restarts_grow(env: Env) -> None:
    def restarts() -> int:
        pod = _plugin_pod(env, "k8s-2")
        return next(
            s["restartCount"]
            for s in pod["status"]["containerStatuses"]
            if s["name"] == "nvidia-device-plugin"
        )

    first = restarts()
    wait_for(lambda: restarts() > first, what="another restart")
    pod = _plugin_pod(env, "k8s-2")
    status = next(
        s for s in pod["status"]["containerStatuses"] if s["name"] == "nvidia-device-plugin"
    )
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert status["lastState"]["terminated"]["exitCode"] == 137
    table = _kubectl(env, "-n", "gpu-operator", "get", "pod", pod["metadata"]["name"])
    assert "CrashLoopBackOff" in table.stdout


def test_discovery_lists_pods_log(env: Env) -> None:
    out = _kubectl(env, "get", "--raw", "/api/v1")
    assert '"name":"pods/log"' in out.stdout.replace(" ", "")
