"""``gpushift check`` against PyYAML's C loader on a synthetic Flux repository.

Run with ``python -m bench.check [--sizes 2500,5000] [--repeat 5]``. For each size it writes a
repository of app-template HelmReleases that request ``nvidia.com/gpu`` (each app with its Flux
Kustomization and kustomize file, as home-ops repositories lay them out) plus a gpu-operator
stack, then times, in ``--repeat`` interleaved rounds (alternating which side goes first, a
full collection before each):

- ``parse``: the floor. The same files check reads, walked and read as check reads them
  (``os.walk``, ``open``), every document built by PyYAML's ``CSafeLoader``, with the cyclic
  collector off as check reads its files; nothing can be faster without skipping the YAML;
- ``check``: the whole ``gpushift check`` in-process (discovery, model, rules, json report).

It prints each side's best CPU and wall time, the ratio of the bests check/parse (target
<= 1.2), the median of the per-round ratios, and documents per second of CPU time.
``--baseline SRC`` also times, in the same rounds, the ``gpushift check`` of another source
tree (a worktree's ``src``) in a child interpreter that imports it, and this tree's check in a
second such child, so a before/after pair comes from one run under the same conditions:
``before`` is the other tree's check CPU, ``before/parse`` its ratio to the same parse (best
and median of rounds), ``after/before`` the ratio of the two children (best and median).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

_STACK = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: gpu-operator
  namespace: gpu-operator
spec:
  interval: 1h
  path: ./kubernetes/apps/gpu-operator/app
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  targetNamespace: gpu-operator
"""

_OPERATOR = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: gpu-operator
spec:
  interval: 1h
  chart:
    spec:
      chart: gpu-operator
      sourceRef: {kind: HelmRepository, name: nvidia}
  values:
    driver: {enabled: false}
    devicePlugin:
      config: {name: time-slicing-config, default: any}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: time-slicing-config
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        resources:
          - name: nvidia.com/gpu
            replicas: 4
"""

_KS = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: &app {name}
  namespace: &namespace media
spec:
  commonMetadata:
    labels:
      app.kubernetes.io/name: *app
  dependsOn:
    - name: gpu-operator
      namespace: gpu-operator
  interval: 1h
  path: ./kubernetes/apps/media/{name}/app
  postBuild:
    substitute:
      APP: *app
  prune: true
  sourceRef: {{kind: GitRepository, name: flux-system, namespace: flux-system}}
  targetNamespace: *namespace
"""

_HR = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {name}
spec:
  interval: 1h
  chartRef: {{kind: OCIRepository, name: app-template}}
  values:
    controllers:
      {name}:
        annotations:
          reloader.stakater.com/auto: "true"
        containers:
          app:
            image:
              repository: ghcr.io/example/{name}
              tag: 1.2.3
            env:
              TZ: ${{TIMEZONE}}
            probes:
              liveness: &probes
                enabled: true
              readiness: *probes
            resources:
              requests:
                cpu: 100m
                memory: 512Mi
              limits:
                memory: 2Gi
                nvidia.com/gpu: 1
    defaultPodOptions:
      runtimeClassName: nvidia
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
              - matchExpressions:
                  - key: nvidia.com/gpu.present
                    operator: In
                    values: ["true"]
    service:
      app:
        controller: {name}
        ports:
          http:
            port: 8080
    persistence:
      config:
        existingClaim: {name}
"""

_KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
{items}
"""


