"""`rehearse --repo` on whole hand-made repositories: what it waits for, what it reports, and
how it explains a Pending GPU pod, on the twin with real clients.

The fixtures are small Flux trees under ``fixtures/`` (the twin's default inventory: three
nodes ``gpu-node-0..2``, one L4 each, no other labels or resources):

- ``unrelated-app``: laid over the homelab (``render --example homelab``, gpu-operator
  time-slicing 5 ways, and the same rendered for DRA as the target): an app-template
  ``storage/minio`` pinned to ``node-role.example.com/nas: "true"``, which no node has.
- ``no-plugin-node``: the standalone device plugin with ``nodeSelector: {gpu-type: a100}``
  and one consumer, ``media/plex`` (``nvidia.com/gpu: 1``).
- ``unplaceable``: the device plugin on every node; ``media/plex`` asks for an
  ``NVIDIA-H100-80GB-HBM3`` by nodeSelector, ``media/tdarr`` for ``kernel.org/tun: 1``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpushift import kube
from gpushift.render import write_example
from gpushift_twin.rehearse import (
    DEFAULT_NODES,
    RehearseOptions,
    TwinOptions,
    TwinStartError,
    rehearse,
    repo_seeds,
    running_twin,
    settle,
)

pytestmark = [pytest.mark.slow(seconds=120)]

FIXTURES = Path(__file__).parent / "fixtures"
#: The nodeSelector of minio, which none of the three default nodes has.
NAS = "node-role.example.com/nas=true"
UNSCHEDULABLE = (
    "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)
NO_GPU = (
    "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
    "available: 3 Preemption is not helpful for scheduling."
)
NO_TUN = (
    "0/3 nodes are available: 3 Insufficient kernel.org/tun. preemption: 0/3 nodes are "
    "available: 3 Preemption is not helpful for scheduling."
)
INVENTORY_FIX = "or make the inventory from your nodes: gpushift twin inventory --from"


@pytest.fixture(scope="module")
def homelab_with_minio(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("unrelated")
    before = write_example(tmp / "before", allocator="gpu-operator", sharing=5)
    after = write_example(tmp / "after", allocator="dra", sharing=5)
    for tree in (before, after):
        shutil.copytree(FIXTURES / "unrelated-app", tree, dirs_exist_ok=True)
    return before, after


def test_an_unrelated_pending_app_does_not_block_and_is_reported(
    homelab_with_minio: tuple[Path, Path],
) -> None:
    before, after = homelab_with_minio
    result = rehearse(RehearseOptions(example=None, repo=before, target=str(after)))
    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.violations == ()
    assert result.exit_code == 0
    # Only minio never settled: its HelmRelease (helm --wait on a Pending pod).
    (minio,) = result.unsettled
    assert minio.key == ("HelmRelease", "storage", "minio")
    assert minio.message
    (line,) = minio.pods
    assert line.startswith("pod storage/minio-")
    assert f"Pending: {UNSCHEDULABLE} — no node has the label {NAS} its nodeSelector" in line
    assert 'add `labels: {node-role.example.com/nas: "true"}`' in line
    assert f"did not settle (not waited for): {minio.line()}" in result.notes
    # The homelab's seven consumers came up: no GPU pod was left Pending.
    assert result.pending == ()


def test_strict_settle_waits_for_the_unrelated_app(homelab_with_minio: tuple[Path, Path]) -> None:
    before, after = homelab_with_minio
    options = RehearseOptions(
        example=None, repo=before, target=str(after), strict_settle=True, settle_timeout=25
    )
    with pytest.raises(TwinStartError) as err:
        rehearse(options)
    text = str(err.value)
    assert text.startswith(
        "the twin did not settle within 25s; waiting for everything (--strict-settle):\n"
    )
    assert "  HelmRelease/storage/minio: " in text
    assert f"Pending: {UNSCHEDULABLE} — no node has the label {NAS}" in text


def test_a_device_plugin_on_no_node_leaves_the_consumer_pending() -> None:
    repo = FIXTURES / "no-plugin-node"
    with pytest.raises(TwinStartError) as err:
        rehearse(RehearseOptions(example=None, repo=repo, target=str(repo), settle_timeout=20))
    lines = str(err.value).splitlines()
    assert lines[0] == ("the twin did not settle within 20s; waiting for what the move depends on:")
    (plex,) = [ln for ln in lines if ln.startswith("  HelmRelease/media/plex: ")]
    assert f"Pending: {NO_GPU} — allocatable nvidia.com/gpu is 0 on every node: " in plex
    assert (
        "the device plugin did not start: DaemonSet kube-system/nvidia-device-plugin selects "
        'gpu-type=a100, which no node has; add `labels: {gpu-type: "a100"}` to the '
        "inventory's GPU nodes (--nodes), " + INVENTORY_FIX
    ) in plex


def test_the_inventory_line_it_names_settles_the_twin(tmp_path: Path) -> None:
    # The fix the message gives, applied: the device plugin runs and plex gets its card.
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(
        "nodes:\n- name: gpu-node\n  count: 3\n  gpus:\n  - product: NVIDIA L4\n"
        '  labels: {gpu-type: "a100"}\n',
        encoding="utf-8",
    )
    repo = FIXTURES / "no-plugin-node"
    options = TwinOptions(example=None, repo=repo, nodes=nodes)
    with (
        running_twin(options, workdir=tmp_path, settle=None) as twin,
        kube.connect(kubeconfig=twin.kubeconfig) as client,
    ):
        settled = settle(client, seeds=repo_seeds(repo), timeout=60)
    assert settled.ok, [u.line() for u in settled.blocking]
    assert settled.pods == ()
    assert ("HelmRelease", "media", "plex") in settled.matters
    assert ("HelmRelease", "kube-system", "nvidia-device-plugin") in settled.matters


def test_consumers_no_node_can_take_are_explained(tmp_path: Path) -> None:
    repo = FIXTURES / "unplaceable"
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(DEFAULT_NODES, encoding="utf-8")
    options = TwinOptions(example=None, repo=repo, nodes=nodes)
    with (
        running_twin(options, workdir=tmp_path, settle=None) as twin,
        kube.connect(kubeconfig=twin.kubeconfig) as client,
    ):
        settled = settle(client, seeds=repo_seeds(repo), timeout=20)
    assert not settled.ok
    by_name = {u.key: u for u in settled.blocking}
    assert set(by_name) == {("HelmRelease", "media", "plex"), ("HelmRelease", "media", "tdarr")}
    (plex,) = by_name["HelmRelease", "media", "plex"].pods
    assert f"Pending: {UNSCHEDULABLE} — no node has the label " in plex
    assert (
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 its nodeSelector asks for; give the "
        'inventory\'s nodes that card (`gpus: [{product: "NVIDIA H100 80GB HBM3"}]`, --nodes)'
    ) in plex
    (tdarr,) = by_name["HelmRelease", "media", "tdarr"].pods
    assert f"Pending: {NO_TUN} — no node offers kernel.org/tun" in tdarr
    assert 'add `resources: {kernel.org/tun: "1000"}` to the inventory\'s nodes' in tdarr
    # Both are GPU consumers: their pods are the ones the settle explains.
    assert sorted(p.split(" Pending")[0].rsplit("-", 2)[0] for p in settled.pods) == [
        "pod media/plex",
        "pod media/tdarr",
    ]


def test_a_root_that_cannot_apply_the_gpu_stack_is_what_the_settle_names() -> None:
    # root-waits: the older templates' root (kubernetes/flux/apps.yaml) on its own
    # GitRepository, home-kubernetes, substituting a cluster-settings ConfigMap nothing makes.
    repo = FIXTURES / "root-waits"
    with pytest.raises(TwinStartError) as err:
        rehearse(RehearseOptions(example=None, repo=repo, target=str(repo), settle_timeout=15))
    lines = str(err.value).splitlines()
    assert lines[1:] == [
        "  Kustomization/flux-system/cluster-apps: substitute from "
        "'ConfigMap/flux-system/cluster-settings' error: configmaps \"cluster-settings\" not found",
        "  HelmRelease/kube-system/nvidia-device-plugin: not applied yet",
        "  HelmRelease/media/plex: not applied yet",
        "  and 2 more",
    ]
