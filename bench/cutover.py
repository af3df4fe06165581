"""Benchmark ``gpushift cutover``: its wall time against a scripted kubectl cutover, and the
API requests it makes as the cluster grows.

Run: ``python -m bench.cutover`` (``--part time``, ``requests`` or ``planes`` for one part).

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
- **planes.** The same move on both control planes in one run: the embedded twin at
  ``--time-scale 1`` and ``twin serve --control-plane upstream`` (kube-apiserver,
  kube-controller-manager and kube-scheduler with the twin's agents through the API), for
  each size of ``--plane-sizes`` (default the homelab and a generated ``6x30``). On both, the
  cutover talks to a ``gpushift twin proxy --access-log`` in front of the server, so one
  instrument counts its requests on both; the table gives the wall time, the requests per
  consumer and the ratios upstream / embedded. ``--cutover-src DIR`` runs the cutover (and
  its merge) from another source tree, for a before/after.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
                checked = subprocess.run(
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
            rows.append((label, seconds, code, checked.returncode))
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
                # Flux Ready is not every pod created: a consumer without its pod yet is not
                # found, and its pod starts during the move.
                ready = _workloads_ready(twin.kubeconfig, timeout=1200)
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
                f"{nodes} nodes x {consumers} consumers: settled in {settle:.0f} s "
                f"({ready[0]}/{ready[1]} workloads ready), cutover "
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


# --- both control planes ---------------------------------------------------------------------

_PROXY_BANNER = "gpushift fault proxy serving "


@contextlib.contextmanager
def _counting_proxy(twin: Any, work: Path) -> Iterator[tuple[Path, Path]]:
    """``gpushift twin proxy --access-log`` in front of ``twin`` (no faults): its clients'
    kubeconfig and its log, until the block ends."""
    kubeconfig = work / "proxy.kubeconfig"
    out, err = work / "proxy.stdout", work / "proxy.stderr"
    argv = [
        *gpushift_argv(),
        "twin",
        "proxy",
        "--kubeconfig",
        str(twin.kubeconfig),
        "--kubeconfig-out",
        str(kubeconfig),
        "--port",
        "0",
        "--access-log",
    ]
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = twin.lifetime.spawn(
            "proxy", argv, death_signal=signal.SIGKILL, stdout=fo, stderr=fe, stdin=None
        )
    try:
        deadline = time.monotonic() + 60
        while _PROXY_BANNER not in out.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the proxy did not start: {err.read_text()[-1000:]}")
            time.sleep(0.2)
        yield kubeconfig, err
    finally:
        twin.lifetime.stop(proc)


def _workloads_ready(kubeconfig: Path, *, timeout: float) -> tuple[int, int]:
    """Wait (bounded) until every Deployment and StatefulSet has its replicas ready: the
    consumers run before the move is timed. Returns (ready, workloads)."""
    from gpushift import kube
    from gpushift.kube import ResourceRef

    kinds = [
        ResourceRef.named("Deployment", "apps/v1"),
        ResourceRef.named("StatefulSet", "apps/v1"),
    ]
    deadline = time.monotonic() + timeout
    with kube.connect(kubeconfig=kubeconfig) as c:
        while True:
            items = [o for k in kinds for o in c.list(k)]
            ready = [
                o
                for o in items
                if int((o.get("status") or {}).get("readyReplicas") or 0)
                >= int((o.get("spec") or {}).get("replicas", 1) or 0)
            ]
            if len(ready) == len(items) or time.monotonic() > deadline:
                return len(ready), len(items)
            time.sleep(2)


def _consumers_of(journal: Path) -> int:
    """How many consumers the run recorded (its journal's ``begin`` record)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = json.loads(journal.read_text().splitlines()[0])
        return int(first.get("consumers") or 0)
    return 0


@dataclass
class PlaneRun:
    """One move on one control plane."""

    size: str
    plane: str
    settle: float
    ready: tuple[int, int]
    seconds: float
    code: int
    consumers: int
    counts: collections.Counter[tuple[str, str]]
    steps: dict[str, float]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def per_consumer(self) -> float:
        return self.total / self.consumers if self.consumers else float("nan")


def _plane_run(size: str, plane: str, *, timeout: float, cutover_src: Path | None) -> PlaneRun:
    from gpushift.render import write_example

    with tempfile.TemporaryDirectory(prefix="bench-cutover-planes-") as tmp_name:
        tmp = Path(tmp_name)
        if size == "homelab":
            target = write_example(tmp / "dra", allocator="dra", sharing=5)
            options = TwinOptions(example="homelab", time_scale=1.0, control_plane=plane)
        else:
            ((nodes, consumers),) = _sizes(size)
            repo, target, inventory = write_scale_repo(tmp, nodes=nodes, consumers=consumers)
            options = TwinOptions(
                example=None, repo=repo, nodes=inventory, time_scale=1.0, control_plane=plane
            )
        # The built-in kustomize builder on both planes (no kubectl process per Kustomization).
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        work = tmp / "work"
        work.mkdir()
        started = time.perf_counter()
        with running_twin(options, workdir=work, settle=1200, env=env) as twin:
            ready = _workloads_ready(twin.kubeconfig, timeout=300)
            settle = time.perf_counter() - started
            with _counting_proxy(twin, work) as (kubeconfig, log):
                offset = log.stat().st_size
                argv = _cutover_argv(kubeconfig, target, work / "journal.json")
                cut_env = None
                if cutover_src is not None:
                    cut_env = {**os.environ, "PYTHONPATH": str(cutover_src)}
                seconds, code, _ = _run_cpu(
                    argv, log=work / "cutover.log", env=cut_env, timeout=timeout
                )
                _quiet(log)
                counts = count_requests(log, offset=offset)
        if code not in (0, 1):
            tail = (work / "cutover.log").read_text(errors="replace")[-1500:]
            print(f"  the cutover exited {code}:\n{tail}", file=sys.stderr)
        run = PlaneRun(
            size,
            plane,
            settle,
            ready,
            seconds,
            code,
            _consumers_of(work / "journal.json"),
            counts,
            _steps(work / "cutover.log"),
        )
    print(
        f"{size} on {plane}: settled in {run.settle:.0f} s ({ready[0]}/{ready[1]} workloads "
        f"ready), cutover {run.seconds:.1f} s (exit {run.code}), {run.consumers} consumers, "
        f"{run.total} requests ({run.per_consumer:.2f} per consumer); load "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    print("  steps (s): " + ", ".join(f"{k} {v:.1f}" for k, v in run.steps.items()), flush=True)
    return run


def part_planes(*, sizes: list[str], timeout: float, cutover_src: Path | None) -> None:
    runs = {
        (size, plane): _plane_run(size, plane, timeout=timeout, cutover_src=cutover_src)
        for size in sizes
        for plane in ("embedded", "upstream")
    }
    print("\nthe move to DRA on both control planes (requests counted by the proxy in front)")
    head = f"{'size':<10} {'consumers':>9} {'':>10}{'embedded':>10}{'upstream':>10}{'ratio':>8}"
    print(head)
    for size in sizes:
        e, u = runs[(size, "embedded")], runs[(size, "upstream")]
        rows = [
            ("wall s", e.seconds, u.seconds),
            ("requests", e.total, u.total),
            ("per cons.", e.per_consumer, u.per_consumer),
        ]
        for label, a, b in rows:
            ratio = b / a if a else float("nan")
            print(f"{size:<10} {e.consumers:>9} {label:>10}{a:>10.2f}{b:>10.2f}{ratio:>8.2f}")
        print(f"{size:<10} {'':>9} {'exit':>10}{e.code:>10}{u.code:>10}")
    print("\nrequests by resource (embedded / upstream)")
    for size in sizes:
        e, u = runs[(size, "embedded")], runs[(size, "upstream")]
        keys = sorted(set(e.counts) | set(u.counts), key=lambda k: (k[1], k[0]))
        print(f"{size}:")
        for key in keys:
            print(
                f"  {key[0] + ' ' + key[1]:<38}{e.counts.get(key, 0):>8}{u.counts.get(key, 0):>8}"
            )


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
    parser.add_argument("--part", choices=("time", "requests", "planes", "both"), default="both")
    parser.add_argument("--time-scale", type=float, default=100.0)
    parser.add_argument("--sizes", type=_sizes, default=_sizes("200x1000,200x500,100x500"))
    parser.add_argument("--timeout", type=float, default=1800.0, help="bound per cutover, seconds")
    parser.add_argument(
        "--plane-sizes",
        type=lambda t: [x for x in t.split(",") if x],
        default=["homelab", "6x30"],
        help="planes: 'homelab' or NODESxCONSUMERS, comma-separated",
    )
    parser.add_argument(
        "--cutover-src",
        type=Path,
        default=None,
        help="planes: run the cutover from this source tree (PYTHONPATH), for a before/after",
    )
    args = parser.parse_args()
    from gpushift_twin.rehearse import command_available

    if not command_available([*gpushift_argv(), "cutover"]):
        raise SystemExit("bench.cutover: this gpushift has no `cutover` command yet")
    if args.part in ("time", "both"):
        part_time(time_scale=args.time_scale, timeout=args.timeout)
    if args.part in ("requests", "both"):
        part_requests(sizes=args.sizes, time_scale=args.time_scale, timeout=args.timeout)
    if args.part == "planes":
        part_planes(sizes=args.plane_sizes, timeout=args.timeout, cutover_src=args.cutover_src)


if __name__ == "__main__":
    main()
