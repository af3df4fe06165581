"""``--repo`` on a real (partial) Flux repository: LukeEvansTech/talos-cluster, read in place."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.twin.flux.conftest import ready_condition, wait_for

from gpushift_twin.cluster import from_text, run_cluster
from gpushift_twin.flux import not_ready, start_flux

REPO = Path(__file__).resolve().parents[4] / "shared/fixtures/repos/LukeEvansTech__talos-cluster"
NODES = """
nodes:
- {name: k8s-1, cpu: "16", memory: 64Gi, gpus: [{product: NVIDIA L4}]}
- {name: k8s-2, cpu: "16", memory: 64Gi, gpus: [{product: NVIDIA L4}]}
- {name: k8s-3, cpu: "16", memory: 64Gi, gpus: [{product: NVIDIA L4}]}
"""
MEDIA = {"dispatcharr", "jellyfin", "pinchflat", "plex", "tdarr"}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[object, object]]:
    if not REPO.is_dir():
        pytest.skip("fixture repository not present")
    variables = tmp_path / "vars.yaml"
    variables.write_text("TIMEZONE: Europe/London\nSECRET_DOMAIN: example.org\n")
    with run_cluster(from_text(NODES), time_scale=200.0) as (twin, cluster):
        flux = start_flux(
            twin.store, cluster.clock, repo=REPO, example=None, root=None, vars_file=variables
        )
        flux.start()
        try:
            yield twin, cluster
        finally:
            flux.stop()


def test_repo_runs_on_three_l4_nodes(env: tuple[object, object]) -> None:
    from gpushift import kube
    from gpushift._kinds import by_kind

    twin, _cluster = env
    store = twin.store  # type: ignore[attr-defined]

    def settled() -> bool:
        with kube.connect(kubeconfig=twin.kubeconfig) as c:  # type: ignore[attr-defined]
            if not_ready(c):
                return False
        pods = store.list(by_kind("Pod"), namespace="media").objects
        running = {
            p["metadata"]["labels"].get("app.kubernetes.io/name")
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
        }
        # The InferenceService's pod comes last: Flux is Ready once the InferenceService is
        # applied, and the Deployment llmkube makes of it still has a pod to schedule and start.
        llm = _llm_pods(store)
        return (
            running >= MEDIA
            and bool(llm)
            and all((p.get("status") or {}).get("phase") == "Running" for p in llm)
        )

    wait_for(settled, timeout=90, what="the repository to settle")
    nodes = store.list(by_kind("Node")).objects
    # time-slicing-config key any: replicas 5 per L4.
    assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes] == ["5", "5", "5"]
    for name in ("gpu-operator",):
        ks = store.get(by_kind("Kustomization"), name=name, namespace="gpu-operator")
        assert ready_condition(ks)["reason"] == "ReconciliationSucceeded"
    # ${TIMEZONE} came from --vars; ${SECRET_STORAGE_SERVER:-localhost} from its default.
    plex = store.get(by_kind("Deployment"), name="plex", namespace="media")
    env_vars = {
        e["name"]: e.get("value") for e in plex["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env_vars["TZ"] == "Europe/London"
    assert env_vars["PLEX_NO_AUTH_NETWORKS"] == "0.0.0.0/0,0.0.0.0/0"
    llm = _llm_pods(store)
    assert llm and all(p["status"].get("phase") == "Running" for p in llm)


def _llm_pods(store: Any) -> list[dict[str, Any]]:
    """The llama-server pods of the repository's llmkube InferenceService."""
    from gpushift._kinds import by_kind

    return [
        p
        for p in store.list(by_kind("Pod"), namespace="ai").objects
        if p["metadata"]["name"].startswith("qwen")
        or "llama" in p["metadata"]["name"]
        or p["spec"]["containers"][0]["name"] == "llama-server"
    ]
