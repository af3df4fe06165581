"""A file that nothing applies is at most a warning (unused-file); an applied one is yaml-error."""

from __future__ import annotations

from typing import Any

from gpushift.gitops import load_repo, summarize
from gpushift.rules import run_check

KUSTOMIZATION = (
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./app.yaml\n"
)
APP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"
# line 3 is indented under a scalar: the parser stops there.
BROKEN = "apiVersion: v1\nkind: ConfigMap\n  metadata: {name: x}\n"


def test_unlisted_broken_file_is_unused(check: Any, kit: Any, tmp_path: Any) -> None:
    found = check(
        {"apps/kustomization.yaml": KUSTOMIZATION, "apps/app.yaml": APP, "apps/old.yaml": BROKEN}
    )
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("unused-file", "apps/old.yaml", "warning")
    ]
    assert "not used" in found[0].message
    assert run_check([tmp_path]).exit_code == 0


def test_listed_broken_file_is_an_error(check: Any, kit: Any) -> None:
    found = check({"apps/kustomization.yaml": KUSTOMIZATION, "apps/app.yaml": BROKEN})
    assert [(f.rule, f.path) for f in found] == [("yaml-error", "apps/app.yaml")]


def test_broken_file_without_a_kustomization_is_an_error(check: Any, kit: Any) -> None:
    found = check({"apps/app.yaml": BROKEN})
    assert kit.ids(found) == {"yaml-error"}


GENERATOR = (
    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
    "resources:\n  - ./app.yaml\n"
    "configMapGenerator:\n  - name: tool-config\n    files:\n"
    "      - tool.yml=./resources/tool.yml\n"
)
# A tool's own config with a custom tag: YAML to the tool, text to kustomize.
TOOL_CONFIG = "sonarr:\n  main:\n    api_key: !env_var SONARR_API_KEY\n"


def test_generator_data_file_is_not_parsed_as_a_manifest(check: Any, kit: Any) -> None:
    found = check(
        {
            "apps/kustomization.yaml": GENERATOR,
            "apps/app.yaml": APP,
            "apps/resources/tool.yml": TOOL_CONFIG,
        }
    )
    assert [(f.rule, f.path) for f in found] == []


def test_file_both_generator_data_and_resource_is_still_parsed(check: Any, kit: Any) -> None:
    both = GENERATOR.replace("  - ./app.yaml\n", "  - ./app.yaml\n  - ./resources/tool.yml\n")
    found = check(
        {
            "apps/kustomization.yaml": both,
            "apps/app.yaml": APP,
            "apps/resources/tool.yml": TOOL_CONFIG,
        }
    )
    assert [(f.rule, f.path) for f in found] == [("yaml-error", "apps/resources/tool.yml")]


# -- what is not a manifest -----------------------------------------------------------------

CHART = "apiVersion: v2\nname: local\nversion: 0.1.0\n"
# A Helm template: `{{-` opens a flow mapping that never closes, so it is no YAML at all.
TEMPLATE = "{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\n{{- end }}\n"
# A template that happens to parse, asking for a GPU through chart values.
GPU_TEMPLATE = (
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: '{{ .Release.Name }}'\nspec:\n"
    "  containers:\n    - name: app\n      image: cuda\n"
    "      resources: {limits: {nvidia.com/gpu: 1}}\n"
)


def test_helm_chart_templates_are_not_manifests(check: Any, kit: Any) -> None:
    found = check(
        {
            "charts/local/Chart.yaml": CHART,
            "charts/local/templates/configmap.yaml": TEMPLATE,
            "charts/local/templates/nested/pod.yaml": GPU_TEMPLATE,
            "apps/app.yaml": APP,
        }
    )
    assert found == []


def test_chart_template_is_no_consumer(tmp_path: Any) -> None:
    (tmp_path / "charts/local/templates").mkdir(parents=True)
    (tmp_path / "charts/local/Chart.yaml").write_text(CHART)
    (tmp_path / "charts/local/templates/pod.yaml").write_text(GPU_TEMPLATE)
    assert summarize(load_repo([tmp_path])).consumers == ()


