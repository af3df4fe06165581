"""The GPU Operator's node labelling and operand gating, on a whole small repository.

The repository (synthetic root for ``./kubernetes/apps``) installs gpu-operator with a
time-slicing config of 4 replicas. The inventory has three nodes:

* ``g1``: one L4 (NFD's ``pci-10de.present`` label);
* ``g2``: one L4, labelled ``nvidia.com/gpu.deploy.operands: "false"`` by its admin;
* ``c1``: no GPU, but still labelled ``nvidia.com/gpu.present: "true"`` and
  ``…deploy.device-plugin: "true"`` from a card it no longer has.

What the operator does (NVIDIA/gpu-operator controllers/state_manager.go ``labelGPUNodes``):
``g1`` gets every deploy label; ``g2`` none (operands off); ``c1`` becomes
``gpu.present: "false"`` and loses its deploy labels. So the device plugin runs on ``g1``
only, and only ``g1`` advertises ``nvidia.com/gpu: 4``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.twin.flux.conftest import kubectl_json, needs_kubectl, serve_repo, wait_for

NODES = """\
nodes:
- {name: g1, gpus: [{product: NVIDIA L4}]}
- {name: g2, labels: {nvidia.com/gpu.deploy.operands: "false"}, gpus: [{product: NVIDIA L4}]}
- name: c1
  labels: {nvidia.com/gpu.present: "true", nvidia.com/gpu.deploy.device-plugin: "true"}
"""
RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: gpu-operator, namespace: gpu-operator}}
spec:
  interval: 1h
  chart:
    spec:
      chart: gpu-operator
      version: v25.10.1
      sourceRef: {{kind: HelmRepository, name: nvidia, namespace: flux-system}}
  values:
{driver}    devicePlugin:
      config:
        create: true
        name: time-slicing-config
        default: any
        data:
          any: |-
            version: v1
            sharing:
              timeSlicing:
                resources:
                  - name: nvidia.com/gpu
                    replicas: 4
"""
OTHERS = {
    "namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-operator}\n",
    "helmrepository.yaml": (
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\n"
        "metadata: {name: nvidia, namespace: flux-system}\n"
        "spec: {interval: 1h, url: https://helm.ngc.nvidia.com/nvidia}\n"
    ),
}
DEPLOY = (
    "nvidia.com/gpu.deploy.container-toolkit",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.driver",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.node-status-exporter",
    "nvidia.com/gpu.deploy.operator-validator",
)


def _repo(root: Path, *, driver: str) -> Path:
    apps = root / "kubernetes" / "apps"
    apps.mkdir(parents=True)
    files = {**OTHERS, "helmrelease.yaml": RELEASE.format(driver=driver)}
    for name, text in files.items():
        (apps / name).write_text(text)
    (apps / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{', '.join(sorted(files))}]\n"
    )
    return root


def _nodes(kc: Path) -> dict[str, dict[str, Any]]:
    items = (kubectl_json(kc, "get", "nodes") or {}).get("items") or []
    return {n["metadata"]["name"]: n for n in items}


def _pods(kc: Path, daemonset: str) -> list[dict[str, Any]]:
    items = (kubectl_json(kc, "-n", "gpu-operator", "get", "pods") or {}).get("items") or []
    return [
        p
        for p in items
        if any(o.get("name") == daemonset for o in p["metadata"].get("ownerReferences") or [])
    ]


def _nvidia(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith("nvidia.com/gpu.")}


def _plugin_up(kc: Path) -> dict[str, dict[str, Any]] | None:
    nodes = _nodes(kc)
    g1 = nodes.get("g1")
    if g1 is None or g1["status"]["allocatable"].get("nvidia.com/gpu") != "4":
        return None
    return nodes


@needs_kubectl
@pytest.mark.parametrize("driver", ["    driver: {enabled: false}\n", ""])
def test_operator_labels_and_gates_like_the_operator(tmp_path: Path, driver: str) -> None:
    repo = _repo(tmp_path / "repo", driver=driver)
    with serve_repo(tmp_path, repo, NODES) as (kc, _err):
        nodes = wait_for(lambda: _plugin_up(kc), timeout=90, what="the device plugin on g1")
        g1 = _nvidia(nodes["g1"]["metadata"]["labels"])
        # The driver lives on the twin's hosts: with the driver state on, the driver
        # manager marks the node pre-installed and the DaemonSet leaves it.
        want_driver = "true" if driver else "pre-installed"
        assert g1["nvidia.com/gpu.present"] == "true"
        assert {k: g1.get(k) for k in DEPLOY} == {
            **dict.fromkeys(DEPLOY, "true"),
            "nvidia.com/gpu.deploy.driver": want_driver,
        }
        assert not [k for k in nodes["g2"]["metadata"]["labels"] if k in DEPLOY]
        c1 = nodes["c1"]["metadata"]["labels"]
        assert c1.get("nvidia.com/gpu.present") == "false"
        assert not [k for k in c1 if k in DEPLOY]
        plugin = _pods(kc, "nvidia-device-plugin-daemonset")
        assert [p["spec"]["nodeName"] for p in plugin] == ["g1"]
        assert "nvidia.com/gpu" not in nodes["g2"]["status"]["allocatable"]
        assert "nvidia.com/gpu" not in nodes["c1"]["status"]["allocatable"]
        # The toolkit state (on by default) runs first: the plugin's toolkit-validation
        # waits for it on its node.
        toolkit = _pods(kc, "nvidia-container-toolkit-daemonset")
        assert [p["spec"]["nodeName"] for p in toolkit] == ["g1"]
        started = [
            p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
            for p in (toolkit[0], plugin[0])
        ]
        assert started[0] <= started[1]
        ds = kubectl_json(kc, "-n", "gpu-operator", "get", "ds", "nvidia-driver-daemonset")
        if driver:
            assert ds is None
        else:
            assert ds["status"]["desiredNumberScheduled"] == 0
