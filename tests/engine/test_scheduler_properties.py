"""Properties of the scheduler loop on random clusters of device-plugin nodes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpushift.engine import from_objects, simulate

nodes_st = st.lists(
    st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(1, 4)),  # gpu, cpu, pods
    min_size=1,
    max_size=4,
)
pods_st = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(-1, 1)),  # gpu, cpu, priority
    max_size=12,
)


def build(nodes: list[tuple[int, int, int]], pods: list[tuple[int, int, int]]) -> list[Any]:
    objs: list[Any] = []
    for i, (gpu, cpu, max_pods) in enumerate(nodes):
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"n{i}"},
                "status": {"allocatable": {"nvidia.com/gpu": gpu, "cpu": cpu, "pods": max_pods}},
            }
        )
    for i, (gpu, cpu, prio) in enumerate(pods):
        res: dict[str, Any] = {"requests": {"cpu": cpu}}
        if gpu:
            res["limits"] = {"nvidia.com/gpu": gpu}
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}"},
                "spec": {"priority": prio, "containers": [{"name": "c", "resources": res}]},
            }
        )
    return objs


@settings(max_examples=60, deadline=None)
@given(nodes=nodes_st, pods=pods_st)
def test_no_node_is_overcommitted_and_no_pod_is_left_out_while_room_remains(
    nodes: list[tuple[int, int, int]], pods: list[tuple[int, int, int]]
) -> None:
    sim = simulate(from_objects(build(nodes, pods)))
    free: dict[str, list[int]] = {}
    for node in sim.outcome.nodes:
        gpu, cpu, max_pods = nodes[int(node.name[1:])]
        bound = [pods[int(p.name[1:])] for p in node.pods]
        used_gpu = sum(g for g, _, _ in bound)
        used_cpu = sum(c for _, c, _ in bound)
        assert used_gpu <= gpu and used_cpu <= cpu and len(bound) <= max_pods
        # Every unit handed out sits on a card of this node, within its replica count.
        assert sum(len(c.tenants) for c in node.gpu.cards) == used_gpu
        assert all(len(c.tenants) <= c.units for c in node.gpu.cards)
        free[node.name] = [gpu - used_gpu, cpu - used_cpu, max_pods - len(bound)]
    for p in sim.pending:
        gpu, cpu, _ = pods[int(p.name[1:])]
        # Use only grows, so a pod that did not fit when tried does not fit at the end.
        assert not any(g >= gpu and c >= cpu and n >= 1 for g, c, n in free.values())
        assert p.message is not None
        assert p.message.startswith(f"0/{len(nodes)} nodes are available: ")
    assert sim.exit_code == (1 if sim.pending else 0)
