"""The homelab example and ``--compare``, with placements worked out by hand.

Queue: the six media pods have priority 0 and no creation time, so they go in input order;
the model (PriorityClass gpu-preemptible, -100) goes last. The media pods spread by hostname
(ScheduleAnyway over gpu-workload pods, weight 2, normalised to 0 or 100), so the first three
take k8s-1, k8s-2, k8s-3 (ties by name). Pods 4-6 go where the spread and then cpu/memory
(LeastAllocated + BalancedAllocation, limits standing in for missing requests) are best.
BalancedAllocation is v1.37's: 50 + (50 + balance with the pod - balance without it) / 2.
pinchflat k8s-1 (97 + 74 = 171 vs 95 + 75 = 170 on k8s-3), dispatcharr k8s-3, whisper k8s-2,
and the model k8s-1: LeastAllocated 80 (cpu 610m: 96, memory 23Gi: 64) and balance 98 → 83,
so 50 + 35 // 2 = 67, in all 147; on k8s-3 78 + 68 = 146 (balance 99 → 86).
"""

from __future__ import annotations

from gpushift.engine import COMPARE, from_objects, homelab, setup, simulate
from gpushift.engine._compare import compare

SHARES_PLACEMENT = {
    "media/jellyfin": "k8s-1",
    "media/plex": "k8s-2",
    "media/tdarr": "k8s-3",
    "media/pinchflat": "k8s-1",
    "media/dispatcharr": "k8s-3",
    "media/whisper": "k8s-2",
    "ai/llama-nvidia": "k8s-1",
}

NO_ROOM = (
    "0/3 nodes are available: 3 cannot allocate all claims. "
    "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)


def app(pod_key: str) -> str:
    ns, name = pod_key.split("/")
    return f"{ns}/{name.rsplit('-', 2)[0]}"


def placements(allocator: str, sharing: str) -> dict[str, str | None]:
    sim = simulate(from_objects(homelab(setup(allocator=allocator, sharing=sharing))))
    return {app(p.key): (p.node.name if p.node else None) for p in sim.outcome.pods}


def test_everything_fits_with_five_way_sharing() -> None:
    # 3 cards x 5 replicas/shares = 15 >= 7 GPU pods; unlimited has no share limit.
    for allocator, sharing in (("device-plugin", "5"), ("dra", "5"), ("dra", "unlimited")):
        assert placements(allocator, sharing) == SHARES_PLACEMENT


def test_memory_mode_takes_whole_cards_and_leaves_the_model_pending() -> None:
    # consumableShares=memory: a claim without capacity.requests.memory consumes the memory
    # default, the whole 23034Mi card. Three cards, three claims: the first three media pods.
    sim = simulate(from_objects(homelab(setup(allocator="dra", sharing="memory"))))
    placed = {app(p.key): (p.node.name if p.node else None) for p in sim.outcome.pods}
    assert placed == {
        "media/jellyfin": "k8s-1",
        "media/plex": "k8s-2",
        "media/tdarr": "k8s-3",
        "media/pinchflat": None,
        "media/dispatcharr": None,
        "media/whisper": None,
        "ai/llama-nvidia": None,
    }
    assert {p.message for p in sim.pending} == {NO_ROOM}
    for claim in sim.outcome.claims:
        results = (
            (claim.get("status") or {}).get("allocation", {}).get("devices", {}).get("results")
        )
        if results:
            assert results[0]["consumedCapacity"] == {"memory": "23034Mi"}
    assert sim.hazards == []


def test_exclusive_dra_gives_one_pod_per_card() -> None:
    placed = placements("dra", "exclusive")
    assert sum(v is not None for v in placed.values()) == 3


def test_model_is_bridged_under_dra() -> None:
    # The llmkube pod only has limits nvidia.com/gpu: 1; no node advertises it, so the
    # gpu.nvidia.com class (extendedResourceName nvidia.com/gpu) serves it through DRA.
    # Its sorted request names are [cpu, memory, nvidia.com/gpu]: the GPU is index 2.
    sim = simulate(from_objects(homelab(setup(allocator="dra", sharing="5"))))
    model = next(p for p in sim.outcome.pods if p.namespace == "ai")
    assert model.bridge is not None
    status = model.obj["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [
        {
            "containerName": "llama-server",
            "resourceName": "nvidia.com/gpu",
            "requestName": "container-0-request-2",
        }
    ]


def test_compare_shows_four_setups_and_the_memory_analysis() -> None:
    text, sims = compare()
    assert [s.label for s in COMPARE] == ["time-slicing 5", "shares 5", "memory", "unlimited"]
    header = text.splitlines()[0].split()
    assert header[1:] == ["TIME-SLICING", "5", "SHARES", "5", "MEMORY", "UNLIMITED"]
    assert [len(s.pending) for s in sims] == [0, 0, 4, 0]
    assert "memory: 4 pod(s) Pending." in text
    assert "which is the whole card" in text
    memory_note = text.split("memory: 4 pod(s) Pending.")[1]
    assert "So the model ai/llama-nvidia-" in memory_note
    # One line per card, each held whole by the media pod placed there first.
    for node, app in (("k8s-1", "jellyfin"), ("k8s-2", "plex"), ("k8s-3", "tdarr")):
        assert f"{node}/gpu-0 held by media/{app}-" in memory_note
    assert memory_note.count("memory 23034Mi, none requested") == 3
