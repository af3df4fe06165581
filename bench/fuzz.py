"""Hostile input for every reader: hypothesis-generated documents, run through the real CLI.

Run with ``python -m bench.fuzz [--count 10000] [--reader NAME ...] [--subprocess]``. Each
reader gets ``--count`` generated cases (Kubernetes-shaped YAML with hostile values, broken
YAML, bytes that are not text); each case runs the command in a scratch directory. The
contract checked for every case:

- no traceback: the command returns an exit code (0, 1 or 2), never raises;
- no hang: each case finishes within 5 s;
- exit 2 prints exactly one line, ``gpushift: error: …``, naming the file it read;
- exit 2 writes no file.

By default a case runs in-process through the CLI's real ``main`` (``gpushift.cli.main``),
under a 5 s SIGALRM. Typer builds its click command tree on every ``main`` call (about 0.3 s
for this CLI); a process calls ``main`` once, so the harness builds the tree once and reuses
it, and every other line of ``main`` runs as it does for a user. One warm-up case per reader
runs first, outside the contract, so that imports are not counted against the 5 s. With
``--subprocess`` each case of the command readers (``repo``, ``dump``, ``config``, ``argv``)
runs as ``python -m gpushift …`` in a child process instead (slower; for a sample): there
the 5 s are CPU seconds beyond the interpreter's measured start-up (a shared machine's load
inflates wall time), with a wall limit ten times that; a ``Traceback`` on its stderr is a
failure, and "slowest" is the child's CPU time.

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
import resource
import signal
import subprocess
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
        # An exception raised inside a gc callback or a __del__ is printed and dropped, so
        # the timer fires again shortly until one lands in the case itself.
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        raise _HangError

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _cli_built_once() -> Iterator[None]:
    """``gpushift.cli.main`` with typer's click tree built once for all cases, not per call."""
    import typer.main

    from gpushift.cli import app

    build = typer.main.get_command
    built = build(app)

    def cached(instance: Any) -> Any:
        return built if instance is app else build(instance)

    typer.main.get_command = cached  # type: ignore[assignment]
    try:
        yield
    finally:
        typer.main.get_command = build


@dataclass(frozen=True)
class Mode:
    """How a case runs: in-process (the default) or as a child ``python -m gpushift``."""

    subprocess: bool = False
    seconds: float = CASE_SECONDS
    startup: float = 0.0
    contract: bool = True  # False for the warm-up case: its result is not counted


IN_PROCESS = Mode()


@dataclass
class Outcome:
    """What one reader's cases did."""

    reader: str
    cases: int = 0
    codes: dict[int, int] = field(default_factory=dict)
    failed: int = 0  # cases that broke the contract (``failures`` keeps the first 20)
    failures: list[str] = field(default_factory=list)
    slowest: float = 0.0


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child(argv: list[str], *, cwd: Path, mode: Mode) -> tuple[int, str, str | None, float]:
    """``python -m gpushift ARGV`` in a child: its exit code, stderr, a problem if any, and
    the CPU seconds it used beyond the interpreter's start-up.

    On a shared machine a child's wall time says more about the neighbours than about the
    command, so its hang check is on CPU time (5 s beyond start-up); a wall limit ten times
    that kills a child that blocks without spinning.
    """
    before = _children_cpu()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gpushift", *argv],
            cwd=cwd,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=10 * (mode.seconds + mode.startup),
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired:
        wall = 10 * (mode.seconds + mode.startup)
        return -1, "", f"hang: no exit within {wall:.0f}s of wall time", 0.0
    cpu = max(_children_cpu() - before - mode.startup, 0.0)
    if "Traceback (most recent call last)" in done.stderr:
        last = done.stderr.strip().splitlines()[-1]
        return done.returncode, done.stderr, f"traceback: {last}", cpu
    if cpu > mode.seconds:
        return done.returncode, done.stderr, f"hang: {cpu:.1f}s of CPU beyond start-up", cpu
    return done.returncode, done.stderr, None, cpu


