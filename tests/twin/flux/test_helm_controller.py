"""helm-controller behaviours on a small hand-written repository (no cluster agents)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.twin.flux.conftest import ready_condition, wait_for

from gpushift._kinds import by_kind
from gpushift_twin import Store, new_store
from gpushift_twin.cluster import VirtualClock
from gpushift_twin.flux import Flux, bootstrap

# A chart the twin does not model: installed with no workload objects, so Ready at once.
RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: default}
spec:
  interval: 30m
  chart:
    spec:
      chart: podinfo
      version: 6.7.1
      sourceRef: {kind: HelmRepository, name: podinfo, namespace: flux-system}
  values:
    replicaCount: 1
"""


@pytest.fixture
def flux(tmp_path: Path) -> Iterator[Store]:
    store = new_store()
    clock = VirtualClock(time_scale=200.0)
    store.clock = clock.now
    runner = Flux(store, clock=clock).start()
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "hr.yaml").write_text(RELEASE)
    bootstrap(store, directory=repo, path="./app")
    try:
        yield store
    finally:
        runner.stop()


def _hr(store: Store) -> dict[str, Any]:
    found = store.list(by_kind("HelmRelease"), namespace="default").objects
    return dict(found[0]) if found else {}


def test_a_new_generation_with_the_same_chart_and_values_is_observed(flux: Store) -> None:
    store = flux
    wait_for(lambda: ready_condition(_hr(store)).get("status") == "True", what="the install")
    assert _hr(store)["status"]["observedGeneration"] == 1
    # A spec change that leaves the chart and values alone (the interval): helm-controller
    # finds nothing to upgrade, and still records that it saw the generation.
    store.update(
        by_kind("HelmRelease"),
        name="web",
        namespace="default",
        mutate=lambda o: {**o, "spec": {**o["spec"], "interval": "10m"}},
        manager="kubectl-edit",
    )
    assert _hr(store)["metadata"]["generation"] == 2
    hr = wait_for(
        lambda: (h := _hr(store))["status"].get("observedGeneration") == 2 and h,
        what="observedGeneration 2",
    )
    ready = ready_condition(hr)
    assert ready["status"] == "True"
    assert ready["observedGeneration"] == 2
    assert ready["reason"] == "InstallSucceeded"  # no upgrade happened
    assert [h["version"] for h in hr["status"]["history"]] == [1]
