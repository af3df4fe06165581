"""`gpushift twin inventory --from`: a real cluster's Nodes as an inventory file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from gpushift_twin.cluster import load
from gpushift_twin.cluster._from_nodes import gpus_from_labels
from gpushift_twin.cluster._nodes import node_object

# Abridged from `kubectl get nodes -o yaml` of a Talos cluster with GFD and the GPU Operator.
NODES = """\
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: k8s-1
    labels:
      beta.kubernetes.io/arch: amd64
      kubernetes.io/arch: amd64
      kubernetes.io/hostname: k8s-1
      kubernetes.io/os: linux
      node-role.kubernetes.io/control-plane: ""
      topology.kubernetes.io/zone: rack-1
      feature.node.kubernetes.io/pci-10de.present: "true"
      nvidia.com/gpu.present: "true"
      nvidia.com/gpu.product: NVIDIA-L4-SHARED
      nvidia.com/gpu.count: "1"
      nvidia.com/gpu.memory: "23034"
      nvidia.com/gpu.replicas: "5"
      nvidia.com/gpu.deploy.device-plugin: "true"
      nvidia.com/device-plugin.config: any
      nvidia.com/cuda.driver-version.full: 580.95.05
      feature.node.kubernetes.io/coral-tpu: "true"
      google.feature.node.kubernetes.io/coral: "true"
      nvidia.com/dra-kubelet-plugin: "true"
  spec:
    taints:
    - {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}
    - {key: node.kubernetes.io/unschedulable, effect: NoSchedule}
  status:
    capacity: {cpu: "16", memory: 65776464Ki, pods: "110", ephemeral-storage: 492054500Ki,
               hugepages-2Mi: "0", nvidia.com/gpu: "5", kernel.org/tun: "1k"}
- apiVersion: v1
  kind: Node
  metadata:
    name: big-1
    labels:
      nvidia.com/gpu.product: NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition
      nvidia.com/gpu.count: "2"
      nvidia.com/gpu.memory: "97887"
      nvidia.com/gpu.family: blackwell
      nvidia.com/gpu.compute.major: "12"
      nvidia.com/gpu.compute.minor: "0"
      nvidia.com/mig.capable: "true"
  status:
    capacity: {cpu: "64", memory: 512Gi, pods: "250"}
- apiVersion: v1
  kind: Node
  metadata: {name: cpu-1, labels: {kubernetes.io/hostname: cpu-1}}
  status:
    capacity: {cpu: "4", memory: 8Gi, pods: "110"}
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", "twin", "inventory", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_nodes_become_an_inventory_the_twin_loads(tmp_path: Path) -> None:
    source = tmp_path / "nodes.k8s.yaml"
    source.write_text(NODES)
    out = tmp_path / "nodes.yaml"
    done = _run("--from", str(source), "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(out.read_text())
    first, big, cpu = data["nodes"]
    assert first == {
        "name": "k8s-1",
        "cpu": "16",
        "memory": "65776464Ki",
        "ephemeralStorage": "492054500Ki",
        "pods": 110,
        # Gone: what the twin's agents set again (the kubelet's hostname, os and arch, NFD's
        # pci-10de.present, the operator's gpu.present and gpu.deploy.*, GFD's product,
        # count, memory and replicas). Kept: the rest, whoever set it on the real node (an NFD
        # rule's coral-tpu, GFD's driver version, the operator's config and DRA plugin label).
        "labels": {
            "feature.node.kubernetes.io/coral-tpu": "true",
            "google.feature.node.kubernetes.io/coral": "true",
            "node-role.kubernetes.io/control-plane": "",
            "nvidia.com/cuda.driver-version.full": "580.95.05",
            "nvidia.com/device-plugin.config": "any",
            "nvidia.com/dra-kubelet-plugin": "true",
            "topology.kubernetes.io/zone": "rack-1",
        },
        # unschedulable is state (a cordon), not the node's shape.
        "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        # nvidia.com/gpu comes from the twin's device plugin; kernel.org/tun does not.
        "resources": {"kernel.org/tun": "1k"},
        "gpus": [{"product": "NVIDIA L4", "driverVersion": "580.95.05"}],
    }
    assert big["gpus"] == [
        {
            "product": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "count": 2,
            "memory": "97887Mi",
            "architecture": "Blackwell",
            "computeCapability": "12.0",
            "migCapable": True,
        }
    ]
    assert cpu == {"name": "cpu-1", "cpu": "4", "memory": "8Gi", "pods": 110, "gpus": []}
    inventory = load(out)
    assert [n.name for n in inventory.nodes] == ["k8s-1", "big-1", "cpu-1"]
    assert [g.memory for g in inventory.nodes[1].gpus] == [97887 * 2**20] * 2
    node = node_object(inventory.nodes[0], index=0, now="2026-01-01T00:00:00Z")
    assert node["status"]["capacity"]["kernel.org/tun"] == "1000"


def test_stdout_and_bad_input(tmp_path: Path) -> None:
    source = tmp_path / "nodes.json"
    source.write_text('{"kind": "Node", "metadata": {"name": "solo"}, "status": {}}')
    done = _run("--from", str(source))
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == {"nodes": [{"name": "solo", "gpus": []}]}
    bad = tmp_path / "pods.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    done = _run("--from", str(bad), "-o", str(tmp_path / "never.yaml"))
    assert done.returncode == 2
    assert "pods.yaml" in done.stderr and "List of Nodes" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "never.yaml").exists()


def test_a_known_product_keeps_only_what_the_model_does_not_know() -> None:
    assert gpus_from_labels(
        {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "4"}
    ) == [{"product": "Tesla T4", "count": 4}]
    assert gpus_from_labels({"kubernetes.io/hostname": "x"}) == []