def generate(root: Path, *, apps: int) -> int:
    """Write the synthetic repository under ``root``; returns the number of YAML documents."""
    base = root / "kubernetes" / "apps"
    (base / "gpu-operator" / "app").mkdir(parents=True)
    (base / "gpu-operator" / "ks.yaml").write_text(_STACK)
    (base / "gpu-operator" / "app" / "helmrelease.yaml").write_text(_OPERATOR)
    (base / "gpu-operator" / "app" / "runtimeclass.yaml").write_text(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia\n"
        "handler: nvidia\n"
    )
    (base / "gpu-operator" / "app" / "kustomization.yaml").write_text(
        _KUSTOMIZATION.format(items="  - ./helmrelease.yaml\n  - ./runtimeclass.yaml")
    )
    (base / "gpu-operator" / "kustomization.yaml").write_text(
        _KUSTOMIZATION.format(items="  - ./ks.yaml")
    )
    docs = 6
    names = [f"app-{i:05d}" for i in range(apps)]
    for name in names:
        app = base / "media" / name
        (app / "app").mkdir(parents=True)
        (app / "ks.yaml").write_text(_KS.format(name=name))
        (app / "app" / "helmrelease.yaml").write_text(_HR.format(name=name))
        (app / "app" / "kustomization.yaml").write_text(
            _KUSTOMIZATION.format(items="  - ./helmrelease.yaml")
        )
        docs += 3
    (base / "media" / "kustomization.yaml").write_text(
        _KUSTOMIZATION.format(items="\n".join(f"  - ./{n}/ks.yaml" for n in names))
    )
    (base / "kustomization.yaml").write_text(
        _KUSTOMIZATION.format(items="  - ./gpu-operator\n  - ./media")
    )
    return docs + 3


def _yaml_files(root: Path) -> list[str]:
    """The files check reads (``.yaml``, ``.yml``, ``.json``; ``.git`` skipped), sorted, as
    strings: the same walk and the same list as ``gpushift.flux.read_tree``."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        found.extend(
            os.path.join(dirpath, n) for n in filenames if n.endswith((".yaml", ".yml", ".json"))
        )
    found.sort()
    return found


def _parse_only(root: Path) -> None:
    """The floor: every file check reads, read as check reads it, and every document built by
    PyYAML's C loader (``CSafeLoader``), nothing kept."""
    loader = yaml.CSafeLoader
    for path in _yaml_files(root):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        list(yaml.load_all(text, Loader=loader))


def _own_parse(root: Path) -> None:
    """Check's own parse alone: the same files through ``gpushift._yaml.parse_text`` (the C
    loader's nodes built by the plain builder), so the model's own cost reads as
    check / own parse."""
    from gpushift._yaml import parse_text

    for path in _yaml_files(root):
        with open(path, encoding="utf-8") as fh:
            parse_text(fh.read(), path)


def _check(root: Path) -> None:
    from gpushift.rules import run_check

    run_check([root]).to_json()


#: The child that runs a tree's check on request: one line in ("run"), one line out (its CPU
#: and wall seconds, measured inside the child as ``_timed`` measures here).
_CHILD = """
import gc, sys, time
from pathlib import Path
from gpushift.rules import run_check
root = Path(sys.argv[1])
run_check([root]).to_json()
print("ready", flush=True)
for line in sys.stdin:
    gc.collect()
    w0, c0 = time.perf_counter(), time.process_time()
    run_check([root]).to_json()
    print(time.process_time() - c0, time.perf_counter() - w0, flush=True)
"""


