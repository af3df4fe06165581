"""dual-device-plugin: two NVIDIA device plugins on the same nodes.

Expectations are read off tests/rules/repos/two-plugins (lines counted in its files) and the
small trees below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpushift.rules import run_check

REPOS = Path(__file__).parent / "repos"


def test_operator_default_plugin_and_standalone_and_ignored_gfd_switch() -> None:
    report = run_check([REPOS / "two-plugins"])
    dual = sorted((f.path, f.line) for f in report.findings if f.rule == "dual-device-plugin")
    # operator vs standalone: the standalone release sets no devicePlugin key, so the line is
    # its `values:` (13). operator vs the GFD copy and standalone vs the GFD copy: the copy's
    # ignored `plugin:` switch (line 15).
    assert dual == [
        ("device-plugin/helmrelease.yaml", 13),
        ("gfd/helmrelease.yaml", 15),
        ("gfd/helmrelease.yaml", 15),
    ]
    first = next(f for f in report.findings if f.path == "device-plugin/helmrelease.yaml")
    assert "HelmRelease/gpu-operator/gpu-operator" in first.message
    assert "devicePlugin.enabled defaults to true" in first.message
    assert "HelmRelease/kube-system/nvidia-device-plugin" in first.message
    assert "every GPU node" in first.message
    copy = [
        f
        for f in report.findings
        if f.path == "gfd/helmrelease.yaml" and f.rule != "unknown-chart-values"
    ]
    assert all("plugin.enabled: false is not a value of the chart" in f.message for f in copy)
    # Helm ignores the key: reported as unknown as well.
    assert ("unknown-chart-values", 15) in {(f.rule, f.line) for f in report.findings}
    assert report.exit_code == 1


def test_operator_with_plugin_off_and_standalone_is_one_plugin(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", kit.OPERATOR_OFF),
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none\n"),
        }
    )
    assert "dual-device-plugin" not in kit.ids(found)


def test_gfd_only_copy_with_the_real_switch_is_one_plugin(check: Any, kit: Any) -> None:
    gfd = "devicePlugin:\n  enabled: false\ngfd:\n  enabled: true\n"
    found = check(
        {
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none\n"),
            "gfd.yaml": kit.helm_release("gfd", "nvidia-device-plugin", gfd),
        }
    )
    assert "dual-device-plugin" not in kit.ids(found)


def test_disjoint_node_selectors_do_not_meet(check: Any, kit: Any) -> None:
    found = check(
        {
            "a.yaml": kit.helm_release("a", "nvidia-device-plugin", "nodeSelector:\n  pool: a\n"),
            "b.yaml": kit.helm_release("b", "nvidia-device-plugin", "nodeSelector:\n  pool: b\n"),
        }
    )
    assert "dual-device-plugin" not in kit.ids(found)


def test_selector_and_default_meet_on_the_selected_nodes(check: Any, kit: Any) -> None:
    found = check(
        {
            "a.yaml": kit.helm_release("a", "nvidia-device-plugin", "nodeSelector:\n  pool: a\n"),
            "b.yaml": kit.helm_release("b", "nvidia-device-plugin", "migStrategy: none\n"),
        }
    )
    (f,) = (f for f in found if f.rule == "dual-device-plugin")
    # the second release has no devicePlugin key: its `values:` line (12).
    assert (f.path, f.line) == ("b.yaml", 12)
    assert "GPU nodes with nodeSelector pool=a" in f.message


def test_operator_without_its_cluster_policy_runs_no_plugin(check: Any, kit: Any) -> None:
    # The GPUCluster stack instead of ClusterPolicy: the operator deploys no device plugin.
    op = "clusterPolicy:\n  deployCR: false\n"
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", op),
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none\n"),
        }
    )
    assert "dual-device-plugin" not in kit.ids(found)
