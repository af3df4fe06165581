"""End-to-end findings for each real GitOps fixture repository.

Every expectation below was derived by reading the fixture files (line numbers counted in the
files themselves), not taken from gpushift's output. The reasoning is next to each entry.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift.rules import run_check

REPOS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "repos"

pytestmark = pytest.mark.skipif(not REPOS.is_dir(), reason="fixture repositories not present")

GPU_OPERATOR_HR = "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"

# repo -> (allocator, sharing mode, replicas, {(rule, path, line)})
EXPECTED: dict[str, tuple[str, str, int | None, set[tuple[str, str, int]]]] = {
    "LukeEvansTech__talos-cluster": (
        "device-plugin",
        "time-slicing",
        5,
        {
            # talos/patches/controller/cluster.yaml is a Talos machine config patch; the
            # operator leaves hostPaths.driverInstallDir at /run/nvidia/driver, and the key is
            # absent, so the finding points at `values:` (line 12).
            ("driver-root-mismatch", GPU_OPERATOR_HR, 12),
            # `runtimeClass:` (line 45) is not a top-level gpu-operator value
            # (operator.runtimeClass is).
            ("unknown-chart-values", GPU_OPERATOR_HR, 45),
        },
    ),
    # DRA driver with override, gate and consumableShares: 5; no gpu-operator, no consumers,
    # no Talos files in this partial tree: nothing to report.
    "LukeEvansTech__talos-cluster__later-dra": ("dra", "consumable-shares", 5, set()),
    # gpu-operator with the device plugin on by default, time-slicing 8 from a
    # configMapGenerator whose key `any` matches devicePlugin.config.default; every consumer
    # asks for nvidia.com/gpu; docling/ollama/open-webui are commented out.
    "jfroy__flatops": ("device-plugin", "time-slicing", 8, set()),
    "jfroy__flatops__later-dra": (
        "dra",
        "unlimited",
        None,
        {
            # consumableShares: unlimited (line 40).
            (
                "unlimited-no-ceiling",
                "kubernetes/apps/nvidia-system/dra-driver-nvidia-gpu/app/helmrelease.yaml",
                40,
            ),
            # The DRA Kustomization dependsOn gpu-operator, whose Kustomization has no
            # HelmRelease health check and no wait: `spec:` is line 7.
            ("dependency-order", "kubernetes/apps/nvidia-system/gpu-operator/ks.yaml", 7),
            # dcgmExporter.env sets KUBERNETES_ENABLE_DRA (env: line 18) but no ClusterRole in
            # the tree grants resourceslices (rbac.yaml was not retrieved).
            (
                "dcgm-dra-attribution",
                "kubernetes/apps/nvidia-system/gpu-operator/app/helmrelease.yaml",
                18,
            ),
        },
    ),
    "jhart99__home-ops": (
        "dra",
        "exclusive",
        None,
        {
            # nvidia-dra-driver's Kustomization has no dependsOn (its healthChecks are
            # commented out); `spec:` is line 7. The standalone device plugin is commented
            # out of kube-system/kustomization.yaml; the operator's time-slicing ConfigMap
            # key does not match `default: any`, but device plugin and GFD are both off, so
            # nothing reads it.
            ("dependency-order", "kubernetes/apps/kube-system/nvidia-dra-driver/ks.yaml", 7),
        },
    ),
    "heavybullets8__heavy-ops": (
        "device-plugin",
        "time-slicing",
        4,
        {
            # The standalone dcgm-exporter asks for nvidia.com/gpu: 1 (line 28). The DRA
            # release is commented out of kube-system/kustomization.yaml, so Talos paths and
            # DRA rules do not apply to it.
            (
                "monitoring-consumes-gpu",
                "kubernetes/apps/observability/dcgm-exporter/app/helmrelease.yaml",
                28,
            ),
        },
    ),
    "Tanguille__cluster__88576ac4-device-plugin": (
        "device-plugin",
        "time-slicing",
        8,
        {
            # fileflows puts `annotations:` (line 17) at the top level of app-template values.
            ("unknown-chart-values", "kubernetes/apps/media/fileflows/app/helmrelease.yaml", 17),
            # jellyfin requests nvidia.com/gpu and sets NVIDIA_VISIBLE_DEVICES: all (line 81).
            ("visible-devices-override", "kubernetes/apps/media/jellyfin/app/helmrelease.yaml", 81),
            # dcgm-exporter: extraEnv NVIDIA_VISIBLE_DEVICES: all (line 21) and
            # nvidia.com/gpu: 1 (line 28). The node label nvidia.com/gpu in affinities is a
            # label, not a request.
            (
                "visible-devices-override",
                "kubernetes/apps/observability/exporters/dcgm-exporter/app/helmrelease.yaml",
                21,
            ),
            (
                "monitoring-consumes-gpu",
                "kubernetes/apps/observability/exporters/dcgm-exporter/app/helmrelease.yaml",
                28,
            ),
        },
    ),
}


def test_every_fixture_repository_has_expectations() -> None:
    assert {p.name for p in REPOS.iterdir() if p.is_dir()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_findings(name: str) -> None:
    allocator, mode, replicas, findings = EXPECTED[name]
    report = run_check([REPOS / name])
    got = {(f.rule, f.path, f.line) for f in report.findings}
    assert got == findings
    summary = report.summary_dict()
    assert summary["allocator"] == allocator
    assert summary["sharing"].get("mode") == mode
    assert summary["sharing"].get("replicas") == replicas


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_exit_code_follows_error_findings(name: str) -> None:
    report = run_check([REPOS / name])
    has_error = any(rule in _ERRORS for rule, _, _ in EXPECTED[name][3])
    assert report.exit_code == (1 if has_error else 0)


# Rules whose findings in these fixtures are errors. LukeEvansTech's driver-root-mismatch is
# on a gpu-operator with a pre-installed driver (driver.enabled: false) whose device plugin
# works, so it is a warning (the severity policy in docs/rules.md): no fixture has an error.
_ERRORS: set[str] = set()
