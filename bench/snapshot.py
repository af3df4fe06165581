"""Benchmark `gpushift snapshot`: requests sent and wall time, at 50 and 500 nodes, one run.

A twin (API server only, objects written to its store directly) holds N GPU nodes with one
L4 each advertising ``nvidia.com/gpu: 5``, GFD labels, a device-plugin, GFD and dcgm-exporter
pod per node (with their DaemonSets) and four GPU pods per node, plus Flux objects. The
snapshot is taken over HTTP with the gpushift.kube client, as the CLI does; the request count
is read from the twin's access log (one record per request), the wall time around the call.

Run: ``python -m bench.snapshot``. Target: the same number of requests at both sizes (one
paginated list per kind); 500 nodes in at most 2 s.
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

TARGET_S = 2.0
Obj = dict[str, Any]


class _Count(logging.Handler):
    """Counts the twin's access-log records."""

    def __init__(self) -> None:
        super().__init__()
        self.records = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.records += 1


def _agent(name: str, image: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "gpu-operator"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": image}]},
            },
        },
    }


_AGENTS = (
    ("nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"),
    ("gpu-feature-discovery", "nvcr.io/nvidia/gpu-feature-discovery:v0.19.3"),
    ("nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"),
)


def _populate(store: Any, nodes: int) -> int:
    from gpushift._kinds import by_kind

    node_k, pod_k, ds_k = by_kind("Node"), by_kind("Pod"), by_kind("DaemonSet")
    running = {"phase": "Running", "containerStatuses": [{"name": "c", "ready": True}]}

    def with_status(status: Obj) -> Any:
        def mutate(cur: Obj) -> Obj:
            return {**cur, "status": status}

        return mutate

    count = 0
    for ns in ("gpu-operator", "media"):
        store.create(by_kind("Namespace"), {"metadata": {"name": ns}})
    for name, image in _AGENTS:
        store.create(ds_k, _agent(name, image))
    for i in range(nodes):
        node = f"gpu-{i:03d}"
        store.create(
            node_k,
            {
                "metadata": {
                    "name": node,
                    "labels": {
                        "nvidia.com/gpu.present": "true",
                        "nvidia.com/gpu.count": "1",
                        "nvidia.com/gpu.product": "NVIDIA-L4-SHARED",
                        "nvidia.com/gpu.replicas": "5",
                        "nvidia.com/gpu.sharing-strategy": "time-slicing",
                    },
                }
            },
        )
        store.update(
            node_k,
            name=node,
            subresource="status",
            mutate=with_status(
                {"capacity": {"nvidia.com/gpu": "5"}, "allocatable": {"nvidia.com/gpu": "5"}}
            ),
        )
        pods: list[Obj] = []
        for name, image in _AGENTS:
            pods.append(
                {
                    "metadata": {"name": f"{name}-{i:03d}", "namespace": "gpu-operator"},
                    "spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]},
                }
            )
        for j in range(4):
            pods.append(
                {
                    "metadata": {"name": f"app-{i:03d}-{j}", "namespace": "media"},
                    "spec": {
                        "nodeName": node,
                        "containers": [
                            {
                                "name": "c",
                                "image": "ghcr.io/example/app:1",
                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                            }
                        ],
                    },
                }
            )
        for pod in pods:
            store.create(pod_k, pod)
            store.update(
                pod_k,
                name=pod["metadata"]["name"],
                namespace=pod["metadata"]["namespace"],
                subresource="status",
                mutate=with_status(running),
            )
            count += 1
    return count


def run(nodes: int) -> dict[str, float]:
    """Populate a twin with ``nodes`` GPU nodes and take one snapshot; returns the figures."""
    from gpushift import kube, verdict
    from gpushift_twin import new_store, run_twin
    from gpushift_twin.flux import install_crds

    store = new_store(seed=1)
    install_crds(store)
    pods = _populate(store, nodes)
    counter = _Count()
    access = logging.getLogger("gpushift_twin")
    access.addHandler(counter)
    access.setLevel(logging.INFO)
    access.propagate = False
    try:
        with (
            run_twin(store=store, access_log=True) as twin,
            kube.connect(kubeconfig=twin.kubeconfig) as client,
        ):
            client.list(kube.ResourceRef.named("Namespace"))  # connection warm-up
            before, served = counter.records, twin.server.requests
            start = time.perf_counter()
            snap = verdict.take_snapshot(client)
            wall = time.perf_counter() - start
            requests = counter.records - before
            assert twin.server.requests - served == requests
    finally:
        access.removeHandler(counter)
    assert len(snap["nodes"]) == nodes and len(snap["pods"]) == nodes * 4
    return {"nodes": nodes, "pods": pods, "requests": requests, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="50,500", help="Node counts, comma-separated.")
    args = parser.parse_args()
    rows = [run(int(n)) for n in args.sizes.split(",")]
    print(f"{'nodes':>6} {'pods':>6} {'requests':>9} {'wall':>8}")
    for r in rows:
        print(f"{r['nodes']:>6} {r['pods']:>6} {r['requests']:>9} {r['wall_s']:>7.3f}s")
    first, last = rows[0], rows[-1]
    grow = last["requests"] / first["requests"]
    slower = last["wall_s"] / first["wall_s"]
    print(
        f"{last['nodes']:g} vs {first['nodes']:g} nodes: requests {grow:.2f}x, wall {slower:.2f}x"
    )
    same = len({r["requests"] for r in rows}) == 1
    ok = same and last["wall_s"] <= TARGET_S
    print(
        f"target: same requests at every size, {last['nodes']:g} nodes <= {TARGET_S:g} s: "
        f"{'met' if ok else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
