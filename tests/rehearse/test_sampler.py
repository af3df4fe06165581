"""The sampler, the card map and the twin harness against a real ``gpushift twin serve``.

One homelab twin for the module, started the way a rehearsal starts it, with faults on
(5 % injected errors, every watch stream dropped after 2 s), so the watches' resume path is
exercised by every test. The homelab: three nodes with one L4 each, time-slicing replicas 5,
seven GPU consumers (six media apps and one llmkube model), no DRA driver.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushift import kube
from gpushift_twin.rehearse import (
    Sample,
    Sampler,
    TwinOptions,
    TwinProcess,
    read_map,
    running_twin,
)
from gpushift_twin.rehearse._run import rollback_target

NODES = ("k8s-1", "k8s-2", "k8s-3")
DEPLOY = kube.ResourceRef.named("Deployment")


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinProcess]:
    options = TwinOptions(example="homelab", time_scale=100, error_rate=0.05, drop_watch_every=2)
    with running_twin(options, workdir=tmp_path_factory.mktemp("twin"), settle=180) as t:
        yield t


def test_the_twin_runs_on_loopback_with_its_own_kubeconfig(twin: TwinProcess) -> None:
    assert twin.url.startswith("https://127.0.0.1:")
    assert twin.kubeconfig.stat().st_mode & 0o777 == 0o600
    assert twin.process.poll() is None
    # --example homelab writes its repository to a directory it names on stderr
    assert twin.source is not None and (twin.source / "kubernetes" / "apps").is_dir()


def test_the_way_back_is_the_directory_the_twin_started_from(twin: TwinProcess) -> None:
    assert Path(rollback_target(twin.kubeconfig)) == twin.source


def _homelab(sample: Sample, *, pods: int) -> bool:
    return (
        sample.gpu_pods_running == pods
        and sample.allocatable == tuple((n, 5) for n in NODES)
        and sample.slices == tuple((n, 0) for n in NODES)
    )


def test_sampler_follows_a_consumer_down_and_up(twin: TwinProcess) -> None:
    with Sampler(twin.kubeconfig) as sampler, kube.connect(kubeconfig=twin.kubeconfig) as client:
        assert sampler.wait_for(lambda s: _homelab(s, pods=7), timeout=30) is not None
        client.scale(DEPLOY, name="jellyfin", namespace="media", replicas=0)
        down = sampler.wait_for(lambda s: _homelab(s, pods=6), timeout=60)
        assert down is not None
        client.scale(DEPLOY, name="jellyfin", namespace="media", replicas=1)
        up = sampler.wait_for(lambda s: s.t > down.t and _homelab(s, pods=7), timeout=60)
        assert up is not None
        assert sampler.wait_for(lambda s: s.gpu_pods_running == 99, timeout=0.2) is None
    # samples are in time order and the monitor saw nothing
    times = [s.t for s in sampler.samples]
    assert times == sorted(times)
    assert sampler.violations == []
    assert all(s.violations_active == 0 for s in sampler.samples)


def test_card_map_puts_every_consumer_on_a_time_sliced_card(twin: TwinProcess) -> None:
    with Sampler(twin.kubeconfig) as sampler:
        assert sampler.wait_for(lambda s: _homelab(s, pods=7), timeout=60) is not None
    # Under the device plugin the map comes from dcgm-exporter's series, which follow the pods
    # by one scrape: read until every card shows.
    deadline = time.monotonic() + 60
    cards = read_map(twin.kubeconfig)
    while len(cards) < len(NODES) and time.monotonic() < deadline:
        time.sleep(0.5)
        cards = read_map(twin.kubeconfig)
    assert [(c.node, c.index, c.ledger) for c in cards] == [(n, 0, "device plugin") for n in NODES]
    tenants = sorted(
        t.split("/")[0] + "/" + t.split("/")[1].rsplit("-", 2)[0] for c in cards for t in c.tenants
    )
    assert tenants == [
        "ai/llama-nvidia",
        "media/dispatcharr",
        "media/jellyfin",
        "media/pinchflat",
        "media/plex",
        "media/tdarr",
        "media/whisper",
    ]
