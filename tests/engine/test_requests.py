"""Pod requests as kube-scheduler computes them (component-helpers resource.PodRequests)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpushift.engine import pod_non_zero_requests, pod_requests


def c(
    name: str,
    *,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": {}}
    if requests:
        out["resources"]["requests"] = requests
    if limits:
        out["resources"]["limits"] = limits
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def test_a_limit_stands_in_for_a_missing_request() -> None:
    # API defaulting per key: memory has only a limit, so the request becomes 2Gi; cpu keeps
    # its explicit request.
    spec = {
        "containers": [
            c("a", requests={"cpu": "10m"}, limits={"memory": "2Gi", "nvidia.com/gpu": 1})
        ]
    }
    assert pod_requests(spec) == {"cpu": 10, "memory": 2 * 2**30, "nvidia.com/gpu": 1}


def test_classic_init_then_sidecar() -> None:
    # Regular: cpu 100m, gpu 1. Init "setup" (classic): 500m + sidecars so far (none) = 500m.
    # Sidecar: adds 50m and 1 GPU to the regular sum (150m, 2) and to the running sidecar
    # total (50m, 1). Result: max(150m, 500m) = 500m cpu, max(2, 1) = 2 GPUs.
    spec = {
        "initContainers": [
            c("setup", requests={"cpu": "500m"}),
            c("side", requests={"cpu": "50m"}, limits={"nvidia.com/gpu": 1}, sidecar=True),
        ],
        "containers": [c("app", requests={"cpu": "100m"}, limits={"nvidia.com/gpu": 1})],
    }
    assert pod_requests(spec) == {"cpu": 500, "nvidia.com/gpu": 2}


def test_sidecar_then_classic_init_counts_both() -> None:
    # The sidecar starts first and keeps running while "setup" runs: 500m + 50m = 550m, and
    # the sidecar's GPU is held during init (1) and after (1 + 1 = 2).
    spec = {
        "initContainers": [
            c("side", requests={"cpu": "50m"}, limits={"nvidia.com/gpu": 1}, sidecar=True),
            c("setup", requests={"cpu": "500m"}),
        ],
        "containers": [c("app", requests={"cpu": "100m"}, limits={"nvidia.com/gpu": 1})],
    }
    assert pod_requests(spec) == {"cpu": 550, "nvidia.com/gpu": 2}


def test_overhead_is_added() -> None:
    spec = {"containers": [c("a", requests={"cpu": "1"})], "overhead": {"cpu": "250m"}}
    assert pod_requests(spec) == {"cpu": 1250}


def test_non_zero_requests_for_scoring() -> None:
    # Each container without cpu/memory counts 100m and 200Mi for scoring only.
    spec = {"containers": [c("a"), c("b", requests={"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 1000}
    assert pod_non_zero_requests(spec) == {"cpu": 1100, "memory": 400 * 2**20}


_container = st.tuples(st.integers(0, 4), st.booleans())  # cpu (cores), native sidecar


@given(
    regular=st.lists(st.integers(0, 4), min_size=1, max_size=4),
    init=st.lists(_container, max_size=4),
)
def test_requests_cover_every_phase_of_the_pod(
    regular: list[int], init: list[tuple[int, bool]]
) -> None:
    # Whatever the mix, the pod needs at least what runs at once in each phase: the regular
    # containers plus all sidecars, and each classic init container plus the sidecars
    # started before it; and no more than the largest of those.
    spec = {
        "containers": [c(f"r{i}", requests={"cpu": v}) for i, v in enumerate(regular)],
        "initContainers": [
            c(f"i{i}", requests={"cpu": v}, sidecar=side) for i, (v, side) in enumerate(init)
        ],
    }
    got = pod_requests(spec).get("cpu", 0)
    phases = [(sum(regular) + sum(v for v, side in init if side)) * 1000]
    for i, (v, side) in enumerate(init):
        if not side:
            phases.append((v + sum(w for w, s in init[:i] if s)) * 1000)
    assert got == max(phases)
