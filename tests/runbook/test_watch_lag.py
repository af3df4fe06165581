"""One watch lagging behind the others, as under a loaded API server: the runbook's watch cache
then shows an object as it was before this run changed it. A change that sets a field back
(the barrier taint the merge step put on every GPU node, lifted by new-allocator-up) must not be
taken as already made because the lagging cache shows the old value: the new allocator's
agents would never start.

The homelab twin holds every Node event back for 8 seconds, longer than the way back takes
from the merge to new-allocator-up at time-scale 200: the ResourceSlices' watch, which
old-allocator-gone waits on, is not late.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.runbook.conftest import Env, homelab

from gpushift_twin import FaultConfig

pytestmark = [pytest.mark.slow(seconds=30)]


def _taints(env: Env) -> dict[str, list[str]]:
    return {
        n["metadata"]["name"]: [t["key"] for t in (n.get("spec") or {}).get("taints") or []]
        for n in env.objects("Node")
    }


def test_a_lagging_watch_does_not_hide_the_changes_that_set_a_field_back(tmp_path: Path) -> None:
    with homelab(tmp_path) as env:
        code, events, err = env.cutover(
            "cutover", "--to", "dra", "--merge", env.merge(env.dra), "--step-timeout", "60s"
        )
        assert code == 0, (err[-2000:], events[-1])

        # Back with Node events 8 s late: new-allocator-up lifts the barrier the merge step
        # put on every node, while the cache shows the nodes untainted, as before the merge.
        env.twin.faults.config = FaultConfig(watch_lag=(("nodes", 8.0),))
        code, events, err = env.cutover(
            "rollback", "--merge", env.merge(env.plugin), "--step-timeout", "60s", timeout=300
        )
        assert code == 0, (err[-2000:], events[-1])
        env.twin.faults.config = FaultConfig()
        assert _taints(env) == {"k8s-1": [], "k8s-2": [], "k8s-3": []}
        assert env.allocatable() == {"k8s-1": "5", "k8s-2": "5", "k8s-3": "5"}
        assert env.violations() == []
