"""The default GPU nodes carry the labels the target tree's DRA kubelet plugin selects, when the
twin's agents would not set them (render's nvidia.com/dra-kubelet-plugin, which the operator is
asked to put on GPU nodes when gpu-operator installs the driver)."""

from __future__ import annotations

from pathlib import Path

from gpushift_twin.rehearse import stack_labels

RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: dra-driver-nvidia-gpu, namespace: gpu-operator}
spec:
  interval: 1h
  chartRef: {kind: OCIRepository, name: dra-driver-nvidia-gpu}
  values:
    resources:
      gpus: {enabled: true}
    kubeletPlugin:
      nodeSelector:
        nvidia.com/dra-kubelet-plugin: "true"
        nvidia.com/gpu.present: "true"
"""


def test_the_plugins_selector_less_what_the_twin_sets(tmp_path: Path) -> None:
    (tmp_path / "helmrelease.yaml").write_text(RELEASE)
    # gpu.present is gpu-feature-discovery's, which the twin runs; the other is the operator's.
    assert stack_labels(tmp_path) == {"nvidia.com/dra-kubelet-plugin": "true"}


def test_no_selector_no_labels(tmp_path: Path) -> None:
    text = RELEASE.split("    kubeletPlugin:")[0]
    (tmp_path / "helmrelease.yaml").write_text(text)
    assert stack_labels(tmp_path) == {}
