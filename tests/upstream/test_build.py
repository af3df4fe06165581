"""upstream/build.py (`make upstream`): the replace list it generates, its idempotence and its
one-line failures. No Go build runs here; the build itself is the upstream tier's setup."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from gpushift import upstream

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "upstream" / "build.py"


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("upstream_build", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _build_module()

# The shape of k8s.io/kubernetes's go.mod: staging modules required at v0.0.0 and replaced
# by paths inside the repository, beside an ordinary replace that must be left alone.
KUBE_GO_MOD = """module k8s.io/kubernetes

go 1.26.0

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/example/fork => github.com/example/fork v1.2.3
)

replace k8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
"""


def test_the_go_module_requires_the_version_the_package_runs() -> None:
    go_mod = (ROOT / "upstream" / "go.mod").read_text(encoding="utf-8")
    assert build.required_version(go_mod) == upstream.VERSION == "v1.37.2"


def test_every_staging_replace_maps_to_its_published_version() -> None:
    # Kubernetes v1.37.2's staging modules are published as v0.37.2.
    assert build.staging_replaces(KUBE_GO_MOD, "v1.37.2") == [
        ("k8s.io/api", "v0.37.2"),
        ("k8s.io/client-go", "v0.37.2"),
        ("k8s.io/kube-scheduler", "v0.37.2"),
    ]


def test_a_go_mod_without_staging_replaces_is_an_error() -> None:
    with pytest.raises(build.BuildError, match="no staging replaces"):
        build.staging_replaces("module k8s.io/kubernetes\n", "v1.37.2")
    with pytest.raises(build.BuildError, match=r"not a v1\.x\.y version"):
        build.staging_replaces(KUBE_GO_MOD, "v2.0.0")


def test_the_real_go_mod_replaces_every_staging_module() -> None:
    mod = Path.home() / "go/pkg/mod/cache/download/k8s.io/kubernetes/@v/v1.37.2.mod"
    gomodcache = os.environ.get("GOMODCACHE")
    if gomodcache:
        mod = Path(gomodcache) / "cache/download/k8s.io/kubernetes/@v/v1.37.2.mod"
    if not mod.is_file():
        pytest.skip(f"k8s.io/kubernetes v1.37.2 is not in the module cache ({mod})")
    replaces = dict(build.staging_replaces(mod.read_text(encoding="utf-8"), "v1.37.2"))
    # Modules the control plane's programs import, each a staging module of Kubernetes.
    for module in (
        "k8s.io/api",
        "k8s.io/apiserver",
        "k8s.io/client-go",
        "k8s.io/dynamic-resource-allocation",
        "k8s.io/kube-scheduler",
        "k8s.io/kubectl",
    ):
        assert replaces[module] == "v0.37.2"
    assert set(replaces.values()) == {"v0.37.2"}


@pytest.mark.parametrize(
    ("output", "module"),
    [
        (
            "go: k8s.io/externaljwt@v0.37.2: reading https://proxy.example/k8s.io/externaljwt/"
            "@v/v0.37.2.mod: 404 Not Found",
            "k8s.io/externaljwt@v0.37.2",
        ),
        (
            "go: downloading k8s.io/api v0.37.2\n"
            "verifying github.com/foo/bar@v1.0.0: checksum mismatch\n"
            "go: github.com/foo/bar@v1.0.0: missing go.sum entry",
            "github.com/foo/bar@v1.0.0",
        ),
        ("# k8s.io/kubernetes/cmd/kube-apiserver\nlink: out of memory", None),
    ],
)
def test_a_failure_names_the_module_go_named(output: str, module: str | None) -> None:
    assert build._failing_module(output) == module


def _fake_bin(root: Path, *, stamp: dict[str, str]) -> Path:
    bin_dir = root / upstream.VERSION / "bin"
    bin_dir.mkdir(parents=True)
    for name in upstream.BINARIES:
        path = bin_dir / name
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    (bin_dir / "BUILDINFO.json").write_text(json.dumps(stamp))
    return bin_dir


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60
    )


def test_a_second_run_with_the_binaries_present_does_nothing(tmp_path: Path) -> None:
    stamp = {"kubernetes": upstream.VERSION, "inputs": build._inputs_digest()}
    bin_dir = _fake_bin(tmp_path / "cache", stamp=stamp)
    # A `go` that fails: the run must not need it for anything but finding it.
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "go").write_text("#!/bin/sh\necho 'go must not run' >&2\nexit 1\n")
    (tools / "go").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tools}:/usr/bin:/bin",
        "GPUSHIFT_UPSTREAM": str(tmp_path / "cache"),
    }
    started = time.monotonic()
    proc = _run(env)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 10
    assert proc.stdout.splitlines()[-1] == str(bin_dir)
    assert "nothing to do" in proc.stdout


def test_changed_inputs_mean_a_rebuild(tmp_path: Path) -> None:
    # A stamp from other inputs (an older go.mod) is not up to date: the run goes on to Go,
    # which fails here, and says so in one line naming the step.
    _fake_bin(tmp_path / "cache", stamp={"kubernetes": upstream.VERSION, "inputs": "other"})
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "go").write_text(
        "#!/bin/sh\necho 'go: k8s.io/api@v0.37.2: 404 Not Found' >&2\nexit 1\n"
    )
    (tools / "go").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tools}:/usr/bin:/bin",
        "GPUSHIFT_UPSTREAM": str(tmp_path / "cache"),
    }
    proc = _run(env)
    assert proc.returncode == 1
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 1
    assert errors[0].startswith("make upstream: download failed; failing module k8s.io/api@v0.37.2")


def test_without_go_the_build_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/nonexistent", "GPUSHIFT_UPSTREAM": str(tmp_path)}
    proc = _run(env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "make upstream: go is not on PATH (Go 1.26 or newer builds the control plane)"
    )


def test_the_cache_is_per_version_under_the_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(upstream.CACHE_ENV, str(tmp_path))
    assert upstream.bin_dir() == tmp_path / "v1.37.2" / "bin"
    monkeypatch.delenv(upstream.CACHE_ENV)
    assert upstream.bin_dir() == Path.home() / ".cache/gpushift/upstream/v1.37.2/bin"
    with pytest.raises(upstream.NotBuiltError, match=r"run `make upstream`"):
        upstream.ControlPlane.binaries(tmp_path / "empty")
