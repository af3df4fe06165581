"""``migrate --to dra`` places what it adds where the repository's own layout puts it.

- gelato/homecluster keeps every Flux Kustomization in ``flux-system`` (the root patches
  ``substituteFrom: cluster-settings`` into all of them, a ConfigMap only flux-system has) and
  names its operator's Kustomization ``nvidia-gpu-operator``.
- tparker00/home-ops lists its device plugin's ``ks.yaml`` two folders down
  (``./nvidia/device-plugin/ks.yaml`` in ``kubernetes/apps/kube-system/kustomization.yaml``).
- A hand-made tree with consumers in two namespaces and every Kustomization in flux-system
  gets one claim-template Kustomization per namespace, under distinct names.

Expectations are read from the fixture files, not from the tool.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.migrate.conftest import REPOS, needs_fixtures

from gpushift.gitops import load_repo
from gpushift.migrate import Options, migrate
from gpushift.rules import run_check

pytestmark = [needs_fixtures, pytest.mark.slow(seconds=10)]

FULL = REPOS.parent / "full"


def _doc(path: Path) -> Any:
    return next(d for d in yaml.safe_load_all(path.read_text()) if d)


def _resources(path: Path) -> list[str]:
    return [str(r) for r in _doc(path)["resources"]]


def test_gelato_dra_kustomization_lives_where_its_operator_does(tmp_path: Path) -> None:
    root = tmp_path / "gelato"
    shutil.copytree(FULL / "gelato__homecluster", root)
    apps = root / "kubernetes/apps/kube-system"
    operator = _doc(apps / "nvidia-gpu-operator/ks.yaml")
    release = _doc(apps / "nvidia-gpu-operator/app/helmrelease.yaml")
    assert operator["metadata"]["namespace"] == "flux-system"

    migrate(root, Options(to="dra"), write=True)

    driver = _doc(apps / "dra-driver-nvidia-gpu/ks.yaml")
    assert driver["metadata"]["namespace"] == operator["metadata"]["namespace"]
    assert driver["spec"]["targetNamespace"] == release["metadata"]["namespace"]
    assert driver["spec"]["dependsOn"] == [{"name": operator["metadata"]["name"]}]
    assert driver["spec"]["sourceRef"]["name"] == operator["spec"]["sourceRef"]["name"]
    assert "./dra-driver-nvidia-gpu/ks.yaml" in _resources(apps / "kustomization.yaml")
    # The root's patch gives it the same substitution sources, which exist in its namespace.
    repo = load_repo([root])
    ks = next(k for k in repo.kustomizations if k.name == "dra-driver-nvidia-gpu")
    assert ks.active
    assert {r.name for r in ks.substitute_from if not r.optional} == {
        "cluster-settings",
        "cluster-secrets",
    }
    assert run_check([root]).exit_code == 0


def test_tparker_nested_device_plugin_is_unlisted_and_replaced_in_the_same_list(
    tmp_path: Path,
) -> None:
    root = tmp_path / "tparker"
    shutil.copytree(FULL / "tparker00__home-ops", root)
    listing = root / "kubernetes/apps/kube-system/kustomization.yaml"
    before = _resources(listing)
    assert "./nvidia/device-plugin/ks.yaml" in before
    plugin = _doc(root / "kubernetes/apps/kube-system/nvidia/device-plugin/ks.yaml")

    migrate(root, Options(to="dra"), write=True)

    after = _resources(listing)
    assert "./nvidia/device-plugin/ks.yaml" not in after
    assert "./nvidia/dra-driver-nvidia-gpu/ks.yaml" in after
    assert [r for r in after if "nvidia" not in r] == [r for r in before if "nvidia" not in r]
    driver = _doc(root / "kubernetes/apps/kube-system/nvidia/dra-driver-nvidia-gpu/ks.yaml")
    assert driver["metadata"]["namespace"] == plugin["metadata"]["namespace"]
    new_app = "./kubernetes/apps/kube-system/nvidia/dra-driver-nvidia-gpu/app"
    assert driver["spec"]["path"] == new_app
    assert not (root / "kubernetes/apps/kube-system/nvidia/device-plugin").exists()
    repo = load_repo([root])
    assert next(k for k in repo.kustomizations if k.name == "dra-driver-nvidia-gpu").active
    assert run_check([root]).exit_code == 0


def _ks(name: str, path: str, target: str, extra: str = "") -> str:
    return (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n"
        f"  name: {name}\n  namespace: flux-system\nspec:\n  targetNamespace: {target}\n"
        f"  interval: 1h\n  path: {path}\n  prune: true\n"
        "  sourceRef:\n    kind: GitRepository\n    name: flux-system\n" + extra
    )


KUSTOMIZE = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
PLUGIN = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: nvidia-device-plugin
spec:
  interval: 1h
  chart:
    spec:
      chart: nvidia-device-plugin
      version: 0.19.3
      sourceRef: {kind: HelmRepository, name: nvdp}
  values:
    config:
      map:
        default: |-
          version: v1
          sharing:
            timeSlicing:
              resources:
                - name: nvidia.com/gpu
                  replicas: 4
"""


