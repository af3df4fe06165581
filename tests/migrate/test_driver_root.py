"""--to dra gives the DRA driver the driver root the tree shows, and check holds it to that."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from tests.migrate.conftest import ROOT, copy_repo, needs_fixtures

from gpushift.migrate import Options, migrate
from gpushift.rules import run_check

EXAMPLE = ROOT / "examples" / "homelab-repo"
OPERATOR = "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"
DRA = "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"


def _values(path: Path) -> dict[str, object]:
    (doc,) = (d for d in yaml.safe_load_all(path.read_text()) if d)
    values = doc["spec"]["values"]
    assert isinstance(values, dict)
    return values


def _example(tmp_path: Path) -> Path:
    root = tmp_path / "homelab-repo"
    shutil.copytree(EXAMPLE, root)
    return root


def _migrated_root(root: Path, dra: str = DRA) -> object:
    migrate(root, Options(to="dra"), write=True)
    return _values(root / dra).get("nvidiaDriverRoot")


def _mismatches(root: Path) -> list[tuple[str, int | None]]:
    report = run_check([root])
    return [(f.path, f.line) for f in report.findings if f.rule == "driver-root-mismatch"]


def test_the_talos_example_keeps_the_operators_install_dir(tmp_path: Path) -> None:
    root = _example(tmp_path)
    hostpaths = _values(root / OPERATOR)["hostPaths"]
    assert isinstance(hostpaths, dict)
    want = hostpaths["driverInstallDir"]
    assert want == "/usr/local"  # the example is written for Talos
    assert _migrated_root(root) == want
    assert _mismatches(root) == []


def test_check_finds_the_root_the_old_migrate_wrote(tmp_path: Path) -> None:
    root = _example(tmp_path)
    migrate(root, Options(to="dra"), write=True)
    dra = root / DRA
    text = dra.read_text()
    assert "nvidiaDriverRoot: /usr/local\n" in text
    dra.write_text(text.replace("nvidiaDriverRoot: /usr/local\n", "nvidiaDriverRoot: /\n"))
    line = next(i for i, x in enumerate(dra.read_text().splitlines(), 1) if "DriverRoot" in x)
    assert _mismatches(root) == [(DRA, line)]


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        # Another install dir is taken as written.
        ("driverInstallDir: /usr/local", "driverInstallDir: /opt/nvidia", "/opt/nvidia"),
        # No install dir and the driver on the host: the chart default /.
        ("hostPaths:\n      # Talos", "hostPathsGone:\n      # Talos", "/"),
    ],
)
def test_the_operators_install_dir_off_talos(tmp_path: Path, old: str, new: str, want: str) -> None:
    root = _example(tmp_path)
    hr = root / OPERATOR
    text = hr.read_text()
    assert old in text
    hr.write_text(text.replace(old, new))
    values = _values(hr)
    assert values["driver"] == {"enabled": False}
    assert _migrated_root(root) == want
    assert _mismatches(root) == []


def test_an_operator_that_installs_the_driver(tmp_path: Path) -> None:
    root = _example(tmp_path)
    hr = root / OPERATOR
    text = hr.read_text()
    text = text.replace("    driver:\n      enabled: false\n", "    driver:\n      enabled: true\n")
    text = text.replace("hostPaths:\n      # Talos", "hostPathsGone:\n      # Talos")
    hr.write_text(text)
    assert _values(hr)["driver"] == {"enabled": True}
    assert _migrated_root(root) == "/run/nvidia/driver"
    assert _mismatches(root) == []


@needs_fixtures
def test_the_standalone_plugins_root_is_kept(tmp_path: Path) -> None:
    root = copy_repo("Tanguille__cluster__88576ac4-device-plugin", tmp_path)
    # Made a tree that does not show Talos: its machine patches and extension label go.
    shutil.rmtree(root / "talos")
    hr = root / "kubernetes/apps/kube-system/nvidia-device-plugin/app/helmrelease.yaml"
    dcgm = root / "kubernetes/apps/observability/exporters/dcgm-exporter/app/helmrelease.yaml"
    label = "extensions.talos.dev/nvidia-container-toolkit-production"
    for f in (hr, dcgm):
        assert label in f.read_text()
        f.write_text(f.read_text().replace(label, "example.invalid/nvidia"))
    docs = [d for d in yaml.safe_load_all(hr.read_text()) if d]
    (release,) = (d for d in docs if d["kind"] == "HelmRelease")
    assert "nvidiaDriverRoot" not in release["spec"]["values"]
    text = hr.read_text()
    assert "  values:\n" in text
    hr.write_text(text.replace("  values:\n", "  values:\n    nvidiaDriverRoot: /opt/drv\n", 1))
    dra = "kubernetes/apps/kube-system/dra-driver-nvidia-gpu/app/helmrelease.yaml"
    assert _migrated_root(root, dra) == "/opt/drv"


@needs_fixtures
def test_talos_wins_over_a_standalone_plugins_root(tmp_path: Path) -> None:
    root = copy_repo("Tanguille__cluster__88576ac4-device-plugin", tmp_path)
    assert (root / "talos/patches/control-1/nvidia-gpu.yaml").is_file()
    hr = root / "kubernetes/apps/kube-system/nvidia-device-plugin/app/helmrelease.yaml"
    text = hr.read_text()
    hr.write_text(text.replace("  values:\n", "  values:\n    nvidiaDriverRoot: /\n", 1))
    dra = "kubernetes/apps/kube-system/dra-driver-nvidia-gpu/app/helmrelease.yaml"
    assert _migrated_root(root, dra) == "/usr/local"
    assert _mismatches(root) == []


@needs_fixtures
def test_a_talos_tree_gets_usr_local(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    assert (root / "talos").is_dir()
    assert _migrated_root(root) == "/usr/local"
    assert _mismatches(root) == []
