"""claim-template-missing, claim-reference-mismatch, unbridged-extended-resource,
bridged-extended-resource, rct-immutable-change."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from gpushift.rules import run_check

QUIET_OFF = "devicePlugin:\n  enabled: false\ndcgmExporter:\n  enabled: false\n"


def rct(namespace: str, *, request: str = "gpu") -> str:
    return (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n"
        f"  name: any-gpu\n  namespace: {namespace}\nspec:\n  spec:\n    devices:\n"
        f"      requests:\n        - name: {request}\n          exactly:\n"
        "            deviceClassName: gpu.nvidia.com\n"
    )


def claim_pod(container_claim: str = "gpu") -> str:
    # 11 resourceClaims, 12 - name, 13 template, 14 containers … 18 claims
    return (
        "resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: any-gpu\n"
        "containers:\n  - name: app\n    image: example\n    resources:\n      claims:\n"
        f"        - name: {container_claim}\n"
    )


def dra_stack(kit: Any, dra_values: str = "gpuResourcesEnabledOverride: true\n") -> dict[str, str]:
    return {
        "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", QUIET_OFF),
        "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", dra_values),
    }


def test_template_in_another_namespace(check: Any, kit: Any) -> None:
    found = check(
        {**dra_stack(kit), "rct.yaml": rct("other"), "app.yaml": kit.deployment("app", claim_pod())}
    )
    assert kit.only(found, "claim-template-missing") == [("app.yaml", 11)]


def test_shared_claim_missing(check: Any, kit: Any) -> None:
    pod = claim_pod().replace("resourceClaimTemplateName: any-gpu", "resourceClaimName: shared")
    found = check({**dra_stack(kit), "app.yaml": kit.deployment("app", pod)})
    assert kit.only(found, "claim-template-missing") == [("app.yaml", 11)]


def test_template_in_the_same_namespace(check: Any, kit: Any) -> None:
    found = check(
        {**dra_stack(kit), "rct.yaml": rct("media"), "app.yaml": kit.deployment("app", claim_pod())}
    )
    assert kit.ids(found) == set()


def test_container_names_the_template_not_the_pod_claim(check: Any, kit: Any) -> None:
    found = check(
        {
            **dra_stack(kit),
            "rct.yaml": rct("media"),
            "app.yaml": kit.deployment("app", claim_pod("any-gpu")),
        }
    )
    assert kit.only(found, "claim-reference-mismatch") == [("app.yaml", 18)]


def test_request_without_bridge(check: Any, kit: Any) -> None:
    values = "gpuResourcesEnabledOverride: true\nresourceApiVersion: v1beta1\n"
    found = check({**dra_stack(kit, values), "app.yaml": kit.deployment("app", kit.GPU_POD)})
    assert kit.only(found, "unbridged-extended-resource") == [("app.yaml", 16)]
    assert "bridged-extended-resource" not in kit.ids(found)


def test_request_bridged_by_the_chart_class(check: Any, kit: Any) -> None:
    found = check({**dra_stack(kit), "app.yaml": kit.deployment("app", kit.GPU_POD)})
    assert "unbridged-extended-resource" not in kit.ids(found)
    assert kit.only(found, "bridged-extended-resource") == [("app.yaml", 16)]
    (f,) = found
    assert "DeviceClass gpu.nvidia.com" in f.message
    assert "1 whole GPU" in f.message


def test_bridged_under_consumable_shares_takes_one_share(check: Any, kit: Any) -> None:
    values = (
        "gpuResourcesEnabledOverride: true\nfeatureGates:\n  ConsumableShares: true\n"
        "consumableShares: 4\n"
    )
    found = check({**dra_stack(kit, values), "app.yaml": kit.deployment("app", kit.GPU_POD)})
    (f,) = (f for f in found if f.rule == "bridged-extended-resource")
    assert "1 of the 4 shares" in f.message


def test_duplicate_extended_resource_name(check: Any, kit: Any) -> None:
    extra_class = (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: a-gpu\n"
        "spec:\n  extendedResourceName: nvidia.com/gpu\n"
    )
    found = check(
        {
            **dra_stack(kit),
            "class.yaml": extra_class,
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    (f,) = (f for f in found if f.rule == "bridged-extended-resource")
    assert "DeviceClass a-gpu (also mapped by gpu.nvidia.com" in f.message


def test_request_with_the_plugin_on_is_not_bridged(check: Any, kit: Any) -> None:
    found = check(
        {
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none"),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    assert not kit.ids(found) & {"bridged-extended-resource", "unbridged-extended-resource"}


# -- rct-immutable-change (--base) ---------------------------------------------------------


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def _claims_repo(kit: Any, root: Path, *, force: bool) -> None:
    kustomization = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
    ks = (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n"
        "  name: claims\n  namespace: flux-system\nspec:\n  interval: 1h\n"
        "  path: ./apps/claims/app\n  prune: true\n"
        "  sourceRef: {kind: GitRepository, name: flux-system}\n"
        + ("  force: true\n" if force else "")
    )
    files = {
        "apps/claims/ks.yaml": ks,
        "apps/claims/app/kustomization.yaml": kustomization + "resources:\n  - ./rct.yaml\n",
        "apps/claims/app/rct.yaml": rct("media"),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "base")


def test_template_spec_changed_without_force(kit: Any, tmp_path: Path) -> None:
    _claims_repo(kit, tmp_path, force=False)
    (tmp_path / "apps/claims/app/rct.yaml").write_text(rct("media", request="nvidia-gpu"))
    found = list(run_check([tmp_path], base="HEAD").findings)
    assert kit.only(found, "rct-immutable-change") == [("apps/claims/app/rct.yaml", 6)]


def test_template_spec_changed_with_force(kit: Any, tmp_path: Path) -> None:
    _claims_repo(kit, tmp_path, force=True)
    (tmp_path / "apps/claims/app/rct.yaml").write_text(rct("media", request="nvidia-gpu"))
    found = list(run_check([tmp_path], base="HEAD").findings)
    assert "rct-immutable-change" not in kit.ids(found)


def test_template_unchanged(kit: Any, tmp_path: Path) -> None:
    _claims_repo(kit, tmp_path, force=False)
    found = list(run_check([tmp_path], base="HEAD").findings)
    assert "rct-immutable-change" not in kit.ids(found)


def test_subdirectory_against_base(kit: Any, tmp_path: Path) -> None:
    """Checking a subdirectory compares the same subdirectory at the base revision."""
    _claims_repo(kit, tmp_path, force=False)
    (tmp_path / "apps/claims/app/rct.yaml").write_text(rct("media", request="nvidia-gpu"))
    found = list(run_check([tmp_path / "apps"], base="HEAD").findings)
    assert kit.only(found, "rct-immutable-change") == [("claims/app/rct.yaml", 6)]
