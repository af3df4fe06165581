"""``migrate --to dra`` on a tree running gpu-operator's device plugin and the standalone chart
at once (sepffuzzball/fuzzlab-gitops: gpu-operator time-slices 4 ways through its ConfigMap,
the standalone chart in ``tools`` 6 ways inline): both go, the DRA driver goes beside the
operator with the operator's sharing, and a note says what the second plugin did.

Two standalone charts are still refused: which one's namespace and sharing would the driver take?
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from tests.migrate.conftest import REPOS, needs_fixtures

from gpushift._errors import InputError
from gpushift.gitops import load_repo, summarize
from gpushift.migrate import Options, migrate
from gpushift.rules import run_check

pytestmark = [needs_fixtures, pytest.mark.slow(seconds=10)]

SEPF = REPOS.parent / "full" / "sepffuzzball__fuzzlab-gitops"
APPS = "kubernetes/apps"
PLUGIN = f"{APPS}/tools/nvidia-device-plugin"


def _replicas(path: Path) -> int:
    found = re.search(r"replicas: (\d+)", path.read_text())
    assert found is not None
    return int(found.group(1))


def test_operator_and_standalone_plugin_both_give_way_to_dra(tmp_path: Path) -> None:
    root = tmp_path / "sepf"
    shutil.copytree(SEPF, root)
    theirs = _replicas(root / PLUGIN / "app/helmrelease.yaml")
    ours = _replicas(root / APPS / "gpu-operator/gpu-operator/app/time-slicing-config.yaml")
    assert (ours, theirs) == (4, 6)

    result = migrate(root, Options(to="dra"), write=True)

    assert not (root / PLUGIN).exists()
    listed = yaml.safe_load((root / APPS / "tools/kustomization.yaml").read_text())["resources"]
    assert "./nvidia-device-plugin/ks.yaml" not in listed
    operator = yaml.safe_load(
        (root / APPS / "gpu-operator/gpu-operator/app/helmrelease.yaml").read_text()
    )
    assert operator["spec"]["values"]["devicePlugin"]["enabled"] is False
    assert (root / APPS / "gpu-operator/dra-driver-nvidia-gpu/ks.yaml").is_file()
    (note,) = [n for n in result.plan.notes if n.startswith(f"{PLUGIN}/app/helmrelease.yaml:")]
    assert f"shared the same cards {theirs} ways beside gpu-operator" in note
    assert f"({ours} shares)" in note
    after = summarize(load_repo([root]))
    assert after.allocator == "dra"
    assert [p for p in load_repo([root]).device_plugins if p.active] == []
    assert run_check([root]).exit_code == 0


def test_two_standalone_plugins_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "sepf"
    shutil.copytree(SEPF, root)
    # The operator's release becomes a second standalone chart.
    op = root / APPS / "gpu-operator/gpu-operator/app/helmrelease.yaml"
    op.write_text(op.read_text().replace("chart: gpu-operator", "chart: nvidia-device-plugin"))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(InputError, match="releases deploy the device plugin"):
        migrate(root, Options(to="dra"), write=True)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
