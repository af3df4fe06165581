"""Benchmark ``gpushift simulate`` end to end at two cluster sizes, in one run.

A synthetic cluster: N nodes with 8 GPUs each, published by the NVIDIA DRA driver with
``consumableShares: 5``, and pods with one claim each (from a ResourceClaimTemplate). The pods
fill every share (40 per node) and 5 % more cannot fit. Each size is written as one JSON List
and the whole command runs in a fresh interpreter, as a user would run it.

Run: ``python -m bench.simulate`` (sizes: ``--sizes 1000,2000``; ``--profile`` prints a
cProfile of the smaller size in-process). ``--floor`` also times, in turn with the command on
the same file, the floor of the work: a fresh interpreter that ``json.load``s the input and
writes ``json.dumps`` of an output of the same size, and prints the command's ratio to it.
``--baseline SRC`` also runs another tree's command (``PYTHONPATH=SRC``, e.g. a worktree of the
commit before a change) in the same rounds, right before this tree's, and prints its figures
and the ratio between the two.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gpushift.engine import GpuInfo, nvidia_device_classes, nvidia_resource_slice

GPUS_PER_NODE = 8
SHARES = 5
EXTRA = 0.05
NAMESPACE = "bench"


def cluster(nodes: int) -> tuple[dict[str, Any], int]:
    """A List of every object for ``nodes`` nodes, and the number of pods in it."""
    items: list[dict[str, Any]] = []
    for n in range(nodes):
        name = f"node-{n:05d}"
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true"},
                },
                "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110"}},
            }
        )
        gpus = [
            GpuInfo(
                minor=i,
                uuid=f"GPU-{n:08x}-0000-0000-0000-{i:012x}",
                product_name="NVIDIA H100 80GB HBM3",
                memory_bytes=80 * 2**30,
                architecture="Hopper",
                cuda_compute_capability="9.0",
            )
            for i in range(GPUS_PER_NODE)
        ]
        items.append(dict(nvidia_resource_slice(node_name=name, gpus=gpus, sharing=SHARES)))
    items.extend(dict(c) for c in nvidia_device_classes())
    items.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                }
            },
        }
    )
    fit = nodes * GPUS_PER_NODE * SHARES
    pods = fit + int(fit * EXTRA)
    for p in range(pods):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"worker-{p:06d}", "namespace": NAMESPACE},
                "spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items}, pods


def run_command(path: Path, src: str | None = None) -> tuple[float, float, int]:
    """Wall and CPU seconds of ``gpushift simulate PATH`` in a new interpreter, and its exit
    code; with ``src``, the ``gpushift`` package found there. CPU time (user + system of the
    child) is steadier on a shared machine."""
    env = None
    if src is not None:
        env = {**os.environ, "PYTHONPATH": src}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gpushift", "simulate", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        env=env,
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"simulate failed ({done.returncode}): {done.stderr}")
    return elapsed, cpu, done.returncode


#: The floor: read the input as JSON and write a JSON text of the same size, nothing else.
_FLOOR = (
    "import json, sys\n"
    "with open(sys.argv[1], encoding='utf-8') as f:\n"
    "    doc = json.load(f)\n"
    "sys.stdout.write(json.dumps(doc))\n"
)


def run_floor(path: Path) -> tuple[float, float]:
    """Wall and CPU seconds of the floor (see ``_FLOOR``) on ``path`` in a new interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _FLOOR, str(path)], stdout=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def profile(path: Path) -> None:
    """cProfile of one in-process run (top functions by cumulative and own time)."""
    import cProfile
    import pstats

    from gpushift.engine import human, load_inputs, simulate

    prof = cProfile.Profile()
    prof.enable()
    human(simulate(load_inputs([path])))
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(15)