def _run(
    outcome: Outcome,
    *,
    workdir: Path,
    call: Callable[[], int],
    names: list[str],
    shown: str,
    argv: list[str] | None = None,
    mode: Mode = IN_PROCESS,
) -> None:
    """Run one case under the contract: ``call`` in-process, or ``argv`` in a child when
    ``mode.subprocess``; ``names`` are the file names exit 2 may cite."""
    from gpushift._errors import InputError

    before = _files(workdir)
    err, out = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    problem = None
    code = -1
    child_cpu: float | None = None
    if mode.subprocess and argv is not None:
        code, text, problem, child_cpu = _child(argv, cwd=workdir, mode=mode)
        err.write(text)
    else:
        try:
            with (
                _alarm(mode.seconds),
                contextlib.redirect_stderr(err),
                contextlib.redirect_stdout(out),
            ):
                try:
                    code = call()
                except InputError as e:  # direct readers: what the CLI's main prints
                    print(f"gpushift: error: {e}", file=sys.stderr)
                    code = 2
        except _HangError:
            problem = f"hang over {mode.seconds:g}s"
        except BaseException as e:  # a traceback: the thing this harness hunts
            problem = f"traceback: {type(e).__name__}: {e}"
        finally:
            gc.enable()  # simulate turns the collector off for its one-shot run
            gc.unfreeze()  # load_repo moves what it read to the permanent generation
    elapsed = time.perf_counter() - start if child_cpu is None else child_cpu
    if problem is None and elapsed > mode.seconds:
        problem = f"hang: {elapsed:.1f}s"
    if not mode.contract:
        return
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
    if problem is not None:
        outcome.failed += 1
        if len(outcome.failures) < 20:
            outcome.failures.append(f"{problem}\n    input: {shown[:600]!r}")


# --- readers ---------------------------------------------------------------------------------


def _dump_case(outcome: Outcome, workdir: Path, data: bytes, mode: Mode) -> None:
    from gpushift.cli import main

    path = workdir / "dump.yaml"
    path.write_bytes(data)
    argv = ["simulate", str(path)]
    _run(
        outcome,
        workdir=workdir,
        call=lambda: main(argv),
        names=[str(path)],
        shown=data.decode(errors="replace"),
        argv=argv,
        mode=mode,
    )


def _repo_case(outcome: Outcome, workdir: Path, files: list[tuple[str, bytes]], mode: Mode) -> None:
    from gpushift.cli import main

    root = workdir / "repo"
    for name, data in files:
        target = root / "kubernetes" / "apps" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    argv = ["check", str(root), "-o", "json"]
    _run(
        outcome,
        workdir=workdir,
        call=lambda: main(argv),
        names=[str(root)],
        shown=repr(files),
        argv=argv,
        mode=mode,
    )


def _kubeconfig_case(outcome: Outcome, workdir: Path, data: bytes, mode: Mode) -> None:
    from gpushift import kube

    path = workdir / "kubeconfig"
    path.write_bytes(data)

    def call() -> int:
        # Builds the client only: nothing is sent, whatever server the file names.
        kube.connect(kubeconfig=path).close()
        return 0

    _run(
        outcome,
        workdir=workdir,
        call=call,
        names=[str(path)],
        shown=data.decode(errors="replace"),
        mode=mode,
    )


def _inventory_case(outcome: Outcome, workdir: Path, data: bytes, mode: Mode) -> None:
    from gpushift_twin.cluster import load

    path = workdir / "nodes.yaml"
    path.write_bytes(data)

    def call() -> int:
        load(path)
        return 0

    _run(
        outcome,
        workdir=workdir,
        call=call,
        names=[str(path)],
        shown=data.decode(errors="replace"),
        mode=mode,
    )


