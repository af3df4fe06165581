"""`rehearse --repo PATH` alone on ``fixtures/tpu-dependency`` (see
``test_repo_dependencies.py``): the GPU consumer ``vision`` depends on ``detector``, whose pod
needs a label and a TPU no default node has; the default inventory gives them to
``gpu-node-0``, so the move is rehearsed both ways. ``archive``, which nothing depends on,
gets neither and stays Pending, not waited for."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift_twin.rehearse import RehearseOptions, as_json, as_text, rehearse

pytestmark = [pytest.mark.slow(seconds=90)]

FIXTURE = Path(__file__).parent / "fixtures/tpu-dependency"
LINES = [
    "node gpu-node-0 labelled feature.node.kubernetes.io/usb-tpu.present=true: detector "
    "requires it; give --nodes for your real nodes",
    "node gpu-node-0 offers example.com/tpu: 1: detector requires it (another device plugin "
    "advertises it on the real cluster); give --nodes for your real nodes",
]


def test_what_the_consumer_depends_on_gets_its_label_and_its_tpu(tmp_path: Path) -> None:
    result = rehearse(RehearseOptions(example=None, repo=FIXTURE), workdir=tmp_path)
    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.violations == ()
    assert result.exit_code == 0
    assert list(result.setup[1:]) == LINES
    assert as_text(result).splitlines()[2:4] == LINES
    # vision's pod Running before and after.
    assert result.samples[0].gpu_pods_running == result.samples[-1].gpu_pods_running == 1
    doc = as_json(result)
    assert doc["nodeResources"] == [
        {
            "node": "gpu-node-0",
            "resource": "example.com/tpu",
            "count": 1,
            "requiredBy": ["detector"],
        }
    ]
    assert [lb["key"] for lb in doc["nodeLabels"]] == ["feature.node.kubernetes.io/usb-tpu.present"]
    # archive: no label, no FPGA; not waited for.
    assert ("HelmRelease", "media", "archive") in {u.key for u in result.unsettled}