class _Baseline:
    """A child interpreter importing gpushift from ``src``, checking ``root`` on request."""

    def __init__(self, src: str, root: Path) -> None:
        env = {**os.environ, "PYTHONPATH": src}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"baseline check from {src} did not start")

    def run(self) -> tuple[float, float]:
        """CPU and wall seconds of one check in the child."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("run\n")
        self._proc.stdin.flush()
        cpu, wall = (float(x) for x in self._proc.stdout.readline().split())
        return cpu, wall

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=60)


def _timed(fn: Callable[[Path], None], root: Path, *, gc_off: bool) -> tuple[float, float]:
    """CPU and wall seconds of one call, after a full collection (so neither side pays for
    the other's garbage).

    CPU time (user + system of this process, ``time.process_time``) is the figure to compare
    on a shared machine: wall time also counts the time other processes hold the cores.
    ``gc_off`` runs the call with the cyclic collector off, as ``load_repo`` reads its files:
    the floor parses under the same collector state as check's own parse.
    """
    gc.collect()
    if gc_off:
        gc.disable()
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        fn(root)
        return time.process_time() - c0, time.perf_counter() - w0
    finally:
        gc.enable()


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one line per size (and a profile with ``--profile``)."""
    parser = argparse.ArgumentParser(prog="python -m bench.check")
    parser.add_argument("--sizes", default="2500,5000")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds per size")
    parser.add_argument("--profile", action="store_true", help="profile check at the last size")
    parser.add_argument(
        "--baseline", metavar="SRC", help="also time the check of the gpushift tree at SRC"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(
        f"{'apps':>6} {'docs':>7} {'parse cpu':>10} {'check cpu':>10} {'ratio':>6} "
        f"{'median':>7} {'docs/s':>8} {'parse wall':>11} {'check wall':>11} {'ratio':>6}"
        f" {'own parse':>10} {'check/own':>10}"
        + (
            f" {'before cpu':>11} {'before/parse':>13} {'median':>7} {'after/before':>13}"
            f" {'median':>7}"
            if args.baseline
            else ""
        )
    )
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="gpushift-bench-") as tmp:
            root = Path(tmp)
            docs = generate(root, apps=size)
            _check(root)  # warm imports and the page cache once, for both sides
            _parse_only(root)
            base = _Baseline(args.baseline, root) if args.baseline else None
            here = str(Path(__file__).resolve().parents[1] / "src")
            after = _Baseline(here, root) if args.baseline else None
            # Interleave the sides, alternating which goes first, so that load from other
            # processes hits them alike; keep each side's best and the per-round ratios.
            parse: list[tuple[float, float]] = []
            check: list[tuple[float, float]] = []
            own: list[float] = []
            before_cpu: list[float] = []
            after_cpu: list[float] = []
            for i in range(args.repeat):
                if i % 2 == 0:
                    parse.append(_timed(_parse_only, root, gc_off=True))
                    check.append(_timed(_check, root, gc_off=False))
                else:
                    check.append(_timed(_check, root, gc_off=False))
                    parse.append(_timed(_parse_only, root, gc_off=True))
                own.append(_timed(_own_parse, root, gc_off=True)[0])
                if base is not None and after is not None:
                    pair = (base, after) if i % 2 == 0 else (after, base)
                    got = {id(child): child.run()[0] for child in pair}
                    before_cpu.append(got[id(base)])
                    after_cpu.append(got[id(after)])
            parse_cpu = min(c for c, _ in parse)
            check_cpu = min(c for c, _ in check)
            parse_wall = min(w for _, w in parse)
            check_wall = min(w for _, w in check)
            ratios = [c / p for (c, _), (p, _) in zip(check, parse, strict=True)]
            line = (
                f"{size:>6} {docs:>7} {parse_cpu:>10.3f} {check_cpu:>10.3f} "
                f"{check_cpu / parse_cpu:>6.2f} {_median(ratios):>7.2f} "
                f"{docs / check_cpu:>8.0f} "
                f"{parse_wall:>11.3f} {check_wall:>11.3f} {check_wall / parse_wall:>6.2f}"
                f" {min(own):>10.3f} {check_cpu / min(own):>10.2f}"
            )
            if base is not None and after is not None:
                base.close()
                after.close()
                b_ratios = [b / p for b, (p, _) in zip(before_cpu, parse, strict=True)]
                ab = [a / b for a, b in zip(after_cpu, before_cpu, strict=True)]
                line += (
                    f" {min(before_cpu):>11.3f} {min(before_cpu) / parse_cpu:>13.2f}"
                    f" {_median(b_ratios):>7.2f}"
                    f" {min(after_cpu) / min(before_cpu):>13.2f} {_median(ab):>7.2f}"
                )
            print(line + f"  (load {os.getloadavg()[0]:.2f})", flush=True)
            if args.profile and size == sizes[-1]:
                prof = cProfile.Profile()
                prof.runcall(_check, root)
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
                print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
