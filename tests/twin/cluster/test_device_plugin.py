"""The device-plugin side, driven by kubectl: registration, time-slicing, removal, admission."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow(seconds=20)]

MANIFESTS = Path(__file__).resolve().parent / "manifests"

DEVICE_PLUGIN = (MANIFESTS / "device-plugin.yaml").read_text()

GPU_APP = (MANIFESTS / "gpu-app.yaml").read_text()


def _gpu(node: dict[str, Any], part: str) -> str | None:
    value = node["status"][part].get("nvidia.com/gpu")
    return None if value is None else str(value)


def _phases(driver: Any, app: str) -> list[str]:
    pods = driver.get("pods", "-n", "default", "-l", f"app={app}")["items"]
    return sorted(p["status"].get("phase", "") for p in pods)


def test_time_slicing_registers_cards_times_replicas_and_the_16th_pod_waits(
    three_nodes: Any,
) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)

    def registered() -> bool:
        nodes = d.get("nodes")["items"]
        return all(_gpu(n, "allocatable") == "5" for n in nodes)

    d.wait_for("nvidia.com/gpu: 5 on every node", registered)
    for node in d.get("nodes")["items"]:
        assert _gpu(node, "capacity") == "5"
        labels = node["metadata"]["labels"]
        # GFD's labels for one L4 shared five ways.
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"
        assert labels["nvidia.com/gpu.replicas"] == "5"
        assert labels["nvidia.com/gpu.count"] == "1"
        assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
        assert labels["nvidia.com/gpu.memory"] == "23034"
        assert labels["nvidia.com/mig.capable"] == "false"

    d.apply(GPU_APP.format(name="gpu-app", replicas=16))
    d.wait_for(
        "15 Running, 1 Pending",
        lambda: _phases(d, "gpu-app") == ["Pending"] + ["Running"] * 15,
    )
    pending = next(
        p
        for p in d.get("pods", "-n", "default", "-l", "app=gpu-app")["items"]
        if p["status"]["phase"] == "Pending"
    )
    cond = {c["type"]: c for c in pending["status"]["conditions"]}["PodScheduled"]
    message = (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
        "available: 3 No preemption victims found for incoming pod."
    )
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", message)
    events = d.get(
        "events",
        "-n",
        "default",
        "--field-selector",
        f"involvedObject.name={pending['metadata']['name']}",
    )["items"]
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [
        ("Warning", "FailedScheduling", message)
    ]


def test_removing_the_plugin_zeroes_allocatable_at_once_and_capacity_after_the_grace(
    three_nodes: Any,
) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.wait_for(
        "registration",
        lambda: all(_gpu(n, "allocatable") == "5" for n in d.get("nodes")["items"]),
    )
    d.kubectl(
        "delete", "daemonset", "-n", "nvidia-device-plugin", "nvidia-device-plugin", "--wait=false"
    )
    # Allocatable drops when the plugin disconnects; capacity waits 5 minutes (3 s here).
    first = d.wait_for(
        "allocatable 0",
        lambda: (
            [(_gpu(n, "capacity"), _gpu(n, "allocatable")) for n in d.get("nodes")["items"]]
            if all(_gpu(n, "allocatable") == "0" for n in d.get("nodes")["items"])
            else None
        ),
        timeout=2.5,
    )
    assert first == [("5", "0")] * 3
    d.wait_for(
        "capacity 0",
        lambda: all(_gpu(n, "capacity") == "0" for n in d.get("nodes")["items"]),
        timeout=10,
    )
    for node in d.get("nodes")["items"]:
        # The key stays, at 0: kubelet never deletes a device plugin's resource.
        assert (_gpu(node, "capacity"), _gpu(node, "allocatable")) == ("0", "0")
        # GFD's sharing labels stay stale.
        assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "5"
    assert d.http("/twin/v1/nodes/nope/restart-kubelet", post=True) == {
        "message": 'node "nope" has no kubelet'
    }


def test_a_kubelet_restart_keeps_the_key_at_zero_until_the_plugin_registers_again(
    slow_plugin: Any,
) -> None:
    d = slow_plugin
    d.apply(DEVICE_PLUGIN)
    d.wait_for(
        "registration",
        lambda: all(_gpu(n, "allocatable") == "5" for n in d.get("nodes")["items"]),
    )
    assert d.http("/twin/v1/nodes/gpu-0/restart-kubelet", post=True) == {
        "node": "gpu-0",
        "restarted": True,
    }
    # Re-created from the checkpoint at 0 (the plugin takes 2 s here to register again).
    node = d.wait_for(
        "gpu-0 at 0",
        lambda: n if _gpu(n := d.get("node", "gpu-0"), "capacity") == "0" else None,
        timeout=1.5,
    )
    assert (_gpu(node, "capacity"), _gpu(node, "allocatable")) == ("0", "0")
    assert _gpu(d.get("node", "gpu-1"), "allocatable") == "5"
    node = d.wait_for(
        "re-registration",
        lambda: n if _gpu(n := d.get("node", "gpu-0"), "allocatable") == "5" else None,
    )
    assert _gpu(node, "capacity") == "5"


def test_a_pod_bound_past_the_ledger_is_rejected_as_the_kubelet_does(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.wait_for(
        "registration",
        lambda: all(_gpu(n, "allocatable") == "5" for n in d.get("nodes")["items"]),
    )
    d.kubectl(
        "delete", "daemonset", "-n", "nvidia-device-plugin", "nvidia-device-plugin", "--wait=false"
    )
    d.wait_for(
        "allocatable 0",
        lambda: all(_gpu(n, "allocatable") == "0" for n in d.get("nodes")["items"]),
    )
    # Bound by hand (no scheduler): the device manager has no healthy device left.
    d.apply("""\
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: default}
spec:
  nodeName: gpu-1
  containers:
  - name: app
    image: ghcr.io/example/app:1
    resources: {limits: {nvidia.com/gpu: 1}}
