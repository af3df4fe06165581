"""Hostile input for every reader: hypothesis-generated documents, run through the real CLI.

Run with ``python -m bench.fuzz [--count 10000] [--reader NAME ...]``. Each reader gets
``--count`` generated cases (Kubernetes-shaped YAML with hostile values, broken YAML, bytes
that are not text); each case runs the command in-process in a scratch directory. The
contract checked for every case:

- no traceback: the command returns an exit code (0, 1 or 2), never raises;
- no hang: each case finishes within 5 s (SIGALRM);
- exit 2 prints exactly one line, ``gpushift: error: …``, naming the file it read;
- exit 2 writes no file.

Readers: ``repo`` (``check`` on a Flux tree), ``dump`` (``simulate`` on a cluster dump),
``kubeconfig`` (cluster access: ``kube.connect`` builds a client, sends nothing), ``inventory``
(the twin's ``--nodes`` file), ``config`` (``render`` of a gpushift.yaml, as ``--diff`` so a
valid one writes nothing) and ``argv`` (command lines for simulate, check and render).

It prints, per reader, the cases run, the failures and the slowest case, and exits 1 if any
case broke the contract (the first failures are printed with their input).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

CASE_SECONDS = 5.0

# --- generated documents ---------------------------------------------------------------------

_HOSTILE_NUMBERS = [
    "1000000",
    "1e40",
    "99999999999999999999999999999",
    "-3",
    "-0",
    "0",
    "1.5",
    "500m",
    "24Gi",
    "1Ei",
    "NaN",
    "inf",
    "",
    "0x10",
    "١",
    9223372036854775808,
    -1,
    10**30,
    1.0e308,
]
_KEYS = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "spec",
    "status",
    "items",
    "containers",
    "resources",
    "requests",
    "limits",
    "nvidia.com/gpu",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.count",
    "allocatable",
    "capacity",
    "devices",
    "resourceClaims",
    "template",
    "replicas",
    "values",
    "chart",
    "sourceRef",
    "path",
    "resources",
    "ownerReferences",
    "clusters",
    "contexts",
    "users",
    "current-context",
    "cluster",
    "context",
    "user",
    "server",
    "nodes",
    "gpus",
    "allocator",
    "sharing",
]
_KINDS = [
    "Node",
    "Pod",
    "Deployment",
    "ReplicaSet",
    "DaemonSet",
    "StatefulSet",
    "ResourceSlice",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "PriorityClass",
    "Namespace",
    "List",
    "HelmRelease",
    "Kustomization",
    "GitRepository",
    "ConfigMap",
    "Config",
]
_API_VERSIONS = [
    "v1",
    "apps/v1",
    "resource.k8s.io/v1",
    "helm.toolkit.fluxcd.io/v2",
    "kustomize.toolkit.fluxcd.io/v1",
    "kustomize.config.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
]

_scalars = st.one_of(
    st.sampled_from(_HOSTILE_NUMBERS),
    st.sampled_from(_KINDS + _API_VERSIONS),
    st.text(max_size=12),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
)


def _values(depth: int = 4) -> st.SearchStrategy[Any]:
    return st.recursive(
        _scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=8), inner, max_size=5),
        ),
        max_leaves=3 * depth,
    )


_VALUES = _values()


@st.composite
def _object(draw: st.DrawFn) -> dict[str, Any]:
    """A Kubernetes-shaped object: usually a known kind, hostile values inside."""
    obj: dict[str, Any] = draw(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=4))
    if draw(st.integers(0, 9)) > 0:
        obj["apiVersion"] = draw(st.sampled_from(_API_VERSIONS))
        obj["kind"] = draw(st.sampled_from(_KINDS))
    if draw(st.booleans()):
        obj["metadata"] = {
            "name": draw(st.sampled_from(["a", "gpu-0", "", "x" * 300]) | st.text(max_size=8)),
            "namespace": draw(st.sampled_from(["default", "kube-system", ""])),
            "labels": draw(st.dictionaries(st.sampled_from(_KEYS), _scalars, max_size=3)),
        }
    return obj


def _dump(docs: list[Any]) -> str:
    try:
        return yaml.safe_dump_all(docs, allow_unicode=True)
    except (yaml.YAMLError, ValueError, RecursionError):
        return "{}"


_broken = st.sampled_from(
    [
        "a: [1, 2\n",
        "key: value\n  bad indent: x\n",
        "- a\nb: c\n",
        "&a [*a]\n",
        "!!python/object:os.system {}\n",
        "a: !!binary notbase64\n",
        "\t- tab\n",
        "---\n---\n...\n",
        "? [a]\n: b\n",
        "x: *missing\n",
    ]
)


@st.composite
def _document_text(draw: st.DrawFn) -> bytes:
    """A file's bytes: generated objects as YAML, maybe broken, maybe not text at all."""
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(st.binary(max_size=64))
    if choice == 1:
        return draw(_broken).encode()
    docs = draw(st.lists(_object(), min_size=1, max_size=3))
    if draw(st.integers(0, 4)) == 0:
        docs = [{"apiVersion": "v1", "kind": "List", "items": docs}]
    text = _dump(docs)
    if draw(st.integers(0, 5)) == 0:
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(_broken)
    return text.encode()


