"""check on an Argo CD repository (tests/rules/repos/argocd); lines counted in its files."""

from __future__ import annotations

from pathlib import Path

from gpushift.rules import run_check

TREE = Path(__file__).parent / "repos" / "argocd"


def test_argocd_repository_findings() -> None:
    report = run_check([TREE])
    got = {(f.rule, f.path, f.line) for f in report.findings}
    assert got == {
        # The DRA chart's consumableShares: 4 comes from values/dra.yaml through the
        # Application's valueFiles entry (line 16); no featureGates.ConsumableShares.
        ("consumable-shares-gate-missing", "apps/platform/dra.yaml", 16),
        # gpu-operator's dcgm-exporter (on by default) cannot attribute DRA claims; the
        # values root is valuesObject (line 13).
        ("dcgm-dra-attribution", "apps/platform/gpu-operator.yaml", 13),
        # nvidia.com/gpu requests bridged to DRA by the chart's gpu.nvidia.com class.
        ("bridged-extended-resource", "apps-dir/jellyfin/deployment.yaml", 15),
        ("bridged-extended-resource", "clusters/gpu-a/job.yaml", 14),
        ("bridged-extended-resource", "platform/dcgm/kustomization.yaml", 12),
        # dcgm-exporter inflated from kustomize helmCharts asks for a GPU (line 12).
        ("monitoring-consumes-gpu", "platform/dcgm/kustomization.yaml", 12),
    }
    # No "no advertiser": the charts the Applications install are seen.
    assert report.summary.allocator == "dra"
    gate = next(f for f in report.findings if f.rule == "consumable-shares-gate-missing")
    assert gate.object == "Application/argocd/dra-driver"