def _config_case(outcome: Outcome, workdir: Path, data: bytes, mode: Mode) -> None:
    from gpushift.cli import main

    path = workdir / "gpushift.yaml"
    path.write_bytes(data)
    argv = ["render", str(path), "--diff", "--to", "dra"]
    _run(
        outcome,
        workdir=workdir,
        call=lambda: main(argv),
        names=[str(path)],
        shown=data.decode(errors="replace"),
        argv=argv,
        mode=mode,
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


def _argv_case(outcome: Outcome, workdir: Path, argv: list[str], mode: Mode) -> None:
    from gpushift.cli import main

    # Only the offline commands: nothing here may start a server or reach a cluster.
    if not argv or argv[0] not in ("simulate", "check", "render"):
        argv = ["simulate", *argv]
    if "--out" in argv:
        argv = [a for a in argv if a != "--out"]
    cwd = Path.cwd()
    os.chdir(workdir)
    try:
        _run(
            outcome,
            workdir=workdir,
            call=lambda: main(argv),
            names=[],
            shown=repr(argv),
            argv=argv,
            mode=mode,
        )
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

READERS: dict[str, tuple[st.SearchStrategy[Any], Callable[[Outcome, Path, Any, Mode], None]]] = {
    "repo": (_repo_files, _repo_case),
    "dump": (_document_text(), _dump_case),
    "kubeconfig": (_document_text(), _kubeconfig_case),
    "inventory": (_document_text(), _inventory_case),
    "config": (_document_text(), _config_case),
    "argv": (_ARGS, _argv_case),
}


# The readers whose cases are a command line, so that they can also run in a child process.
COMMANDS = ("repo", "dump", "config", "argv")

_NODE = b"apiVersion: v1\nkind: Node\nmetadata: {name: a}\nstatus: {allocatable: {cpu: '1'}}\n"
# One ordinary input per reader, run before the cases to pay for imports and first-call caches.
_WARM_UP: dict[str, Any] = {
    "repo": [("ks.yaml", _NODE)],
    "dump": _NODE,
    "kubeconfig": b"apiVersion: v1\nkind: Config\n",
    "inventory": b"nodes: [{name: a, gpus: []}]\n",
    "config": b"allocator: dra\n",
    "argv": ["simulate", "missing.yaml"],
}


def _startup() -> float:
    """CPU seconds of ``python -m gpushift --version``: a child's allowance beyond 5 s."""
    before = _children_cpu()
    subprocess.run([sys.executable, "-m", "gpushift", "--version"], capture_output=True, check=True)
    return _children_cpu() - before


class _OverBudgetError(Exception):
    pass


def fuzz(
    reader: str,
    *,
    count: int,
    seed: int = 0,
    in_child: bool = False,
    budget: float | None = None,
    progress: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """Run ``count`` generated cases through one reader; returns what they did.

    ``in_child`` runs each case as ``python -m gpushift`` (only the readers in ``COMMANDS``).
    ``budget`` (wall seconds) stops early, with the cases run so far; ``progress`` is called
    every 1,000 cases.
    """
    strategy, case = READERS[reader]
    if in_child and reader not in COMMANDS:
        raise ValueError(f"{reader} reads in-process only (not a command line)")
    outcome = Outcome(reader)
    mode = Mode(subprocess=True, startup=_startup()) if in_child else IN_PROCESS
    started = time.perf_counter()

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
        if budget is not None and time.perf_counter() - started > budget:
            raise _OverBudgetError
        with tempfile.TemporaryDirectory(prefix="gpushift-fuzz-") as tmp:
            case(outcome, Path(tmp), value, mode)
        if progress is not None and outcome.cases % 1000 == 0:
            progress(outcome)

    del seed  # derandomized: the same cases every run, so a failure can be replayed
    with _cli_built_once():
        if not in_child:
            with tempfile.TemporaryDirectory(prefix="gpushift-fuzz-") as tmp:
                warm = Mode(seconds=600.0, contract=False)
                case(outcome, Path(tmp), _WARM_UP[reader], warm)
        with contextlib.suppress(_OverBudgetError):
            run()
    return outcome


def main(argv: list[str] | None = None) -> int:
    """Fuzz the readers and print one line per reader; exit 1 if any case broke the contract."""
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__)
    parser.add_argument("--count", type=int, default=10_000, help="cases per reader")
    parser.add_argument("--reader", action="append", choices=sorted(READERS), default=None)
    parser.add_argument(
        "--subprocess",
        action="store_true",
        help=f"run each case as python -m gpushift (readers {', '.join(COMMANDS)} only)",
    )
    parser.add_argument(
        "--budget", type=float, default=None, help="wall seconds per reader; stop early"
    )
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.WARNING)
    bad = 0
    readers = args.reader or (list(COMMANDS) if args.subprocess else list(READERS))
    for reader in readers:
        start = time.perf_counter()
        outcome = fuzz(
            reader,
            count=args.count,
            in_child=args.subprocess,
            budget=args.budget,
            progress=lambda o: print(
                f"  {o.reader}: {o.cases} cases, {o.failed} failures, slowest {o.slowest:.2f}s",
                file=sys.stderr,
                flush=True,
            ),
        )
        gc.collect()
        codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(outcome.codes.items()))
        print(
            f"{reader:<10} {outcome.cases:>6} cases  {outcome.failed:>3} failures  "
            f"slowest {outcome.slowest:.2f}s  total {time.perf_counter() - start:.0f}s  ({codes})",
            flush=True,
        )
        for failure in outcome.failures[:5]:
            print(f"  {failure}")
        bad += outcome.failed
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