# --- one case --------------------------------------------------------------------------------


class _HangError(Exception):
    pass


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: object) -> None:
        raise _HangError

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    """What one reader's cases did."""

    reader: str
    cases: int = 0
    codes: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    slowest: float = 0.0


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _run(
    outcome: Outcome,
    *,
    workdir: Path,
    call: Callable[[], int],
    names: list[str],
    shown: str,
) -> None:
    """Run ``call`` once under the contract; ``names`` are the file names exit 2 may cite."""
    from gpushift._errors import InputError

    before = _files(workdir)
    err, out = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    problem = None
    code = -1
    try:
        with _alarm(CASE_SECONDS), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = call()
            except InputError as e:  # direct readers: what the CLI's main prints
                print(f"gpushift: error: {e}", file=sys.stderr)
                code = 2
    except _HangError:
        problem = f"hang over {CASE_SECONDS:g}s"
    except BaseException as e:  # a traceback: the thing this harness hunts
        problem = f"traceback: {type(e).__name__}: {e}"
    finally:
        gc.enable()  # simulate turns the collector off for its one-shot run
    elapsed = time.perf_counter() - start
    outcome.cases += 1
    outcome.slowest = max(outcome.slowest, elapsed)
    outcome.codes[code] = outcome.codes.get(code, 0) + 1
    if problem is None and code not in (0, 1, 2):
        problem = f"exit {code}"
    if problem is None and code == 2:
        lines = err.getvalue().splitlines()
        lines = [ln for ln in lines if not ln.startswith("gpushift: ignored kinds")]
        # render's documented form for several problems: a count line, then one line per
        # problem, each naming the file.
        several = (
            len(lines) > 1
            and bool(names)
            and all(any(ln.startswith(n) for n in names) for ln in lines[1:])
        )
        if (len(lines) != 1 and not several) or not lines[0].startswith("gpushift: error: "):
            problem = f"exit 2 without one error line: {err.getvalue()!r}"
        elif names and not several and not any(n in lines[0] for n in names):
            problem = f"exit 2 without naming the file: {lines[0]!r}"
        elif _files(workdir) - before:
            problem = f"exit 2 wrote {sorted(map(str, _files(workdir) - before))}"
    if problem is not None and len(outcome.failures) < 20:
        outcome.failures.append(f"{problem}\n    input: {shown[:600]!r}")


# --- readers ---------------------------------------------------------------------------------


def _dump_case(outcome: Outcome, workdir: Path, data: bytes) -> None:
    from gpushift.cli import main

    path = workdir / "dump.yaml"
    path.write_bytes(data)
    _run(
        outcome,
        workdir=workdir,
        call=lambda: main(["simulate", str(path)]),
        names=[str(path)],
        shown=data.decode(errors="replace"),
    )


def _repo_case(outcome: Outcome, workdir: Path, files: list[tuple[str, bytes]]) -> None:
    from gpushift.cli import main

    root = workdir / "repo"
    for name, data in files:
        target = root / "kubernetes" / "apps" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    _run(
        outcome,
        workdir=workdir,
        call=lambda: main(["check", str(root), "-o", "json"]),
        names=[str(root)],
        shown=repr(files),
    )


