"""Suite-wide: the shared fixtures, which live beside the checkout, not in it; the order
modules are handed to the xdist workers; and retries that need not wait.

Tests that read ``../shared/fixtures`` (relative to the repository root) cannot run from a
fresh clone alone. When that directory is missing their modules are left out of collection
and the run ends with one line saying where the fixtures are expected, instead of a
collection error.

``make unit`` runs the modules on one worker more than the cores (``--dist loadscope``, one
module per worker) in the order collection leaves them, so this file puts the longest first: a
module marked ``slow(seconds=N)`` goes before every unmarked one, longest first (the rule of
longest-processing-time scheduling). Left to xdist's own order (most tests first) the
one- and two-test cluster rehearsals, minutes each, started last and ran alone at the end.

The twins a run starts, in this process, its xdist workers and the ``gpushift twin serve``
processes they start, share one directory of ``kubectl kustomize`` outputs keyed by content
(``GPUSHIFT_TWIN_BUILD_CACHE``, see ``gpushift.twin.flux``), made for the run and removed
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
_left_out: list[str] = []


#: ``gpushift.twin.flux.BUILD_CACHE_ENV``, spelled out: importing the twin here would cost
#: every pytest process, the xdist controller included, a second of CPU.
BUILD_CACHE_ENV = "GPUSHIFT_TWIN_BUILD_CACHE"
_made_cache: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Make the run's build cache directory (the controller; workers inherit the variable)."""
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


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave out a test module that reads the shared fixtures when they are missing."""
    if (
        FIXTURES.is_dir()
        or collection_path.suffix != ".py"
        or collection_path.name == "conftest.py"
    ):
        return None
    try:
        text = collection_path.read_text(encoding="utf-8")
    except OSError:
        return None
    # Modules that already skip their fixture tests themselves keep their other tests.
    if any(marker in text for marker in _MARKERS) and "skipif(not " not in text:
        _left_out.append(str(collection_path.relative_to(ROOT)))
        return True
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which modules were left out and where their fixtures are expected."""
    if _left_out:
        terminalreporter.write_line(
            f"{len(_left_out)} test modules need the shared fixtures, expected at {FIXTURES} "
            f"(a 'shared' directory beside the checkout); left out: {', '.join(sorted(_left_out))}"
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
