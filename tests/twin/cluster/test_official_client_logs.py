"""pods/log of an agent pod, read with the official ``kubernetes`` Python client.

A twin with three one-card nodes runs the standalone device plugin's DaemonSet (applied with
kubectl); its plugin container logs what the real plugin logs when it registers.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.twin.cluster.conftest import KUBECTL, THREE_ONE_CARD_NODES, wait_for

kubernetes = pytest.importorskip("kubernetes")

from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from gpushift_twin.cluster import from_text, run_cluster  # noqa: E402

DEVICE_PLUGIN = (Path(__file__).resolve().parent / "manifests" / "device-plugin.yaml").read_text()
NS = "nvidia-device-plugin"
PLUGIN = "nvidia-device-plugin-ctr"
SIDECAR = "nvidia-device-plugin-sidecar"
# klog's header: level, MMDD, time with microseconds, thread id, file:line.
KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.]+:\d+\] ")


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed")
    kubeconfig = tmp_path_factory.mktemp("logs") / "kubeconfig"
    with run_cluster(
        from_text(THREE_ONE_CARD_NODES), time_scale=100, tls=True, kubeconfig=kubeconfig
    ) as (twin, _):
        subprocess.run(
            [KUBECTL, "--kubeconfig", str(twin.kubeconfig), "apply", "-f", "-"],
            input=DEVICE_PLUGIN,
            text=True,
            capture_output=True,
            check=True,
            timeout=60,
        )
        api = client.CoreV1Api(config.new_client_from_config(config_file=str(twin.kubeconfig)))
        wait_for(
            "three plugins registered",
            lambda: all(
                (n.status.allocatable or {}).get("nvidia.com/gpu") == "5"
                for n in api.list_node().items
            ),
            timeout=60,
        )
        yield api


def _plugin_pod(core: Any) -> str:
    pods = core.list_namespaced_pod(NS).items
    assert len(pods) == 3
    return str(sorted(p.metadata.name for p in pods)[0])


def test_the_plugin_container_logs_its_registration(core: Any) -> None:
    pod = _plugin_pod(core)
    text = core.read_namespaced_pod_log(pod, NS, container=PLUGIN)
    assert isinstance(text, str) and text.endswith("\n")
    lines = text.splitlines()
    assert all(KLOG.match(line) for line in lines), lines
    assert lines[0].endswith("] Starting NVIDIA Device Plugin")
    # server.go of the plugin: the gRPC server, its socket, then the kubelet registration.
    assert [KLOG.sub("", line) for line in lines[-3:]] == [
        "Starting GRPC server for 'nvidia.com/gpu'",
        "Starting to serve 'nvidia.com/gpu' on /var/lib/kubelet/device-plugins/nvidia-gpu.sock",
        "Registered device plugin for 'nvidia.com/gpu' with Kubelet",
    ]
    assert core.read_namespaced_pod_log(pod, NS, container=SIDECAR) == ""


def test_tail_lines_and_timestamps(core: Any) -> None:
    pod = _plugin_pod(core)
    lines = core.read_namespaced_pod_log(pod, NS, container=PLUGIN).splitlines()
    assert len(lines) > 2
    tail = core.read_namespaced_pod_log(pod, NS, container=PLUGIN, tail_lines=2)
    assert tail.splitlines() == lines[-2:]
    assert core.read_namespaced_pod_log(pod, NS, container=PLUGIN, tail_lines=0) == ""
    stamped = core.read_namespaced_pod_log(pod, NS, container=PLUGIN, tail_lines=1, timestamps=True)
    stamp, _, rest = stamped.rstrip("\n").partition(" ")
    assert rest == lines[-1]
    # RFC 3339 with nanoseconds, as the kubelet writes it, and not ahead of wall time.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", stamp)
    assert datetime.fromisoformat(stamp[:26] + "+00:00") <= datetime.now(UTC)


def test_a_wrong_or_missing_container_is_400_with_the_apiservers_words(core: Any) -> None:
    pod = _plugin_pod(core)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log(pod, NS, container="nope")
    assert err.value.status == 400
    body = json.loads(err.value.body)
    # pkg/registry/core/pod/strategy.go LogLocation
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status",
        "Failure",
        "BadRequest",
        400,
    )
    assert body["message"] == f"container nope is not valid for pod {pod}"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log(pod, NS)
    assert err.value.status == 400
    assert json.loads(err.value.body)["message"] == (
        f"a container name must be specified for pod {pod}, choose one of: [{SIDECAR} {PLUGIN}]"
    )
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log(pod, NS, container=PLUGIN, tail_lines=-1)
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == (
        "PodLogOptions is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
    )
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("missing", NS, container=PLUGIN)
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"] == 'pods "missing" not found'