def _kubeconfig_case(outcome: Outcome, workdir: Path, data: bytes) -> None:
    from gpushift import kube

    path = workdir / "kubeconfig"
    path.write_bytes(data)

    def call() -> int:
        # Builds the client only: nothing is sent, whatever server the file names.
        kube.connect(kubeconfig=path).close()
        return 0

    _run(
        outcome, workdir=workdir, call=call, names=[str(path)], shown=data.decode(errors="replace")
    )


def _inventory_case(outcome: Outcome, workdir: Path, data: bytes) -> None:
    from gpushift.twin.cluster import load

    path = workdir / "nodes.yaml"
    path.write_bytes(data)

    def call() -> int:
        load(path)
        return 0

    _run(
        outcome, workdir=workdir, call=call, names=[str(path)], shown=data.decode(errors="replace")
    )


def _config_case(outcome: Outcome, workdir: Path, data: bytes) -> None:
    from gpushift.cli import main

    path = workdir / "gpushift.yaml"
    path.write_bytes(data)
    _run(
        outcome,
        workdir=workdir,
        call=lambda: main(["render", str(path), "--diff", "--to", "dra"]),
        names=[str(path)],
        shown=data.decode(errors="replace"),
    )


_ARGS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "simulate",
                "check",
                "render",
                "--example",
                "homelab",
                "--allocator",
                "dra",
                "device-plugin",
                "gpu-operator",
                "--sharing",
                "--compare",
                "-o",
                "json",
                "yaml",
                "sarif",
                "--diff",
                "--to",
                "--from",
                "--to-sharing",
                "--base",
                "--schema",
                "--version",
                "-h",
                "missing.yaml",
                ".",
            ]
        ),
        st.sampled_from([str(x) for x in _HOSTILE_NUMBERS]),
        st.text(max_size=10),
    ),
    max_size=8,
)


def _argv_case(outcome: Outcome, workdir: Path, argv: list[str]) -> None:
    from gpushift.cli import main

    # Only the offline commands: nothing here may start a server or reach a cluster.
    if not argv or argv[0] not in ("simulate", "check", "render"):
        argv = ["simulate", *argv]
    if "--out" in argv:
        argv = [a for a in argv if a != "--out"]
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        _run(outcome, workdir=workdir, call=lambda: main(argv), names=[], shown=repr(argv))
    finally:
        os.chdir(cwd)


_repo_files = st.lists(
    st.tuples(
        st.sampled_from(
            ["ks.yaml", "app/helmrelease.yaml", "app/kustomization.yaml", "gpu/values.yaml"]
        ),
        _document_text(),
    ),
    min_size=1,
    max_size=4,
)

READERS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Outcome, Path, Any], None]]] = {
    "repo": (_repo_files, _repo_case),
    "dump": (_document_text(), _dump_case),
    "kubeconfig": (_document_text(), _kubeconfig_case),
    "inventory": (_document_text(), _inventory_case),
    "config": (_document_text(), _config_case),
    "argv": (_ARGS, _argv_case),
}


def fuzz(reader: str, *, count: int, seed: int = 0) -> Outcome:
    """Run ``count`` generated cases through one reader; returns what they did."""
    strategy, case = READERS[reader]
    outcome = Outcome(reader)

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(value: Any) -> None:
        with tempfile.TemporaryDirectory(prefix="gpushift-fuzz-") as tmp:
            case(outcome, Path(tmp), value)

    del seed  # derandomized: the same cases every run, so a failure can be replayed
    run()
    return outcome


def main(argv: list[str] | None = None) -> int:
    """Fuzz the readers and print one line per reader; exit 1 if any case broke the contract."""
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__)
    parser.add_argument("--count", type=int, default=10_000, help="cases per reader")
    parser.add_argument("--reader", action="append", choices=sorted(READERS), default=None)
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)
    bad = 0
    for reader in args.reader or list(READERS):
        start = time.perf_counter()
        outcome = fuzz(reader, count=args.count)
        gc.collect()
        codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(outcome.codes.items()))
        print(
            f"{reader:<10} {outcome.cases:>6} cases  {len(outcome.failures):>3} failures  "
            f"slowest {outcome.slowest:.2f}s  total {time.perf_counter() - start:.0f}s  ({codes})",
            flush=True,
        )
        for failure in outcome.failures[:5]:
            print(f"  {failure}")
        bad += len(outcome.failures)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
