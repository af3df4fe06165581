"""Benchmark ``gpushift cutover``: its wall time against a scripted kubectl cutover, and the
API requests it makes as the cluster grows.

Run: ``python -m bench.cutover`` (``--part time`` or ``--part requests`` for one half).

- **time.** The move to DRA on the homelab twin at ``--time-scale 100``: ``gpushift cutover
  --to dra --yes`` on one fresh twin, ``bench/kubectl_cutover.sh`` (kubectl polling every
  0.5 s, docs/twin.md's runbook) on another, in the same run. The ratio is gpushift's wall time
  over kubectl's (target ≤ 1.0). Twin start and settle are not timed.
- **requests.** The move on twins of N nodes (one L4 each, time-slicing 5) and C consumers
  (plain Deployments across 10 namespaces, each under its own Flux Kustomization), counted
  from the twin's access log (``twin serve --access-log``: one line per request) between the
  cutover's start and its last request, by resource. The sizes (default ``200x1000``,
  ``200x500``, ``100x500``) separate the two factors: requests must follow consumers (and the
  kinds read), not nodes × polls.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from gpushift_twin.rehearse import TwinOptions, gpushift_argv, running_twin

HERE = Path(__file__).parent
SCRIPT = HERE / "kubectl_cutover.sh"
_LOG = re.compile(r" (GET|POST|PUT|PATCH|DELETE) (\S+) (\d{3}) [\d.]+ms$")


def _cutover_argv(kubeconfig: Path, target: Path, journal: Path) -> list[str]:
    merge = shlex.join(
        [*gpushift_argv(), "twin", "git-set", str(target), "--kubeconfig", str(kubeconfig)]
    )
    return [
        *gpushift_argv(),
        "cutover",
        "--to",
        "dra",
        "--kubeconfig",
        str(kubeconfig),
        "--merge",
        merge,
        "--journal",
        str(journal),
        "--yes",
        "-o",
        "json",
    ]


def _run(
    argv: list[str], *, log: Path, env: dict[str, str] | None = None, timeout: float
) -> tuple[float, int]:
    seconds, code, _ = _run_cpu(argv, log=log, env=env, timeout=timeout)
    return seconds, code


def _run_cpu(
    argv: list[str], *, log: Path, env: dict[str, str] | None = None, timeout: float
) -> tuple[float, int, float]:
    """Wall seconds, exit code and the child's CPU seconds (user + sys)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("wb") as out:
        done = subprocess.run(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=timeout, check=False
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - start, done.returncode, cpu


def _steps(log: Path) -> dict[str, float]:
    """Seconds per step from the run's final JSON object (empty when it has none)."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{") and '"CutoverResult"' in line:
            return {s["name"]: s["seconds"] for s in json.loads(line).get("steps") or []}
    return {}


def _journal_sizes(kubeconfig: Path) -> tuple[int, int]:
    """(journal ConfigMaps, bytes of data in the largest) in flux-system after the run."""
    from gpushift import kube
    from gpushift.kube import ResourceRef

    with kube.connect(kubeconfig=kubeconfig) as c:
        sizes = [
            sum(len(str(v).encode()) for v in (cm.get("data") or {}).values())
            for cm in c.list(ResourceRef.named("ConfigMap", "v1"), namespace="flux-system")
            if cm["metadata"]["name"].startswith("gpushift-cutover-journal")
        ]
    return len(sizes), max(sizes, default=0)


def _gpushift_bin(tmp: Path) -> Path:
    """A ``gpushift`` executable for the kubectl script's merge, whatever PATH holds."""
    exe = tmp / "gpushift"
    exe.write_text(f'#!/bin/sh\nexec {shlex.join(gpushift_argv())} "$@"\n', encoding="utf-8")
    exe.chmod(0o755)
    return exe


def part_time(*, time_scale: float, timeout: float) -> None:
    from gpushift.render import write_example

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-cutover-") as tmp_name:
        tmp = Path(tmp_name)
        target = write_example(tmp / "dra", allocator="dra", sharing=5)
        options = TwinOptions(example="homelab", time_scale=time_scale)
        for label in ("gpushift cutover", "kubectl script"):
            work = tmp / label.replace(" ", "-")
            work.mkdir()
            with running_twin(options, workdir=work, settle=600) as twin:
                if label == "gpushift cutover":
                    argv = _cutover_argv(twin.kubeconfig, target, work / "journal.json")
                    env = None
                else:
                    argv = ["bash", str(SCRIPT), str(twin.kubeconfig), str(target)]
                    env = {**os.environ, "GPUSHIFT": str(_gpushift_bin(tmp))}
                seconds, code = _run(argv, log=work / "run.log", env=env, timeout=timeout)
                check = subprocess.run(
                    [
                        *gpushift_argv(),
                        "twin",
                        "check-invariants",
                        "--kubeconfig",
                        str(twin.kubeconfig),
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
            rows.append((label, seconds, code, check.returncode))
            if code != 0:
                tail = (work / "run.log").read_text(errors="replace")[-1500:]
                print(f"{label} exited {code}:\n{tail}", file=sys.stderr)
    print(f"\nmove to DRA on the homelab twin, --time-scale {time_scale:g} (wall seconds)")
    print(f"{'':<18} {'wall s':>8} {'exit':>5} {'violations':>11}")
    for label, seconds, code, check in rows:
        print(f"{label:<18} {seconds:8.1f} {code:5d} {'none' if check == 0 else 'RECORDED':>11}")
    ratio = rows[0][1] / rows[1][1]
    print(f"ratio gpushift / kubectl: {ratio:.2f} (target <= 1.0)")


# --- requests --------------------------------------------------------------------------------


def write_scale_repo(directory: Path, *, nodes: int, consumers: int) -> tuple[Path, Path, Path]:
    """The homelab config with ``nodes`` GPU nodes and ``consumers`` Deployments, rendered for
    time-slicing (the repository) and for DRA (the merge target), plus the inventory."""
    from gpushift._sharing import Allocator, parse_sharing
    from gpushift.render import (
        example_text,
        parse_config,
        render_tree,
        with_overrides,
        write_tree,
    )

    base = yaml.safe_load(example_text("homelab"))
    names = [f"gpu-{i:03d}" for i in range(nodes)]
    base["cluster"]["gpuNodes"]["names"] = names
    base["consumers"] = [
        {
            "namespace": f"team-{i % 10}",
            "name": f"app-{i:04d}",
            "style": "deployment",
            "image": "ghcr.io/example/app:1.0",
        }
        for i in range(consumers)
    ]
    config = parse_config(yaml.safe_dump(base), display=f"bench {nodes}x{consumers}")
    repo = write_tree(render_tree(config), directory / "repo", force=True)
    dra = with_overrides(config, allocator=Allocator("dra"), sharing=parse_sharing("5"))
    target = write_tree(render_tree(dra), directory / "dra", force=True)
    inventory = directory / "nodes.yaml"
    inventory.write_text(
        yaml.safe_dump({"nodes": [{"name": n, "gpus": [{"product": "NVIDIA L4"}]} for n in names]}),
        encoding="utf-8",
    )
    return repo, target, inventory


def resource_of(path: str) -> str:
    """``/apis/apps/v1/namespaces/x/deployments/y/scale`` → ``deployments/scale``."""
    segs = [s for s in path.split("/") if s]
    if not segs or segs[0] not in ("api", "apis"):
        return path
    rest = segs[2:] if segs[0] == "api" else segs[3:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        rest = rest[2:] if len(rest) > 2 else ["namespaces"]
    if not rest:
        return "discovery"
    return rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")


def count_requests(log: Path, *, offset: int) -> collections.Counter[tuple[str, str]]:
    """(method, resource) counts of the access-log lines after byte ``offset``."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    with log.open("rb") as f:
        f.seek(offset)
        for raw in f:
            m = _LOG.search(raw.decode("utf-8", "replace").rstrip())
            if m:
                counts[(m.group(1), resource_of(m.group(2)))] += 1
    return counts


def _quiet(log: Path, *, settle: float = 1.5, bound: float = 15.0) -> None:
    # A watch is logged when its stream ends, just after the client exits: wait for the log to
    # stop growing (bounded).
    deadline = time.monotonic() + bound
    size = -1
    while time.monotonic() < deadline:
        now = log.stat().st_size
        if now == size:
            return
        size = now
        time.sleep(settle)


def part_requests(*, sizes: list[tuple[int, int]], time_scale: float, timeout: float) -> None:
    results = []
    for nodes, consumers in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-cutover-scale-") as tmp_name:
            tmp = Path(tmp_name)
            repo, target, inventory = write_scale_repo(tmp, nodes=nodes, consumers=consumers)
            options = TwinOptions(
                example=None, repo=repo, nodes=inventory, time_scale=time_scale, access_log=True
            )
            # The twin builds Kustomizations with its built-in builder here: a kubectl process
            # per Kustomization would make settling a thousand of them take most of the run.
            env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
            work = tmp / "work"
            work.mkdir()
            started = time.perf_counter()
            with running_twin(options, workdir=work, settle=3600, env=env) as twin:
                settle = time.perf_counter() - started
                offset = twin.stderr.stat().st_size
                argv = _cutover_argv(twin.kubeconfig, target, work / "journal.json")
                seconds, code, cpu = _run_cpu(argv, log=work / "cutover.log", timeout=timeout)
                _quiet(twin.stderr)
                counts = count_requests(twin.stderr, offset=offset)
                objects, largest = _journal_sizes(twin.kubeconfig)
            results.append((nodes, consumers, settle, seconds, code, counts))
            steps = _steps(work / "cutover.log")
            print(
                f"{nodes} nodes x {consumers} consumers: settled in {settle:.0f} s, cutover "
                f"{seconds:.1f} s wall, {cpu:.1f} s CPU (exit {code}), "
                f"{sum(counts.values())} requests; journal {objects} ConfigMaps, the largest "
                f"{largest} bytes; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            print("  steps (s): " + ", ".join(f"{k} {v:.1f}" for k, v in steps.items()))
            if code != 0:
                tail = (work / "cutover.log").read_text(errors="replace")[-1500:]
                print(f"  the cutover exited {code}:\n{tail}", file=sys.stderr)
    print("\nAPI requests of one move to DRA, by resource (method resource: count per size)")
    keys = sorted({k for *_, c in results for k in c}, key=lambda k: (k[1], k[0]))
    head = "".join(f"{f'{n}x{c}':>11}" for n, c, *_ in results)
    print(f"{'':<40}{head}")
    for key in keys:
        cells = "".join(f"{r[5].get(key, 0):>11}" for r in results)
        print(f"{key[0] + ' ' + key[1]:<40}{cells}")
    totals = [sum(r[5].values()) for r in results]
    print(f"{'total':<40}{''.join(f'{t:>11}' for t in totals)}")
    pairs = list(zip(totals, results, strict=True))
    print(f"{'per consumer':<40}{''.join(f'{t / r[1]:>11.2f}' for t, r in pairs)}")
    print(f"{'per node':<40}{''.join(f'{t / r[0]:>11.2f}' for t, r in pairs)}")
    by_shape = {(n, c): t for (n, c, *_), t in zip(results, totals, strict=True)}
    for (n1, c1), (n2, c2) in (((200, 1000), (200, 500)), ((200, 500), (100, 500))):
        if (n1, c1) in by_shape and (n2, c2) in by_shape:
            grow = by_shape[(n1, c1)] / by_shape[(n2, c2)]
            print(f"{n1}x{c1} / {n2}x{c2}: {grow:.2f}x the requests")


def _sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        nodes, _, consumers = part.partition("x")
        out.append((int(nodes), int(consumers)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", choices=("time", "requests", "both"), default="both")
    parser.add_argument("--time-scale", type=float, default=100.0)
    parser.add_argument("--sizes", type=_sizes, default=_sizes("200x1000,200x500,100x500"))
    parser.add_argument("--timeout", type=float, default=1800.0, help="bound per cutover, seconds")
    args = parser.parse_args()
    from gpushift_twin.rehearse import command_available

    if not command_available([*gpushift_argv(), "cutover"]):
        raise SystemExit("bench.cutover: this gpushift has no `cutover` command yet")
    if args.part in ("time", "both"):
        part_time(time_scale=args.time_scale, timeout=args.timeout)
    if args.part in ("requests", "both"):
        part_requests(sizes=args.sizes, time_scale=args.time_scale, timeout=args.timeout)


if __name__ == "__main__":
    main()
