"""Benchmark ``gpushift simulate`` beside kube-scheduler v1.37.2 on the same input, in one run.

A synthetic cluster of N GPU nodes with 4 L4 cards each: half under the device plugin's
time-slicing (5 replicas a card: ``nvidia.com/gpu: 20``), half under the NVIDIA DRA driver
with ``consumableShares: 5``; C is the shares of the DRA half (= the units of the other half).
0.45 C pods have a claim from a template (DRA nodes only) and are created first, then 0.5 C
pods ask for ``nvidia.com/gpu: 1``, served by the device plugin or, bridged, by DRA: whatever
order the pods arrive in and wherever the bridged ones go, every pod fits.

For each size (50 and 200 nodes):

* simulate: the whole command, ``gpushift simulate FILE -o json`` in a new interpreter, median
  of ``--rounds`` runs;
* kube-scheduler: a fresh control plane (``gpushift.upstream.ControlPlane``); every object but
  the pods is written, the controller manager and the scheduler are started, then the pods
  are created by 8 threads. The time is taken on this machine's clock from just before the
  first pod is created to the moment a watch on pods delivers the last binding (a pod's
  ``spec.nodeName``) or Unschedulable condition: the objects' own timestamps have whole seconds
  only. The control plane's start is not in it.
* their ratio, kube-scheduler / simulate.

And the control plane's warm start (``ControlPlane().start()`` until every component is
healthy, binaries in the page cache), median of 3.

Run: ``python -m bench.upstream`` (``--sizes 50,200``, ``--rounds 3``). Needs ``make upstream``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gpushift import crosscheck, kube, upstream
from gpushift.engine import GpuInfo, nvidia_device_classes, nvidia_resource_slice

CARDS = 4
SHARES = 5
NAMESPACE = "bench"


def cluster(nodes: int) -> tuple[list[dict[str, Any]], int, int]:
    """The objects for ``nodes`` nodes, the number of pods, and of those with a claim."""
    items: list[dict[str, Any]] = []
    dra_nodes = nodes // 2
    for n in range(nodes):
        name = f"node-{n:04d}"
        dra = n < dra_nodes
        labels = {"kubernetes.io/hostname": name}
        alloc = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        if not dra:
            labels |= {"nvidia.com/gpu.count": str(CARDS), "nvidia.com/gpu.replicas": str(SHARES)}
            alloc["nvidia.com/gpu"] = str(CARDS * SHARES)
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "status": {"allocatable": alloc},
            }
        )
        if dra:
            gpus = [
                GpuInfo(
                    minor=i,
                    uuid=f"GPU-{n:08x}-0000-0000-0000-{i:012x}",
                    product_name="NVIDIA L4",
                    memory_bytes=23034 * 2**20,
                    architecture="Ada Lovelace",
                    cuda_compute_capability="8.9",
                )
                for i in range(CARDS)
            ]
            items.append(dict(nvidia_resource_slice(node_name=name, gpus=gpus, sharing=SHARES)))
    items.extend(dict(c) for c in nvidia_device_classes())
    request = [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
    items.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": NAMESPACE},
            "spec": {"spec": {"devices": {"requests": request}}},
        }
    )
    shares = dra_nodes * CARDS * SHARES
    claimed = int(shares * 0.45)
    total = claimed + shares // 2
    for p in range(total):
        container: dict[str, Any] = {
            "name": "main",
            "image": "busybox",
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        }
        spec: dict[str, Any] = {"containers": [container]}
        if p < claimed:
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
            container["resources"]["claims"] = [{"name": "gpu"}]
        else:
            container["resources"]["limits"] = {"nvidia.com/gpu": 1}
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"worker-{p:05d}", "namespace": NAMESPACE},
                "spec": spec,
            }
        )
    return items, total, claimed


def time_simulate(path: Path, rounds: int) -> tuple[float, int]:
    """Median wall seconds of ``gpushift simulate PATH -o json`` in a new interpreter, and how
    many pods it left Pending."""
    walls = []
    pending = 0
    for _ in range(rounds):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "gpushift", "simulate", str(path), "-o", "json"],
            capture_output=True,
            text=True,
            check=False,
        )
        walls.append(time.perf_counter() - start)
        if done.returncode not in (0, 1):
            raise SystemExit(f"simulate failed ({done.returncode}): {done.stderr}")
        doc = json.loads(done.stdout)
        pending = sum(
            1 for i in doc["items"] if i["kind"] == "Pod" and not i["spec"].get("nodeName")
        )
    return statistics.median(walls), pending


def _decided(pod: dict[str, Any]) -> bool:
    if (pod.get("spec") or {}).get("nodeName"):
        return True
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def time_upstream(objects: list[dict[str, Any]], pods: int) -> tuple[float, float, int]:
    """Seconds from the first pod created to the last one decided (bound or Unschedulable),
    seconds the creations took, and how many pods stayed Pending; on a fresh control plane."""
    rest = [o for o in objects if o["kind"] != "Pod"]
    bodies = [o for o in objects if o["kind"] == "Pod"]
    with upstream.ControlPlane(
        controllers=crosscheck.CONTROLLERS, controller_manager=False, scheduler=False
    ) as plane:
        assert plane.kubeconfig is not None
        client = kube.connect(kubeconfig=plane.kubeconfig)
        crosscheck.write(client, crosscheck.plan(rest), rest)
        plane.start_controller_manager()
        plane.start_scheduler()
        bound: dict[str, float] = {}
        unschedulable: dict[str, float] = {}
        seen = [time.perf_counter()]
        ref = kube.ResourceRef.named("Pod")

        def watch() -> None:
            try:
                for _kind, pod in client.watch(ref, namespace=NAMESPACE):
                    name, now = str(pod["metadata"]["name"]), time.perf_counter()
                    if pod["spec"].get("nodeName"):
                        if name not in bound:
                            bound[name] = seen[0] = now
                    elif _decided(pod):
                        unschedulable[name] = seen[0] = now
            except kube.KubeError:
                return  # the control plane stopped

        threading.Thread(target=watch, daemon=True).start()
        time.sleep(0.5)  # the watch is open
        writer = kube.connect(kubeconfig=plane.kubeconfig)
        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda b: writer.create(ref, b, namespace=NAMESPACE), bodies))
        created = time.perf_counter() - start
        # Every pod decided, and nothing more for 3 s (a pod found Unschedulable may bind
        # later, when a retry finds room).
        deadline = time.perf_counter() + 1800
        while len(bound.keys() | unschedulable.keys()) < pods or time.perf_counter() - seen[0] < 3:
            if time.perf_counter() > deadline:
                raise SystemExit(f"kube-scheduler decided {len(bound)} of {pods} pods in 30 min")
            time.sleep(0.1)
        ends = [*bound.values(), *(t for n, t in unschedulable.items() if n not in bound)]
        last = max(ends)
        pending = pods - len(bound)
        return last - start, created, pending


def warm_start(times: int = 3) -> float:
    """Median seconds of ``ControlPlane().start()`` until every component is healthy, after
    one start that warms the page cache."""
    walls = []
    for i in range(times + 1):
        plane = upstream.ControlPlane()
        start = time.perf_counter()
        plane.start()
        wall = time.perf_counter() - start
        plane.stop()
        if i:
            walls.append(wall)
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    """Time both on each size and print the figures and their ratio."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="50,200", help="GPU node counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="simulate runs per size (median)")
    args = parser.parse_args(argv)
    try:
        upstream.ControlPlane.binaries()
    except upstream.NotBuiltError as err:
        print(err, file=sys.stderr)
        return 3
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    start = warm_start()
    print(f"control plane warm start (median of 3): {start:.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in (int(s) for s in args.sizes.split(",")):
            objects, pods, claimed = cluster(nodes)
            path = Path(tmp) / f"cluster-{nodes}.json"
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
            sim, sim_pending = time_simulate(path, args.rounds)
            up, created, up_pending = time_upstream(objects, pods)
            print(
                f"{nodes:>4} nodes  {pods:>5} pods ({claimed} with a template claim)  "
                f"simulate {sim:6.2f} s ({sim_pending} pending)  "
                f"kube-scheduler {up:6.2f} s ({up_pending} pending; creating them took "
                f"{created:.2f} s)  kube-scheduler/simulate {up / sim:.1f}x"
            )
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
