"""The sampler reports what the invariant monitor records: a merge without a drain.

docs/twin.md: merging the DRA tree while the consumers still run makes the DRA driver publish
slices while nodes still advertise nvidia.com/gpu 5, and the monitor records DualAdvertiser,
often DoubleAllocation first (a card with tenants of both ledgers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift import kube
from gpushift.render import write_example
from gpushift_twin.flux import git_set
from gpushift_twin.rehearse import Sampler, TwinOptions, running_twin


def test_a_merge_without_a_drain_is_recorded(tmp_path: Path) -> None:
    target = write_example(tmp_path / "dra", allocator="dra", sharing=5)
    work = tmp_path / "twin"
    work.mkdir()
    options = TwinOptions(example="homelab", time_scale=100)
    with running_twin(options, workdir=work, settle=180) as twin, Sampler(twin.kubeconfig) as s:
        with kube.connect(kubeconfig=twin.kubeconfig) as client:
            git_set(client, str(target))
        seen = s.wait_for(lambda x: x.violations_active > 0, timeout=120)
    if seen is None:
        pytest.fail(f"no violation seen; samples: {s.samples[-3:]}")
    reasons = {v["reason"] for v in s.violations}
    assert reasons and reasons <= {"DualAdvertiser", "DoubleAllocation"}
    assert {v["node"] for v in s.violations} <= {"k8s-1", "k8s-2", "k8s-3"}
