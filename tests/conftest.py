"""Suite-wide: the shared fixtures, which live beside the checkout, not in it; the order
modules are handed to the xdist workers; and retries that need not wait.

Tests that read ``../shared/fixtures`` (relative to the repository root) cannot run from a
fresh clone alone; CI (``.ci/run``) runs with the directory beside the checkout. When it is
missing, each test that needs it fails (the skip it would take for want of its fixture becomes
a failure naming the directory), under xdist too, so a run without the fixtures cannot pass
unnoticed. ``GPUSHIFT_NO_SHARED_FIXTURES=1`` says the operator has none on purpose: then the
modules that read them are left out of collection (those that skip their fixture tests
themselves keep their other tests) and the run ends with one line naming them and the
directory (docs/decisions.md).

``make unit`` runs the modules on one worker more than the cores (``--dist loadscope``, one
module per worker) in the order collection leaves them, so this file puts the longest first: a
module marked ``slow(seconds=N)`` goes before every unmarked one, longest first (the rule of
longest-processing-time scheduling). Left to xdist's own order (most tests first) the
one- and two-test cluster rehearsals, minutes each, started last and ran alone at the end.

The twins a run starts, in this process, its xdist workers and the ``gpushift twin serve``
processes they start, share one directory of ``kubectl kustomize`` outputs keyed by content
(``GPUSHIFT_TWIN_BUILD_CACHE``, see ``gpushift_twin.flux``), made for the run and removed
after it: the same example rendered into many temporary directories, and the same repository
converged by several modules, build once per run. A run started with the variable set uses
the directory it names and leaves it in place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpushift import kube

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = (ROOT / ".." / "shared" / "fixtures").resolve()
_MARKERS = ('"shared" / "fixtures"', "shared/fixtures")


#: ``gpushift_twin.flux.BUILD_CACHE_ENV``, spelled out: importing the twin here would cost
#: every pytest process, the xdist controller included, a second of CPU.
BUILD_CACHE_ENV = "GPUSHIFT_TWIN_BUILD_CACHE"
_made_cache: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Load the hypothesis profile; make the run's build cache directory (the controller;
    workers inherit the variable)."""
    # No property here is about time: hypothesis's 200 ms deadline per example measured the
    # machine (a loaded 2-core run failed tests/twin/cluster/test_inventory.py once), not the
    # code. Off for every test; a test whose property is timing sets its own deadline.
    from hypothesis import settings

    settings.register_profile("gpushift", deadline=None)
    settings.load_profile("gpushift")
    if os.environ.get(BUILD_CACHE_ENV):
        return
    path = tempfile.mkdtemp(prefix="gpushift-test-builds-")
    os.environ[BUILD_CACHE_ENV] = path
    _made_cache.append(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the build cache this process made."""
    while _made_cache:
        path = _made_cache.pop()
        os.environ.pop(BUILD_CACHE_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


#: Set (to anything but 0) to run without the shared fixtures on purpose.
NO_SHARED_ENV = "GPUSHIFT_NO_SHARED_FIXTURES"


def _opted_out() -> bool:
    return os.environ.get(NO_SHARED_ENV, "") not in ("", "0")


def _reads_shared(path: Path) -> str | None:
    """The module's text when it is a test module reading the shared fixtures, else None."""
    if path.suffix != ".py" or path.name == "conftest.py" or path == ROOT / "tests" / "conftest.py":
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    return text if any(marker in text for marker in _MARKERS) else None


def _left_out_modules(path: Path) -> bool:
    """Whether an opted-out run leaves this module out: it reads the fixtures and does not
    skip its fixture tests itself (a module that does keeps its other tests)."""
    text = _reads_shared(path)
    return text is not None and "skipif(not " not in text


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave out a test module that reads the shared fixtures when they are missing and the
    run said so (:data:`NO_SHARED_ENV`)."""
    if FIXTURES.is_dir() or not _opted_out():
        return None
    return True if _left_out_modules(collection_path) else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With the fixtures missing and no opt-out, a test of a module reading them that skips
    for want of a fixture fails instead, naming the directory."""
    outcome = yield
    if FIXTURES.is_dir() or _opted_out():
        return
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if not report.skipped or _reads_shared(Path(str(item.path))) is None:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if "fixture" not in reason:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"the shared fixtures are missing: {FIXTURES} does not exist ({reason}). CI runs "
        f"with a 'shared' directory beside the checkout; without one set {NO_SHARED_ENV}=1 "
        "to leave these tests out"
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say, in the process that reports (the xdist controller too), which modules an
    opted-out run left out and where their fixtures are expected."""
    if FIXTURES.is_dir() or not _opted_out():
        return
    left_out = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py") if _left_out_modules(p)
    )
    terminalreporter.write_line(
        f"{NO_SHARED_ENV} is set and {FIXTURES} does not exist: {len(left_out)} test modules "
        f"that need the shared fixtures were left out: {', '.join(left_out)}"
    )


def _weight(item: pytest.Item) -> float:
    """Rough wall seconds of the item's module from its ``slow(seconds=N)`` mark, else 0."""
    mark = item.get_closest_marker("slow")
    if mark is None:
        return 0.0
    return float(mark.kwargs.get("seconds", 60))


def _upstream_missing() -> str | None:
    from gpushift import upstream

    try:
        upstream.ControlPlane.binaries()
    except upstream.NotBuiltError as err:
        return str(err)
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip ``upstream`` tests, with the reason, when the binaries are absent; order modules
    longest first (marked ones by their seconds, the rest by test count, xdist's own rule),
    keeping each module's tests together and in their order."""
    if any(item.get_closest_marker("upstream") for item in items):
        missing = _upstream_missing()
        if missing is not None:
            skip = pytest.mark.skip(reason=missing)
            for item in items:
                if item.get_closest_marker("upstream"):
                    item.add_marker(skip)
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ranked = sorted(modules.values(), key=lambda its: (-max(_weight(i) for i in its), -len(its)))
    items[:] = [item for its in ranked for item in its]


@pytest.fixture
def instant_retries(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The kube client's retry waits (0.2 s doubling, 12.6 s for six) recorded instead of
    slept, for in-process tests of an unreachable server's exit code. The waits themselves
    are tested in tests/kube/test_client.py, and a subprocess test of the same exit code
    (tests/twin/cluster/test_cli.py) waits for real."""
    waits: list[float] = []
    defaults = kube.Kube.__init__.__kwdefaults__
    assert defaults is not None and "sleep" in defaults
    monkeypatch.setitem(defaults, "sleep", waits.append)
    yield waits


@pytest.fixture(scope="module")
def upstream_plane() -> Iterator[object]:
    """A real control plane for the module's tests (``gpushift.upstream.ControlPlane``:
    etcd, kube-apiserver, kube-controller-manager, kube-scheduler and gpushift's CRDs); its
    admin kubeconfig is ``.kubeconfig``. Tests using it carry ``pytest.mark.upstream``."""
    from gpushift import upstream

    with upstream.ControlPlane() as plane:
        yield plane