def test_templates_directory_without_a_chart_is_still_read(check: Any, kit: Any) -> None:
    # No Chart.yaml beside it: a directory that happens to be called templates.
    found = check({"apps/templates/configmap.yaml": TEMPLATE})
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("yaml-error", "apps/templates/configmap.yaml", "error")
    ]


# -- a Flux tree with a cluster root: only what its Kustomizations reach is applied --------


def _flux_ks(name: str, path: str, *, suspend: bool = False) -> str:
    return (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n"
        f"  name: {name}\n  namespace: flux-system\nspec:\n  path: {path}\n"
        "  sourceRef: {kind: GitRepository, name: flux-system}\n"
        + ("  suspend: true\n" if suspend else "")
    )


def _rooted(**extra: str) -> dict[str, str]:
    """cluster-apps (the root) deploys apps/, whose kustomization.yaml lists ks.yaml, which
    deploys apps/app."""
    return {
        "flux/apps.yaml": _flux_ks("cluster-apps", "./apps"),
        "apps/kustomization.yaml": KUSTOMIZATION.replace("./app.yaml", "./ks.yaml"),
        "apps/ks.yaml": _flux_ks("app", "./apps/app"),
        "apps/app/app.yaml": APP,
        **extra,
    }


def test_file_no_kustomization_reaches_is_unused(check: Any, kit: Any) -> None:
    # docs/ is under no Kustomization's path, and the root deploys only apps/.
    found = check(_rooted(**{"docs/example.yaml": BROKEN}))
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("unused-file", "docs/example.yaml", "warning")
    ]
    assert "no Flux Kustomization's path in the tree reaches it" in found[0].message


def test_file_an_active_kustomization_applies_is_an_error(check: Any, kit: Any) -> None:
    found = check(_rooted(**{"apps/app/broken.yaml": BROKEN}))
    assert [(f.rule, f.path, f.severity.value, f.line) for f in found] == [
        ("yaml-error", "apps/app/broken.yaml", "error", 3)
    ]


def test_file_only_a_suspended_kustomization_applies_is_a_warning(check: Any, kit: Any) -> None:
    files = _rooted(**{"apps/app/broken.yaml": BROKEN})
    files["apps/ks.yaml"] = _flux_ks("app", "./apps/app", suspend=True)
    found = check(files)
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("yaml-error", "apps/app/broken.yaml", "warning")
    ]
    assert "only Kustomization flux-system/app applies it" in found[0].message


def test_loose_file_in_a_partial_tree_is_an_error(check: Any, kit: Any) -> None:
    # No cluster root (only an app's ks.yaml): what nothing references is taken as a root,
    # so a loose file is applied and its error breaks it.
    found = check(
        {"apps/ks.yaml": _flux_ks("app", "./apps/app"), "apps/app/app.yaml": APP, "x.yaml": BROKEN}
    )
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("yaml-error", "x.yaml", "error")
    ]


def _application(path: str) -> str:
    return (
        "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n"
        "  name: apps\n  namespace: argocd\nspec:\n  project: default\n  source:\n"
        f"    repoURL: https://example.org/repo.git\n    path: {path}\n"
        "  destination:\n    server: https://kubernetes.default.svc\n    namespace: apps\n"
    )


def test_argo_file_no_application_reaches_is_unused(check: Any, kit: Any) -> None:
    found = check(
        {"root.yaml": _application("apps"), "apps/app.yaml": APP, "scratch/old.yaml": BROKEN}
    )
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("unused-file", "scratch/old.yaml", "warning")
    ]
    assert "no Argo CD Application's path reaches it" in found[0].message


def test_argo_file_an_application_applies_is_an_error(check: Any, kit: Any) -> None:
    found = check({"root.yaml": _application("apps"), "apps/broken.yaml": BROKEN})
    assert [(f.rule, f.path, f.severity.value) for f in found] == [
        ("yaml-error", "apps/broken.yaml", "error")
    ]
