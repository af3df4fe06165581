"""A file that nothing applies is at most a warning (unused-file); an applied one is yaml-error."""

from __future__ import annotations

from typing import Any

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
