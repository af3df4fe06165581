"""Benchmark the cluster twin's agents: time until every pod of a large rollout is Running.

A twin of N nodes with 4 NVIDIA L4s each gets the device plugin (time-slicing, 5 replicas)
and, once every node advertises ``nvidia.com/gpu: 20``, a Deployment of 5 GPU pods per card
(N × 20 pods). The figure is the wall time from creating the Deployment until all its pods
are Running, at ``--time-scale 100`` (pod start delay 2 s of cluster time). The agents run
in-process, as under ``gpushift twin serve``; objects are written to the store directly.

Run: ``python -m bench.twin_cluster`` (``--quick`` for 50 and 100 nodes). Sizes are measured
side by side in one run; targets: 500 nodes / 10,000 pods in at most 20 s, and at most 2.1x
the time for twice the nodes and pods.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

TARGET_S = 20.0
TARGET_GROWTH = 2.1

DEVICE_PLUGIN = {
    "metadata": {"name": "nvidia-device-plugin", "namespace": "kube-system"},
    "spec": {
        "selector": {"matchLabels": {"app": "nvidia-device-plugin"}},
        "template": {
            "metadata": {"labels": {"app": "nvidia-device-plugin"}},
            "spec": {
                "containers": [
                    {
                        "name": "nvidia-device-plugin-ctr",
                        "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1",
                        "command": ["nvidia-device-plugin"],
                        "env": [{"name": "CONFIG_FILE", "value": "/config/config.yaml"}],
                    }
                ],
                "volumes": [{"name": "config", "configMap": {"name": "time-slicing"}}],
            },
        },
    },
}
CONFIG = (
    "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
    "    - name: nvidia.com/gpu\n      replicas: 5\n"
)


def _wait(what: str, probe: object, timeout: float) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if probe():  # type: ignore[operator]
            return time.perf_counter() - start
        time.sleep(0.25)
    raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")


def run(nodes: int, *, time_scale: float = 100.0) -> dict[str, float]:
    """Build the twin, roll out N × 20 GPU pods; returns the timings (seconds)."""
    from gpushift._kinds import by_kind
    from gpushift_twin import new_store
    from gpushift_twin.apiserver import Event
    from gpushift_twin.cluster import Cluster, uniform

    pod_kind, node_kind = by_kind("Pod"), by_kind("Node")
    store = new_store(seed=1)
    pods_wanted = nodes * 20
    t0 = time.perf_counter()
    cluster = Cluster(store, uniform(nodes=nodes, gpus=4), time_scale=time_scale)
    with cluster:
        store.create(
            by_kind("ConfigMap"),
            {
                "metadata": {"name": "time-slicing", "namespace": "kube-system"},
                "data": {"config.yaml": CONFIG},
            },
        )
        store.create(by_kind("DaemonSet"), DEVICE_PLUGIN)

        def registered() -> bool:
            return all(
                (n.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu") == "20"
                for n in store.list(node_kind).objects
            )

        register_s = _wait("registration", registered, 600)
        # Running pods are counted from a watch: listing 20,000 pods four times a second
        # would cost the agents' thread the GIL and grow with the time it measures.
        running: set[str] = set()

        def seen(event: Event) -> None:
            uid = event.obj["metadata"]["uid"]
            if event.type != "DELETED" and (event.obj.get("status") or {}).get("phase") == (
                "Running"
            ):
                running.add(uid)
            else:
                running.discard(uid)

        watch = store.watch(
            pod_kind,
            deliver=seen,
            namespace="default",
            resource_version=str(store.resource_version),
        )
        passes0 = cluster.passes
        cpu0 = time.process_time()
        store.create(
            by_kind("Deployment"),
            {
                "metadata": {"name": "inference", "namespace": "default"},
                "spec": {
                    "replicas": pods_wanted,
                    "selector": {"matchLabels": {"app": "inference"}},
                    "template": {
                        "metadata": {"labels": {"app": "inference"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "app",
                                    "image": "ghcr.io/example/inference:1",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                }
                            ]
                        },
                    },
                },
            },
        )

        rollout_s = _wait("all pods Running", lambda: len(running) == pods_wanted, 900)
        cpu_s = time.process_time() - cpu0
        passes = cluster.passes - passes0
        watch.cancel()
    total = time.perf_counter() - t0
    return {
        "nodes": nodes,
        "pods": pods_wanted,
        "register_s": register_s,
        "rollout_s": rollout_s,
        "cpu_s": cpu_s,
        "passes": passes,
        "total_s": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 and 100 nodes")
    args = parser.parse_args()
    sizes = (50, 100) if args.quick else (500, 1000)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.1f} at start", flush=True)
    results = []
    for n in sizes:
        gc.collect()
        r = run(n)
        results.append(r)
        print(
            f"{r['nodes']:>5} nodes {r['pods']:>6} pods: all Running {r['rollout_s']:6.1f} s "
            f"after the rollout ({r['cpu_s']:.1f} s CPU, {r['passes']:.0f} passes); plugin "
            "registered in "
            f"{r['register_s']:.1f} s; {r['total_s']:.1f} s in all",
            flush=True,
        )
    small, big = results
    print(
        f"growth {big['nodes'] / small['nodes']:.0f}x nodes and pods -> "
        f"{big['rollout_s'] / small['rollout_s']:.2f}x rollout time, "
        f"{big['cpu_s'] / small['cpu_s']:.2f}x CPU"
    )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    if not args.quick:
        verdict = "meets" if small["rollout_s"] <= TARGET_S else "misses"
        print(f"target: 500 nodes / 10,000 pods in <= {TARGET_S:.0f} s: {verdict}")
        growth = big["rollout_s"] / small["rollout_s"]
        verdict = "meets" if growth <= TARGET_GROWTH else "misses"
        print(f"target: growth <= {TARGET_GROWTH}x per doubling: {verdict}")


if __name__ == "__main__":
    main()