def _consumer(name: str) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
        f"  name: {name}\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n"
        f"  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n"
        "      containers:\n        - name: main\n          image: example/app:1\n"
        "          resources:\n            limits:\n              nvidia.com/gpu: 1\n"
    )


def _one_flux_namespace_tree(root: Path) -> None:
    files = {
        "flux/cluster.yaml": _ks("cluster-apps", "./apps", "flux-system"),
        "apps/kustomization.yaml": KUSTOMIZE
        + "  - ./gpu/nvidia-device-plugin/ks.yaml\n  - ./media/player/ks.yaml\n"
        "  - ./ai/chat/ks.yaml\n",
        "apps/gpu/nvidia-device-plugin/ks.yaml": _ks(
            "nvidia-device-plugin", "./apps/gpu/nvidia-device-plugin/app", "gpu"
        ),
        "apps/gpu/nvidia-device-plugin/app/kustomization.yaml": KUSTOMIZE
        + "  - ./helmrelease.yaml\n",
        "apps/gpu/nvidia-device-plugin/app/helmrelease.yaml": PLUGIN,
    }
    for ns, app in (("media", "player"), ("ai", "chat")):
        files[f"apps/{ns}/{app}/ks.yaml"] = _ks(app, f"./apps/{ns}/{app}/app", ns)
        files[f"apps/{ns}/{app}/app/kustomization.yaml"] = KUSTOMIZE + "  - ./deployment.yaml\n"
        files[f"apps/{ns}/{app}/app/deployment.yaml"] = _consumer(app)
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_claim_templates_of_two_namespaces_in_one_flux_namespace(tmp_path: Path) -> None:
    _one_flux_namespace_tree(tmp_path)

    migrate(tmp_path, Options(to="dra"), write=True)

    for ns, app in (("media", "player"), ("ai", "chat")):
        templates = _doc(tmp_path / f"apps/{ns}/gpu-claim-templates/ks.yaml")
        assert templates["metadata"] == {
            "name": f"gpu-claim-templates-{ns}",
            "namespace": "flux-system",
        }
        assert templates["spec"]["targetNamespace"] == ns
        assert templates["spec"]["dependsOn"] == [{"name": "dra-driver-nvidia-gpu"}]
        consumer = _doc(tmp_path / f"apps/{ns}/{app}/ks.yaml")
        assert {"name": f"gpu-claim-templates-{ns}"} in consumer["spec"]["dependsOn"]
        assert f"./{ns}/gpu-claim-templates/ks.yaml" in _resources(
            tmp_path / "apps/kustomization.yaml"
        )
    driver = _doc(tmp_path / "apps/gpu/dra-driver-nvidia-gpu/ks.yaml")
    assert driver["metadata"]["namespace"] == "flux-system"
    assert "dependsOn" not in driver["spec"]
    assert run_check([tmp_path]).exit_code == 0