def rss(sizes: list[int]) -> int:
    """Run the command once per size, smallest first, and print each run's peak RSS (the
    children's ru_maxrss is the largest child so far, so ascending sizes read one each)."""
    with tempfile.TemporaryDirectory() as tmp:
        for nodes in sizes:
            doc, pods = cluster(nodes)
            path = Path(tmp) / f"cluster-{nodes}.json"
            path.write_text(json.dumps(doc))
            del doc
            wall, cpu, code = run_command(path)
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
            print(
                f"{nodes:>6} nodes  {pods:>7} pods  wall {wall:6.2f} s  cpu {cpu:6.2f} s  "
                f"peak RSS {peak / 2**30:.2f} GiB  exit {code}"
            )
            path.unlink()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Generate every size, then time the whole command on each size in turn, ``--rounds``
    times interleaved; print the best wall and CPU time per size, pods/s and the ratios."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000", help="node counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved runs per size")
    parser.add_argument("--profile", action="store_true", help="profile the first size")
    parser.add_argument(
        "--floor", action="store_true", help="time the JSON read+write floor beside the command"
    )
    parser.add_argument(
        "--rss", action="store_true", help="one run per size, ascending: print peak RSS"
    )
    parser.add_argument(
        "--baseline", metavar="SRC", help="also time the gpushift package under SRC, same rounds"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.rss:
        return rss(sorted(sizes))
    with tempfile.TemporaryDirectory() as tmp:
        paths: list[tuple[int, int, Path]] = []
        for nodes in sizes:
            doc, pods = cluster(nodes)
            path = Path(tmp) / f"cluster-{nodes}.json"
            path.write_text(json.dumps(doc))
            del doc
            if args.profile:
                profile(path)
                return 0
            paths.append((nodes, pods, path))
        best: dict[int, tuple[float, float, int]] = {}
        floor: dict[int, tuple[float, float]] = {}
        ratios: dict[int, list[float]] = {}
        base: dict[int, tuple[float, float]] = {}
        base_ratios: dict[int, list[float]] = {}
        base_floor: dict[int, list[float]] = {}
        for _ in range(args.rounds):
            for nodes, _pods, path in paths:
                if args.baseline:
                    bw, bc, _ = run_command(path, args.baseline)
                    oldb = base.get(nodes)
                    base[nodes] = (min(bw, oldb[0]), min(bc, oldb[1])) if oldb else (bw, bc)
                wall, cpu, code = run_command(path)
                if args.baseline:
                    base_ratios.setdefault(nodes, []).append(cpu / bc)
                old = best.get(nodes)
                best[nodes] = (
                    (min(wall, old[0]), min(cpu, old[1]), code) if old else (wall, cpu, code)
                )
                if args.floor:
                    # Right after the command on the same file, so both see the same load.
                    fw, fc = run_floor(path)
                    oldf = floor.get(nodes)
                    floor[nodes] = (min(fw, oldf[0]), min(fc, oldf[1])) if oldf else (fw, fc)
                    ratios.setdefault(nodes, []).append(cpu / fc)
                    if args.baseline:
                        base_floor.setdefault(nodes, []).append(bc / fc)
    for nodes, pods, _ in paths:
        wall, cpu, code = best[nodes]
        print(
            f"{nodes:>6} nodes  {pods:>7} pods  wall {wall:6.2f} s  cpu {cpu:6.2f} s  "
            f"{pods / wall:6.0f} pods/s  exit {code}"
        )
        if args.floor:
            fw, fc = floor[nodes]
            pair = statistics.median(ratios[nodes])
            print(
                f"{'':>6} floor        wall {fw:6.2f} s  cpu {fc:6.2f} s  "
                f"command/floor: wall {wall / fw:.2f}x, cpu {cpu / fc:.2f}x "
                f"(median of pairs, cpu {pair:.2f}x)"
            )
        if args.baseline:
            bw, bc = base[nodes]
            line = (
                f"{'':>6} baseline     wall {bw:6.2f} s  cpu {bc:6.2f} s  "
                f"this/baseline: wall {wall / bw:.2f}x, cpu {cpu / bc:.2f}x "
                f"(median of pairs {statistics.median(base_ratios[nodes]):.2f}x)"
            )
            if args.floor:
                fw, fc = floor[nodes]
                line += (
                    f"; baseline/floor cpu {bc / fc:.2f}x "
                    f"(median of pairs {statistics.median(base_floor[nodes]):.2f}x)"
                )
            print(line)
    if len(paths) >= 2:
        a, b = best[paths[0][0]], best[paths[-1][0]]
        print(
            f"ratio {paths[-1][0]}/{paths[0][0]} nodes: wall {b[0] / a[0]:.2f}x, "
            f"cpu {b[1] / a[1]:.2f}x"
        )
        if args.baseline:
            c, d = base[paths[0][0]], base[paths[-1][0]]
            print(
                f"baseline ratio {paths[-1][0]}/{paths[0][0]} nodes: wall {d[0] / c[0]:.2f}x, "
                f"cpu {d[1] / c[1]:.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