""")
    pod = d.wait_for(
        "rejection",
        lambda: (
            (p := d.get("pod", "-n", "default", "pinned"))["status"].get("phase") == "Failed" and p
        ),
    )
    assert pod["status"]["reason"] == "UnexpectedAdmissionError"
    assert pod["status"]["message"] == (
        "Pod was rejected: Allocate failed due to requested number of devices unavailable for "
        "nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"
    )


def test_a_resource_no_plugin_registered_fails_admission_as_out_of_it(three_nodes: Any) -> None:
    d = three_nodes
    d.apply("""\
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: default}
spec:
  nodeName: gpu-2
  containers:
  - name: app
    image: ghcr.io/example/app:1
    resources: {limits: {nvidia.com/gpu: 2}}
""")
    pod = d.wait_for(
        "rejection",
        lambda: (
            p
            if (p := d.get("pod", "-n", "default", "pinned"))["status"].get("phase") == "Failed"
            else None
        ),
    )
    # k8s.io/kubernetes pkg/kubelet/lifecycle predicate.go: InsufficientResourceError.
    assert pod["status"]["reason"] == "OutOfnvidia.com/gpu"
    assert pod["status"]["message"] == (
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 2, "
        "used: 0, capacity: 0"
    )
    events = d.get("events", "-n", "default", "--field-selector", "involvedObject.name=pinned")
    assert [(e["type"], e["reason"]) for e in events["items"]] == [
        ("Warning", "OutOfnvidia.com/gpu")
    ]


def test_a_running_plugin_keeps_its_config_when_the_configmap_goes(three_nodes: Any) -> None:
    d = three_nodes
    d.apply(DEVICE_PLUGIN)
    d.wait_for(
        "registration",
        lambda: all(_gpu(n, "allocatable") == "5" for n in d.get("nodes")["items"]),
    )
    d.kubectl("delete", "configmap", "-n", "nvidia-device-plugin", "time-slicing-config")
    # A pass runs on the deletion; the projected config stays on the pod's volume.
    d.kubectl("label", "node", "gpu-1", "touched=yes")
    time.sleep(0.5)
    assert [(_gpu(n, "capacity"), _gpu(n, "allocatable")) for n in d.get("nodes")["items"]] == [
        ("5", "5")
    ] * 3


def test_the_static_manifest_without_a_config_advertises_one_unit_per_card(
    three_nodes: Any,
) -> None:
    d = three_nodes
    # NVIDIA/k8s-device-plugin deployments/static/nvidia-device-plugin.yml: no config file.
    d.apply("""\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-device-plugin-daemonset, namespace: kube-system}
spec:
  selector: {matchLabels: {name: nvidia-device-plugin-ds}}
  template:
    metadata: {labels: {name: nvidia-device-plugin-ds}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      priorityClassName: system-node-critical
      containers:
      - name: nvidia-device-plugin-ctr
        image: nvcr.io/nvidia/k8s-device-plugin:v0.17.1
        env: [{name: FAIL_ON_INIT_ERROR, value: "false"}]
""")
    d.wait_for(
        "one unit per node",
        lambda: all(_gpu(n, "allocatable") == "1" for n in d.get("nodes")["items"]),
    )
    labels = d.get("node", "gpu-0")["metadata"]["labels"]
    assert {
        k: labels[k]
        for k in (
            "nvidia.com/gpu.product",
            "nvidia.com/gpu.replicas",
            "nvidia.com/gpu.sharing-strategy",
            "nvidia.com/gpu.count",
        )
    } == {
        "nvidia.com/gpu.product": "NVIDIA-L4",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.count": "1",
    }
