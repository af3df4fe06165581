"""gpu-operator's GPUCluster read as DRA, and gpucluster-clusterpolicy-conflict.

Lines come from the builders in conftest.py: a HelmRelease's first values line is 13, a
Deployment's first pod-spec line is 11 (so the GPU_POD's `nvidia.com/gpu: 1` is line 16).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpushift.gitops import load_repo, summarize
from gpushift.rules import run_check

GPUCLUSTER = "clusterPolicy:\n  deployCR: false\ngpuCluster:\n  deployCR: true\n"

GPUCLUSTER_OBJECT = (
    "apiVersion: nvidia.com/v1alpha1\nkind: GPUCluster\nmetadata:\n  name: gpu-cluster\nspec: {}\n"
)

BRIDGE = (
    "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu-extended\n"
    "spec:\n  extendedResourceName: nvidia.com/gpu\n  selectors:\n    - cel:\n"
    "        expression: device.driver == 'gpu.nvidia.com'\n"
)

CLAIM_POD = (
    "resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: any-gpu\n"
    "containers:\n  - name: app\n    image: example\n    resources:\n      claims:\n"
    "        - name: gpu\n"
)

RCT = (
    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n"
    "  name: any-gpu\n  namespace: media\nspec:\n  spec:\n    devices:\n"
    "      requests:\n        - name: gpu\n          exactly:\n"
    "            deviceClassName: gpu.nvidia.com\n"
)


def test_gpucluster_is_dra_and_leaves_nvidia_gpu_unbridged(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", GPUCLUSTER),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    # The ClusterPolicy is off, so the default devicePlugin.enabled runs nothing; the
    # GPUCluster's gpu.nvidia.com class maps no extended resource.
    assert kit.only(found, "unbridged-extended-resource") == [("app.yaml", 16)]
    assert not {"no-advertiser", "dual-advertiser", "gpucluster-clusterpolicy-conflict"} & kit.ids(
        found
    )


def test_a_bridging_class_of_ones_own_serves_nvidia_gpu(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", GPUCLUSTER),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
            "bridge.yaml": BRIDGE,
        }
    )
    assert kit.only(found, "bridged-extended-resource") == [("app.yaml", 16)]
    assert "unbridged-extended-resource" not in kit.ids(found)


def test_claims_are_served_by_a_gpucluster_object(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator", "gpu-operator", "clusterPolicy:\n  deployCR: false\n"
            ),
            "cluster.yaml": GPUCLUSTER_OBJECT,
            "rct.yaml": RCT,
            "app.yaml": kit.deployment("app", CLAIM_POD),
        }
    )
    assert not {
        "no-advertiser",
        "gpucluster-clusterpolicy-conflict",
        "dcgm-dra-attribution",
    } & kit.ids(found)


def test_both_deployCR_true_by_default_is_a_conflict(check: Any, kit: Any) -> None:
    # clusterPolicy.deployCR is not set: the chart default (true) deploys the ClusterPolicy.
    values = "gpuCluster:\n  deployCR: true\n"
    found = check({"op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values)})
    assert kit.only(found, "gpucluster-clusterpolicy-conflict") == [("op.yaml", 14)]
    f = next(f for f in found if f.rule == "gpucluster-clusterpolicy-conflict")
    assert f.severity.value == "error"
    assert "clusterPolicy.deployCR defaults to true" in f.message
    assert "validation fails the install" in f.message


def test_gpucluster_object_beside_a_clusterpolicy_release(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator", "gpu-operator", "driver:\n  enabled: true\n"
            ),
            "cluster.yaml": GPUCLUSTER_OBJECT,
        }
    )
    assert kit.only(found, "gpucluster-clusterpolicy-conflict") == [("cluster.yaml", 1)]
    f = next(f for f in found if f.rule == "gpucluster-clusterpolicy-conflict")
    assert "HelmRelease/gpu/gpu-operator" in f.message
    assert "reports the conflict" in f.message


def test_summary_names_the_gpucluster_and_its_shares(tmp_path: Path, kit: Any) -> None:
    values = GPUCLUSTER + (
        "draDriver:\n  featureGates:\n    ConsumableShares: true\n  gpus:\n    kubeletPlugin:\n"
        '      env:\n        - name: CONSUMABLE_SHARES\n          value: "4"\n'
    )
    (tmp_path / "op.yaml").write_text(kit.helm_release("gpu-operator", "gpu-operator", values))
    summary = summarize(load_repo([tmp_path]))
    assert (summary.allocator, summary.dra_stack) == ("dra", "gpucluster")
    assert (summary.sharing.mode, summary.sharing.replicas) == ("consumable-shares", 4)
    assert summary.device_classes == ("gpu.nvidia.com",)
    out = subprocess.run(
        [sys.executable, "-m", "gpushift", "check", str(tmp_path), "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    doc = json.loads(out.stdout)
    assert doc["summary"]["allocator"] == "dra"
    assert doc["summary"]["dra_stack"] == "gpucluster"
    text = subprocess.run(
        [sys.executable, "-m", "gpushift", "check", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "allocator: dra (GPUCluster)" in text.stdout


def test_dra_chart_tree_names_its_stack(tmp_path: Path, kit: Any) -> None:
    (tmp_path / "op.yaml").write_text(
        kit.helm_release("gpu-operator", "gpu-operator", kit.OPERATOR_OFF)
    )
    (tmp_path / "dra.yaml").write_text(kit.helm_release("dra", "dra-driver-nvidia-gpu", kit.DRA_ON))
    summary = summarize(load_repo([tmp_path]))
    assert (summary.allocator, summary.dra_stack) == ("dra", "dra-driver")


def _shares_env(value: str) -> str:
    quoted = json.dumps(value, ensure_ascii=False)  # a YAML double-quoted scalar
    return (
        "draDriver:\n  gpus:\n    kubeletPlugin:\n      env:\n"
        f"        - name: CONSUMABLE_SHARES\n          value: {quoted}\n"
    )


def test_shares_env_without_the_gate_is_an_error(check: Any, kit: Any) -> None:
    # values: clusterPolicy 13-14, gpuCluster 15-16, draDriver 17, gpus 18, kubeletPlugin 19,
    # env 20.
    found = check(
        {"op.yaml": kit.helm_release("gpu-operator", "gpu-operator", GPUCLUSTER + _shares_env("5"))}
    )
    assert kit.only(found, "consumable-shares-gate-missing") == [("op.yaml", 20)]
    f = next(f for f in found if f.rule == "consumable-shares-gate-missing")
    assert "CONSUMABLE_SHARES=5 without draDriver.featureGates.ConsumableShares: true" in f.message


def test_shares_env_with_the_gate_and_a_bad_value(check: Any, kit: Any) -> None:
    values = GPUCLUSTER + _shares_env("half") + "  featureGates:\n    ConsumableShares: true\n"
    found = check({"op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values)})
    assert "consumable-shares-gate-missing" not in kit.ids(found)
    assert kit.only(found, "consumable-shares-invalid") == [("op.yaml", 20)]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n=st.integers(min_value=1, max_value=2**63 - 1),
    junk=st.text(
        st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), max_codepoint=0xFFFF),
        max_size=12,
    ),
)
def test_summary_reads_the_env_as_the_plugin_does(
    tmp_path: Path, kit: Any, n: int, junk: str
) -> None:
    """N shares read back as N; anything the plugin refuses reads as exclusive, never a crash."""
    for value, want in ((str(n), ("consumable-shares", n)), (junk, None)):
        (tmp_path / "op.yaml").write_text(
            kit.helm_release("gpu-operator", "gpu-operator", GPUCLUSTER + _shares_env(value))
        )
        summary = summarize(load_repo([tmp_path]))
        assert (summary.allocator, summary.dra_stack) == ("dra", "gpucluster")
        got = (summary.sharing.mode, summary.sharing.replicas)
        if want is not None:
            assert got == want
        else:
            assert got[0] in ("exclusive", "consumable-shares", "memory", "unlimited")


def test_operator_gfd_needs_its_clusterpolicy(check: Any, kit: Any) -> None:
    # gpu-operator deploying neither CR runs no GFD, whatever gfd.enabled says; the standalone
    # plugin's MPS then has no GFD to label the nodes.
    mps = (
        "config:\n  map:\n    default: |-\n      version: v1\n      sharing:\n        mps:\n"
        "          resources:\n            - {name: nvidia.com/gpu, replicas: 4}\n"
    )
    operator = "clusterPolicy:\n  deployCR: false\ngfd:\n  enabled: true\n"
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", operator),
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", mps),
        }
    )
    assert "mps-without-gfd" in kit.ids(found)
    assert "dual-device-plugin" not in kit.ids(found)


FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "repos"
LUKE = "LukeEvansTech__talos-cluster"
LUKE_OPERATOR = "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason="fixtures not present")


def _luke_with(tmp_path: Path, block: str) -> Path:
    """The LukeEvansTech fixture with ``block`` written above its devicePlugin values (line
    20 of the operator's HelmRelease, so the block's first line becomes line 20)."""
    root = tmp_path / LUKE
    shutil.copytree(FIXTURES / LUKE, root)
    hr = root / LUKE_OPERATOR
    text = hr.read_text()
    anchor = "    devicePlugin:\n      enabled: true\n"
    assert text.splitlines()[19] == "    devicePlugin:"
    hr.write_text(text.replace(anchor, kit_indent(block) + anchor))
    return root


def kit_indent(block: str) -> str:
    return "".join(f"    {line}\n" for line in block.strip("\n").splitlines())


@needs_fixtures
def test_fixture_with_gpucluster_left_beside_its_default_clusterpolicy(tmp_path: Path) -> None:
    root = _luke_with(tmp_path, "gpuCluster:\n  deployCR: true\n")
    report = run_check([root])
    conflict = [
        (f.path, f.line) for f in report.findings if f.rule == "gpucluster-clusterpolicy-conflict"
    ]
    # gpuCluster on line 20, deployCR on 21.
    assert conflict == [(LUKE_OPERATOR, 21)]
    # Talos with the GPUCluster's driver root: now an error, at the values line (12), as
    # hostPaths is not set.
    root_findings = [
        (f.line, f.severity.value) for f in report.findings if f.rule == "driver-root-mismatch"
    ]
    assert root_findings == [(12, "error")]
    assert report.summary.allocator == "both"


@needs_fixtures
def test_fixture_on_a_gpucluster_alone_leaves_nvidia_gpu_unbridged(tmp_path: Path) -> None:
    root = _luke_with(
        tmp_path, "clusterPolicy:\n  deployCR: false\ngpuCluster:\n  deployCR: true\n"
    )
    report = run_check([root])
    assert (report.summary.allocator, report.summary.dra_stack) == ("dra", "gpucluster")
    assert {c.request for c in report.summary.consumers} == {"bridged"}
    unbridged = sorted(
        (f.path, f.line) for f in report.findings if f.rule == "unbridged-extended-resource"
    )
    # Each app's limits line (limits win), from grep of the fixture; and the InferenceService.
    media = "kubernetes/apps/media"
    assert [u for u in unbridged if u[0].startswith(media)] == [
        (f"{media}/dispatcharr/app/helmrelease.yaml", 56),
        (f"{media}/jellyfin/app/helmrelease.yaml", 52),
        (f"{media}/pinchflat/app/helmrelease.yaml", 48),
        (f"{media}/plex/app/helmrelease.yaml", 96),
        (f"{media}/tdarr/app/helmrelease.yaml", 66),
    ]
    assert [u[0] for u in unbridged if not u[0].startswith(media)] == [
        "kubernetes/apps/ai/llmkube/models/qwen3.8-27b.yaml"
    ]
    ids = {f.rule for f in report.findings}
    assert not ids & {"gpucluster-clusterpolicy-conflict", "no-advertiser", "dual-advertiser"}
