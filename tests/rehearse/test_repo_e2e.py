"""The rehearsal on a real repository: LukeEvansTech/talos-cluster and the same tree after
`gpushift migrate --to dra --write` (issues #13 and #17).

The fixture is read in place as BEFORE; AFTER is a copy in a temporary directory, migrated.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpushift.migrate import Options as MigrateOptions
from gpushift.migrate import migrate
from gpushift_twin.rehearse import STEPS, RehearseOptions, rehearse

pytestmark = [pytest.mark.slow(seconds=180)]

FIXTURES = Path(__file__).resolve().parents[3] / "shared/fixtures"
PARTIAL = FIXTURES / "repos/LukeEvansTech__talos-cluster"
NODES = tuple(f"gpu-node-{i}" for i in range(3))
#: dispatcharr, jellyfin, pinchflat, plex, tdarr (nvidia.com/gpu: 1 each) and the llmkube
#: InferenceService llama-nvidia.
CONSUMERS = 6


def _migrated(repo: Path, tmp_path: Path) -> Path:
    after = tmp_path / "after"
    shutil.copytree(repo, after)
    result = migrate(after, MigrateOptions(to="dra"), write=True)
    assert result.written
    return after


def test_partial_fixture_migrated_both_directions_with_zero_violations(tmp_path: Path) -> None:
    if not PARTIAL.is_dir():
        pytest.skip("fixture repository not present")
    after = _migrated(PARTIAL, tmp_path)
    result = rehearse(
        RehearseOptions(example=None, repo=PARTIAL, target=str(after), time_scale=100)
    )
    assert result.violations == ()
    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.exit_code == 0
    for run in result.runs:
        assert [s["name"] for s in run.steps] == list(STEPS)
    # Before: time-slicing 5 ways per L4 (time-slicing-config, key any), every consumer Running.
    first, last = result.samples[0], result.samples[-1]
    assert first.allocatable == tuple((n, 5) for n in NODES)
    assert first.gpu_pods_running == CONSUMERS
    # Under DRA: the device plugin's key at 0 while the driver publishes one slice per node.
    dra = [s for s in result.samples if s.slices == tuple((n, 1) for n in NODES)]
    assert dra and all(a == 0 for s in dra for _, a in s.allocatable)
    # Back on the device plugin: as before.
    assert last.allocatable == tuple((n, 5) for n in NODES)
    assert last.slices == tuple((n, 0) for n in NODES)
    assert last.gpu_pods_running == CONSUMERS


FULL = FIXTURES / "full/LukeEvansTech__talos-cluster"
#: Three L4 nodes shaped like the cluster: it runs a generic device plugin for /dev/net/tun,
#: which its download apps ask for (kernel.org/tun), so they schedule and Flux settles.
FULL_NODES = """\
nodes:
- name: gpu-node
  count: 3
  gpus:
  - product: NVIDIA L4
  resources:
    kernel.org/tun: "1000"
"""


def test_full_fixture_migrated_both_directions_with_zero_violations(tmp_path: Path) -> None:
    # The whole repository from its own root (kubernetes/flux/cluster/ks.yaml), about 246
    # Kustomizations; a few minutes of wall time.
    if not FULL.is_dir():
        pytest.skip("fixture repository not present")
    after = _migrated(FULL, tmp_path)
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(FULL_NODES, encoding="utf-8")
    result = rehearse(
        RehearseOptions(example=None, repo=FULL, target=str(after), nodes=nodes, time_scale=100)
    )
    assert result.violations == ()
    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.exit_code == 0
    first, last = result.samples[0], result.samples[-1]
    assert first.allocatable == tuple((n, 5) for n in NODES)
    assert last.allocatable == tuple((n, 5) for n in NODES)
    # The five media apps with nvidia.com/gpu and llama-nvidia at least; the same back.
    assert first.gpu_pods_running >= CONSUMERS
    assert last.gpu_pods_running == first.gpu_pods_running
