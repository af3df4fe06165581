"""flux-reference-missing: a GPU Kustomization's dependsOn and substituteFrom must resolve."""

from __future__ import annotations

from typing import Any

from tests.rules.test_platform import DEPENDS, HEALTH, flux_ks, stack

KUSTOMIZATION = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
SETTINGS = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-settings\n"
    "  namespace: flux-system\ndata:\n  TIMEZONE: Etc/UTC\n"
)
SUBSTITUTE = (
    "  postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-settings\n"
)


def whole(kit: Any, *, dra_extra: str, dra_namespace: str = "flux-system") -> dict[str, str]:
    """The stack under a cluster root (``cluster-apps`` applies ``./apps``), which also creates
    ConfigMap flux-system/cluster-settings."""
    files = stack(kit, dra_extra=dra_extra, op_extra=HEALTH)
    files["apps/dra/ks.yaml"] = files["apps/dra/ks.yaml"].replace(
        "  namespace: flux-system\n", f"  namespace: {dra_namespace}\n", 1
    )
    files["apps/kustomization.yaml"] += "  - ./cluster-settings.yaml\n"
    files["apps/cluster-settings.yaml"] = SETTINGS
    files["flux/cluster.yaml"] = flux_ks("cluster-apps", "./apps")
    return files


def test_dependency_nothing_deploys(check: Any, kit: Any) -> None:
    found = check(whole(kit, dra_extra="  dependsOn:\n    - name: operator\n"))
    # dependsOn is line 13 of the DRA driver's ks.yaml (flux_ks: extra starts there).
    assert kit.only(found, "flux-reference-missing") == [("apps/dra/ks.yaml", 13)]
    (f,) = [f for f in found if f.rule == "flux-reference-missing"]
    assert "flux-system/operator" in f.message
    assert f.severity.value == "error"


def test_dependency_that_exists(check: Any, kit: Any) -> None:
    found = check(whole(kit, dra_extra=DEPENDS))
    assert "flux-reference-missing" not in kit.ids(found)


def test_dependency_in_another_namespace_is_missing(check: Any, kit: Any) -> None:
    # gpu-operator's Kustomization is in flux-system; a DRA Kustomization in kube-system that
    # names it without a namespace looks for kube-system/gpu-operator.
    found = check(whole(kit, dra_extra=DEPENDS, dra_namespace="kube-system"))
    assert kit.only(found, "flux-reference-missing") == [("apps/dra/ks.yaml", 13)]


def test_substitution_source_only_in_another_namespace(check: Any, kit: Any) -> None:
    extra = "  dependsOn:\n    - name: gpu-operator\n      namespace: flux-system\n" + SUBSTITUTE
    found = check(whole(kit, dra_extra=extra, dra_namespace="kube-system"))
    # substituteFrom is line 17: three dependsOn lines from 13, then postBuild.
    assert kit.only(found, "flux-reference-missing") == [("apps/dra/ks.yaml", 17)]
    (f,) = [f for f in found if f.rule == "flux-reference-missing"]
    assert "only in flux-system, not in kube-system" in f.message


def test_substitution_source_in_its_own_namespace(check: Any, kit: Any) -> None:
    found = check(whole(kit, dra_extra=DEPENDS + SUBSTITUTE))
    assert "flux-reference-missing" not in kit.ids(found)


def test_optional_substitution_source(check: Any, kit: Any) -> None:
    extra = "  dependsOn:\n    - name: gpu-operator\n      namespace: flux-system\n"
    extra += SUBSTITUTE + "        optional: true\n"
    found = check(whole(kit, dra_extra=extra, dra_namespace="kube-system"))
    assert "flux-reference-missing" not in kit.ids(found)


def test_partial_tree_may_depend_on_what_is_outside_it(check: Any, kit: Any) -> None:
    # No cluster root: the dependency may be in the part of the repository not given.
    found = check(stack(kit, dra_extra="  dependsOn:\n    - name: operator\n", op_extra=HEALTH))
    assert "flux-reference-missing" not in kit.ids(found)
