"""migrate --to gpucluster and back: gpu-operator's ClusterPolicy stack to its GPUCluster.

The round trip runs on render's homelab example without Talos (gpu-operator installs driver
and toolkit, time-slicing 5). Expected values are read off the research notes on gpu-operator
v26.7.0 (``clusterPolicy.deployCR`` / ``gpuCluster.deployCR``; consumable shares as
``draDriver.featureGates.ConsumableShares`` plus ``CONSUMABLE_SHARES`` in
``draDriver.gpus.kubeletPlugin.env``; a GPUCluster with ``driver.enabled`` needs
``driver.nvidiaDriverCRD.enabled``; its gpu.nvidia.com class has no extendedResourceName), and
refusals off the fixture files' own lines.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.migrate.conftest import copy_repo, needs_fixtures, snapshot

from gpushift._errors import InputError
from gpushift.gitops import load_repo, summarize
from gpushift.migrate import Options, migrate
from gpushift.render import example_text, parse_config, render_tree
from gpushift.reports import Severity
from gpushift.rules import check_repo

APPS = "kubernetes/apps"
OPERATOR = f"{APPS}/gpu-operator/gpu-operator/app"
JELLYFIN = f"{APPS}/media/jellyfin/app/helmrelease.yaml"
LLAMA = f"{APPS}/ai/llmkube/models/llama-nvidia.yaml"


def _homelab(root: Path, **cluster: Any) -> None:
    data = yaml.safe_load(example_text("homelab"))
    data["cluster"]["talos"] = False
    data["cluster"].update(cluster)
    for rel, text in render_tree(parse_config(yaml.safe_dump(data), display="t")).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _values(root: Path) -> dict[str, Any]:
    (release,) = yaml.safe_load_all((root / OPERATOR / "helmrelease.yaml").read_text())
    values: dict[str, Any] = release["spec"]["values"]
    return values


def _errors(root: Path) -> list[str]:
    return [
        f"{f.path}:{f.line} {f.rule}"
        for f in check_repo(load_repo([root]))
        if f.severity is Severity.ERROR
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", "migrate", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_clusterpolicy_to_gpucluster_and_back(tmp_path: Path) -> None:
    _homelab(tmp_path)
    start = summarize(load_repo([tmp_path]))
    assert (start.allocator, start.sharing.mode, start.sharing.replicas) == (
        "device-plugin",
        "time-slicing",
        5,
    )
    result = migrate(tmp_path, Options(to="gpucluster"), write=True)
    assert result.written

    v = _values(tmp_path)
    assert v["clusterPolicy"] == {"deployCR": False}
    assert v["gpuCluster"] == {"deployCR": True}
    assert v["driver"]["nvidiaDriverCRD"] == {"enabled": True}
    assert v["draDriver"] == {
        "featureGates": {"ConsumableShares": True},
        "gpus": {"kubeletPlugin": {"env": [{"name": "CONSUMABLE_SHARES", "value": "5"}]}},
    }
    assert "config" not in v["devicePlugin"]
    assert not (tmp_path / OPERATOR / "time-slicing-config.yaml").exists()
    # No DRA chart: the operator runs the driver.
    assert not list(tmp_path.rglob("*dra-driver-nvidia-gpu*"))

    # Consumers on claims, exactly as --to dra converts them.
    (jellyfin,) = yaml.safe_load_all((tmp_path / JELLYFIN).read_text())
    app = jellyfin["spec"]["values"]["controllers"]["jellyfin"]["containers"]["app"]
    assert app["resources"] == {"claims": [{"name": "gpu"}]}
    assert jellyfin["spec"]["values"]["defaultPodOptions"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}
    ]
    (ks,) = yaml.safe_load_all((tmp_path / APPS / "media/gpu-claim-templates/ks.yaml").read_text())
    assert ks["spec"]["dependsOn"] == [{"name": "gpu-operator", "namespace": "gpu-operator"}]

    # The InferenceService keeps nvidia.com/gpu: a DeviceClass of its own bridges it.
    (cls,) = yaml.safe_load_all(
        (tmp_path / OPERATOR / "deviceclass-extended-resource.yaml").read_text()
    )
    assert cls["kind"] == "DeviceClass"
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    (kust,) = yaml.safe_load_all((tmp_path / OPERATOR / "kustomization.yaml").read_text())
    assert kust["resources"] == [
        "./ocirepository.yaml",
        "./helmrelease.yaml",
        "./deviceclass-extended-resource.yaml",
    ]

    after = summarize(load_repo([tmp_path]))
    assert (after.allocator, after.dra_stack) == ("dra", "gpucluster")
    assert (after.sharing.mode, after.sharing.replicas) == ("consumable-shares", 5)
    assert {c.name: c.request for c in after.consumers}["llama-nvidia"] == "bridged"
    assert _errors(tmp_path) == []
    notes = "\n".join(result.plan.notes)
    assert "gpu-operator 26.3.3 has no GPUCluster" in notes
    assert "Migrating an existing ClusterPolicy deployment to GPUCluster in place" in notes
    assert "NVIDIADriver CR" in notes

    # Already there: nothing to do.
    assert migrate(tmp_path, Options(to="gpucluster")).plan.empty

    back_result = migrate(tmp_path, Options(to="device-plugin"), write=True)
    assert back_result.written
    v = _values(tmp_path)
    assert v["clusterPolicy"] == {"deployCR": True}
    assert v["gpuCluster"] == {"deployCR": False}
    assert "draDriver" not in v
    assert v["devicePlugin"] == {
        "enabled": True,
        "config": {"name": "time-slicing-config", "default": "any"},
    }
    assert not (tmp_path / OPERATOR / "deviceclass-extended-resource.yaml").exists()
    assert not (tmp_path / APPS / "media/gpu-claim-templates").exists()
    back = summarize(load_repo([tmp_path]))
    assert (back.allocator, back.dra_stack, back.sharing) == ("device-plugin", None, start.sharing)
    assert [(c.name, c.request) for c in back.consumers] == [
        (c.name, c.request) for c in start.consumers
    ]
    assert _errors(tmp_path) == []


def test_sharing_unlimited_and_a_preinstalled_driver(tmp_path: Path) -> None:
    _homelab(tmp_path, preinstalledDriver=True)
    plan = migrate(tmp_path, Options(to="gpucluster", sharing="unlimited"), write=True).plan
    v = _values(tmp_path)
    # driver.enabled is false: the chart's NVIDIADriver requirement does not apply.
    assert v["driver"] == {"enabled": False}
    assert v["draDriver"]["gpus"]["kubeletPlugin"]["env"] == [
        {"name": "CONSUMABLE_SHARES", "value": "unlimited"}
    ]
    assert not any("NVIDIADriver" in n for n in plan.notes)
    # Back to time-slicing needs a replica count.
    with pytest.raises(InputError) as err:
        migrate(tmp_path, Options(to="device-plugin"))
    assert "pass --sharing N" in str(err.value)
    assert str(err.value).startswith(f"{OPERATOR}/helmrelease.yaml:")


def test_to_dra_from_a_gpucluster_is_refused(tmp_path: Path) -> None:
    _homelab(tmp_path)
    migrate(tmp_path, Options(to="gpucluster"), write=True)
    before = snapshot(tmp_path)
    out = _cli(str(tmp_path), "--to", "dra")
    assert out.returncode == 2
    assert "GPUCluster already runs DRA" in out.stderr
    assert snapshot(tmp_path) == before


@needs_fixtures
def test_talos_is_refused_naming_the_evidence(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    before = snapshot(root)
    out = _cli(str(root), "--to", "gpucluster", "--write")
    assert out.returncode == 2
    assert out.stdout == ""
    # talos/patches/controller/cluster.yaml: the patch's document starts with `cluster:` (line 2).
    assert out.stderr.startswith("gpushift: error: talos/patches/controller/cluster.yaml:2: ")
    assert "the GPUCluster derives the driver root from the validator, which assumes /" in (
        out.stderr
    )
    assert out.stderr.count("\n") == 1
    assert snapshot(root) == before


@needs_fixtures
def test_driver_preinstalled_under_usr_local_is_refused(tmp_path: Path) -> None:
    root = copy_repo("jfroy__flatops", tmp_path)
    before = snapshot(root)
    out = _cli(str(root), "--to", "gpucluster", "--write")
    assert out.returncode == 2
    # driver.enabled: false with hostPaths.driverInstallDir: /usr/local on line 38.
    path = "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"
    assert out.stderr.startswith(f"gpushift: error: {path}:38: ")
    assert "under /usr/local (hostPaths.driverInstallDir)" in out.stderr
    assert "which assumes /" in out.stderr
    assert snapshot(root) == before


def test_standalone_device_plugin_is_refused(tmp_path: Path) -> None:
    _homelab(tmp_path, preinstalledDriver=True)
    # The same homelab on the standalone chart: no gpu-operator to deploy a GPUCluster.
    for p in list(tmp_path.rglob("*")):
        if p.is_file():
            p.unlink()
    data = yaml.safe_load(example_text("homelab"))
    data["cluster"]["talos"] = False
    data["allocator"] = "device-plugin"
    data["sharing"] = 4
    for rel, text in render_tree(parse_config(yaml.safe_dump(data), display="t")).items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    before = snapshot(tmp_path)
    out = _cli(str(tmp_path), "--to", "gpucluster")
    assert out.returncode == 2
    release = f"{APPS}/gpu-operator/nvidia-device-plugin/app/helmrelease.yaml"
    assert out.stderr.startswith(f"gpushift: error: {release}:")
    assert "standalone device plugin" in out.stderr
    assert "--to dra" in out.stderr
    assert snapshot(tmp_path) == before


def test_cli_takes_gpucluster_and_its_sharing(tmp_path: Path) -> None:
    _homelab(tmp_path)
    out = _cli(
        str(tmp_path), "--to", "gpucluster", "--sharing", "memory", "--memory-per-claim", "4Gi"
    )
    # The InferenceService stays bridged, which cannot ask for memory.
    assert out.returncode == 2
    assert f"{LLAMA}:" in out.stderr
    assert "--sharing memory" in out.stderr
    out = _cli(str(tmp_path), "--to", "gpucluster", "--sharing", "3", "-o", "json")
    assert out.returncode == 1
    plan = json.loads(out.stdout)
    assert plan["to"] == "gpucluster"
    env = [e for e in plan["edits"] if e["path"][-1] == "env" and e["op"] == "append"]
    assert [(e["new"], e["reason"]) for e in env] == [
        ({"name": "CONSUMABLE_SHARES", "value": "3"}, "each GPU takes 3 claims")
    ]


def test_a_gpucluster_beside_the_clusterpolicy_is_refused(tmp_path: Path) -> None:
    _homelab(tmp_path)
    hr = tmp_path / OPERATOR / "helmrelease.yaml"
    text = hr.read_text()
    # The rendered values start on line 19 (`cdi:`); two lines above it make gpuCluster line
    # 19 and its deployCR line 20, with clusterPolicy.deployCR left at its default (true).
    hr.write_text(text.replace("  values:\n", "  values:\n    gpuCluster:\n      deployCR: true\n"))
    before = snapshot(tmp_path)
    for to in ("gpucluster", "dra"):
        out = _cli(str(tmp_path), "--to", to, "--write")
        assert out.returncode == 2, to
        assert out.stderr.startswith(f"gpushift: error: {OPERATOR}/helmrelease.yaml:20: "), to
    assert "gpucluster-clusterpolicy-conflict" in _cli(str(tmp_path), "--to", "gpucluster").stderr
    assert snapshot(tmp_path) == before


def test_back_from_a_gpucluster_object_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        "apiVersion: nvidia.com/v1alpha1\nkind: GPUCluster\nmetadata:\n  name: gpu-cluster\n"
        "spec: {}\n"
    )
    (tmp_path / "op.yaml").write_text(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n"
        "  name: gpu-operator\n  namespace: gpu-operator\nspec:\n  chart:\n    spec:\n"
        "      chart: gpu-operator\n  values:\n    clusterPolicy:\n      deployCR: false\n"
    )
    out = _cli(str(tmp_path), "--to", "device-plugin")
    assert out.returncode == 2
    assert out.stderr.startswith("gpushift: error: cluster.yaml:1: ")
    assert "a GPUCluster applied as an object is edited by hand" in out.stderr


def test_keep_old_keeps_the_time_slicing_config_with_the_reason(tmp_path: Path) -> None:
    _homelab(tmp_path)
    migrate(tmp_path, Options(to="gpucluster", keep_old=True), write=True)
    assert _values(tmp_path)["devicePlugin"]["config"] == {
        "name": "time-slicing-config",
        "default": "any",
    }
    text = (tmp_path / OPERATOR / "time-slicing-config.yaml").read_text()
    assert "nothing reads this once clusterPolicy.deployCR is false" in text
    # Back again: the kept config is the device plugin's once more, with no second copy.
    migrate(tmp_path, Options(to="device-plugin", keep_old=True), write=True)
    back = summarize(load_repo([tmp_path]))
    assert (back.allocator, back.sharing.mode, back.sharing.replicas) == (
        "device-plugin",
        "time-slicing",
        5,
    )
