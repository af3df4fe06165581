"""Structures migrate will not edit are refused up front, naming file and line; nothing is
written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.migrate.conftest import REPOS, copy_repo, needs_fixtures, snapshot

from gpushift._errors import InputError
from gpushift.cli import main
from gpushift.migrate import Options, migrate

pytestmark = needs_fixtures

JELLYFIN = "kubernetes/apps/media/jellyfin/app/helmrelease.yaml"


def test_anchored_resources_are_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    path = root / JELLYFIN
    text = path.read_text()
    # The GPU container's resources become an anchor another container reuses.
    assert text.count("            resources:\n") == 1
    path.write_text(text.replace("            resources:\n", "            resources: &res\n"))
    line = next(
        i for i, x in enumerate(path.read_text().splitlines(), 1) if x.endswith("resources: &res")
    )
    before = snapshot(root)
    with pytest.raises(InputError) as err:
        migrate(root, Options(to="dra"), write=True)
    assert str(err.value).startswith(f"{JELLYFIN}:{line}: ")
    assert "&res" in str(err.value)
    assert snapshot(root) == before


def test_values_from_a_configmap_are_refused(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    app = root / "kubernetes/apps/gpu-operator/gpu-operator/app"
    hr = app / "helmrelease.yaml"
    text = hr.read_text()
    block = "    devicePlugin:\n      enabled: true\n"
    assert block in text
    hr.write_text(
        text.replace(block, "").replace(
            "  values:\n",
            "  valuesFrom:\n    - kind: ConfigMap\n      name: gpu-values\n  values:\n",
        )
    )
    (app / "values.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gpu-values\n"
        "  namespace: gpu-operator\ndata:\n  values.yaml: |\n    devicePlugin:\n"
        "      enabled: true\n"
    )
    kfile = app / "kustomization.yaml"
    kfile.write_text(kfile.read_text() + "  - ./values.yaml\n")
    before = snapshot(root)
    with pytest.raises(InputError) as err:
        migrate(root, Options(to="dra"), write=True)
    message = str(err.value)
    assert message.startswith("kubernetes/apps/gpu-operator/gpu-operator/app/values.yaml:")
    assert "valuesFrom" in message
    assert snapshot(root) == before


def test_both_allocators_at_once_is_refused(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    later = REPOS / "LukeEvansTech__talos-cluster__later-dra" / "kubernetes/apps/gpu-operator"
    shutil.copytree(
        later / "dra-driver-nvidia-gpu", root / "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu"
    )
    parent = root / "kubernetes/apps/gpu-operator/kustomization.yaml"
    parent.write_text(parent.read_text() + "  - ./dra-driver-nvidia-gpu/ks.yaml\n")
    with pytest.raises(InputError) as err:
        migrate(root, Options(to="dra"))
    assert str(err.value).startswith(
        "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml:"
    )
    assert "both allocators" in str(err.value)


def test_refusal_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    path = root / JELLYFIN
    path.write_text(
        path.read_text().replace("            resources:\n", "            resources: &r\n")
    )
    assert main(["migrate", str(root), "--to", "dra", "--write"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"gpushift: error: {JELLYFIN}:")


def test_no_gpu_stack_is_refused(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    with pytest.raises(InputError, match="no active NVIDIA device plugin"):
        migrate(tmp_path, Options(to="dra"))


def test_a_device_plugin_applied_as_a_manifest_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two plugin DaemonSets, one per node pool, no chart: moving to DRA would leave them
    # advertising beside the DRA driver, so migrate names the first and writes nothing.
    root = tmp_path / "plugin-pools"
    shutil.copytree(Path(__file__).parents[1] / "rules" / "repos" / "plugin-pools", root)
    text = (root / "plugins" / "pool-a.yaml").read_text().splitlines()
    line = text.index("apiVersion: apps/v1") + 1
    before = snapshot(root)
    assert main(["migrate", str(root), "--to", "dra", "--write"]) == 2
    assert capsys.readouterr().err == (
        f"gpushift: error: plugins/pool-a.yaml:{line}: the device plugin DaemonSet "
        "kube-system/nvdp-pool-a is a plain manifest; gpushift migrates only a gpu-operator or "
        "nvidia-device-plugin HelmRelease: move it into one, or remove it in the same change "
        "by hand\n"
    )
    assert snapshot(root) == before
