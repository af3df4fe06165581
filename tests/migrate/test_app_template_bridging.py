"""app-template before 5.x cannot declare pod resourceClaims (its schema rejects the key), so
``migrate --to dra`` leaves such a consumer on ``nvidia.com/gpu``, which the DRA DeviceClass
serves through extended-resource bridging, and says so; the release's file is not touched.

gelato/homecluster's four GPU apps run app-template 3.6.1 (their HelmReleases' ``version``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.migrate.conftest import REPOS, needs_fixtures

from gpushift.cli import main
from gpushift.migrate import Options, migrate

pytestmark = needs_fixtures

GELATO = REPOS.parent / "full" / "gelato__homecluster"
APPS = {
    "kubernetes/apps/home/frigate/app/helmrelease.yaml": "Deployment home/frigate",
    "kubernetes/apps/home/silerotts/app/helmrelease.yaml": "Deployment home/silerotts",
    "kubernetes/apps/home/wyoming-whisper/app/helmrelease.yaml": "Deployment home/wyoming-whisper",
    "kubernetes/apps/media/jellyfin/app/helmrelease.yaml": "StatefulSet media/jellyfin",
}


def test_app_template_3_consumers_stay_bridged_and_the_tree_checks_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "gelato"
    shutil.copytree(GELATO, root)
    for path in APPS:
        assert "version: 3.6.1" in (root / path).read_text()
    before = {path: (root / path).read_bytes() for path in APPS}

    result = migrate(root, Options(to="dra"), write=True)

    assert result.written
    for path, workload in APPS.items():
        assert (root / path).read_bytes() == before[path]
        notes = [n for n in result.plan.notes if n.startswith(f"{path}:")]
        assert len(notes) == 1
        assert (
            f": {workload}: app-template 3.6.1 has no pod.resourceClaims, so it stays on "
            in (notes[0])
        )
    assert not any("resourceClaims" in str(c) for c in result.plan.changes())
    capsys.readouterr()
    assert main(["check", str(root)]) == 0
