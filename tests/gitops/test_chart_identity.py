"""Charts are identified by name and source, never by the shape of their values."""

from __future__ import annotations

from pathlib import Path

from gpushift.gitops import chart_identity, load_repo

VALUES = """\
  values:
    controllers:
      app:
        containers:
          app:
            resources:
              limits:
                nvidia.com/gpu: 1
    somethingElse: true
"""


def _hr(chart: str, *, modeline: str = "") -> str:
    return (
        modeline + "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n"
        "  name: app\n  namespace: media\nspec:\n  interval: 1h\n" + chart + VALUES
    )


def _load(tmp_path: Path, text: str) -> tuple[str, int]:
    (tmp_path / "hr.yaml").write_text(text)
    repo = load_repo([tmp_path])
    (hr,) = repo.helm_releases
    return hr.chart, len(repo.workloads)


def test_chart_ref_to_a_missing_source_with_app_template_values_is_unknown(tmp_path: Path) -> None:
    chart, workloads = _load(tmp_path, _hr("  chartRef: {kind: OCIRepository, name: my-app}\n"))
    assert (chart, workloads) == ("other", 0)


def test_the_files_schema_modeline_names_the_chart(tmp_path: Path) -> None:
    line = (
        "# yaml-language-server: $schema=https://raw.githubusercontent.com/bjw-s-labs/"
        "helm-charts/main/charts/other/app-template/schemas/helmrelease-helm-v2.schema.json\n"
    )
    text = _hr("  chartRef: {kind: OCIRepository, name: my-app}\n", modeline=line)
    assert _load(tmp_path, text) == ("app-template", 1)


def test_a_source_in_the_tree_names_the_chart(tmp_path: Path) -> None:
    oci = (
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n"
        "  name: my-app\n  namespace: media\nspec:\n"
        "  url: oci://ghcr.io/bjw-s-labs/helm/app-template\n  ref: {tag: 4.4.0}\n---\n"
    )
    text = oci + _hr("  chartRef: {kind: OCIRepository, name: my-app}\n")
    assert _load(tmp_path, text) == ("app-template", 1)


def test_names_are_matched_whole() -> None:
    assert chart_identity("app-template") == "app-template"
    assert chart_identity("oci://ghcr.io/home-operations/charts-mirror/nvidia-gpu-operator") == (
        "gpu-operator"
    )
    assert chart_identity("nvidia-device-plugin") == "nvidia-device-plugin"
    # Another chart whose name merely ends like a known one.
    assert chart_identity("my-app-template") == "other"
    assert chart_identity("custom-gpu-operator") == "other"
