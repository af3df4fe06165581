"""The twin's ``kubectl kustomize`` outputs, kept by the content of what each build reads: a
copy of a tree elsewhere builds from the cache, a change to anything the build reads builds
again, what cannot be keyed (remote resources, files outside the source) is not kept, and
processes that want the same build at once run kustomize once between them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpushift_twin.flux import BUILD_CACHE_ENV
from gpushift_twin.flux._build import BuildError, build, build_path
from gpushift_twin.flux._buildcache import content_key

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")

KUSTOMIZATION = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: media
resources:
  - ../../common
  - deployment.yaml
patches:
  - path: patch.yaml
configMapGenerator:
  - name: settings
    files:
      - settings.ini
"""
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: plex}
spec:
  replicas: 1
  selector: {matchLabels: {app: plex}}
  template:
    metadata: {labels: {app: plex}}
    spec: {containers: [{name: app, image: plex:1}]}
"""
PATCH = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: plex}
spec: {replicas: 2}
"""
COMMON = """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [service-account.yaml]
"""
ACCOUNT = """\
apiVersion: v1
kind: ServiceAccount
metadata: {name: media-apps}
"""


def _tree(root: Path, *, replicas: int = 2, settings: str = "a=1\n") -> Path:
    app = root / "apps" / "plex"
    app.mkdir(parents=True)
    (app / "kustomization.yaml").write_text(KUSTOMIZATION)
    (app / "deployment.yaml").write_text(DEPLOYMENT)
    (app / "patch.yaml").write_text(PATCH.replace("replicas: 2", f"replicas: {replicas}"))
    (app / "settings.ini").write_text(settings)
    (root / "common").mkdir()
    (root / "common" / "kustomization.yaml").write_text(COMMON)
    (root / "common" / "service-account.yaml").write_text(ACCOUNT)
    (root / "notes").mkdir()
    (root / "notes" / "README.md").write_text("not read by any build\n")
    return root


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A build cache of this test's own, so its file count is this test's builds (the
    process keeps outputs in memory too, so each test's trees hold their own settings)."""
    path = tmp_path / "cache"
    monkeypatch.setenv(BUILD_CACHE_ENV, str(path))
    return path


def _entries(cache: Path) -> int:
    # Kept outputs; the directory also holds one lock file per key claimed.
    return len(list(cache.glob("*.yaml")))


def _key(root: Path) -> str | None:
    return content_key(root / "apps" / "plex", root=root)


def test_a_copy_elsewhere_has_the_same_key_and_each_read_file_changes_it(tmp_path: Path) -> None:
    a = _tree(tmp_path / "a")
    b = _tree(tmp_path / "b")
    assert _key(a) is not None
    assert _key(a) == _key(b)
    # A file no build reads: the same key.
    (b / "notes" / "README.md").write_text("edited\n")
    assert _key(a) == _key(b)
    # The patch, the generator's data and a resource reached through ../../common: each a new key.
    keys = {_key(a)}
    (b / "apps" / "plex" / "patch.yaml").write_text(PATCH.replace("replicas: 2", "replicas: 3"))
    keys.add(_key(b))
    (b / "apps" / "plex" / "settings.ini").write_text("a=2\n")
    keys.add(_key(b))
    (b / "common" / "service-account.yaml").write_text(ACCOUNT.replace("media-apps", "other"))
    keys.add(_key(b))
    assert len(keys) == 4


def test_remote_resources_and_files_outside_the_source_are_not_keyed(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo")
    app = root / "apps" / "plex" / "kustomization.yaml"
    app.write_text(KUSTOMIZATION.replace("  - ../../common", "  - https://example.org/x.yaml"))
    assert _key(root) is None
    # ../../common is outside a source rooted at apps/.
    app.write_text(KUSTOMIZATION)
    assert content_key(root / "apps" / "plex", root=root / "apps") is None


def test_a_copy_builds_from_the_cache_and_a_change_builds_again(
    tmp_path: Path, cache: Path
) -> None:
    a = _tree(tmp_path / "a", settings=f"{tmp_path.name}=1\n")
    b = _tree(tmp_path / "b", settings=f"{tmp_path.name}=1\n")
    objs = build_path(a, "apps/plex", revision="a", lenient=False)
    # Hand-derived: the patch's replicas, the namespace on all three, the generated name.
    by_kind = {o["kind"]: o for o in objs}
    assert set(by_kind) == {"ConfigMap", "Deployment", "ServiceAccount"}
    assert by_kind["Deployment"]["spec"]["replicas"] == 2
    assert {o["metadata"]["namespace"] for o in objs} == {"media"}
    assert by_kind["ConfigMap"]["data"] == {"settings.ini": f"{tmp_path.name}=1\n"}
    assert by_kind["ConfigMap"]["metadata"]["name"].startswith("settings-")
    assert _entries(cache) == 1
    # The same content in another directory and revision: the same objects, no new entry.
    assert build_path(b, "apps/plex", revision="b", lenient=False) == objs
    assert _entries(cache) == 1
    # A changed patch: built again, and the new replicas come through.
    (b / "apps" / "plex" / "patch.yaml").write_text(PATCH.replace("replicas: 2", "replicas: 4"))
    again = build_path(b, "apps/plex", revision="b2", lenient=False)
    assert {o["kind"]: o for o in again}["Deployment"]["spec"]["replicas"] == 4
    assert _entries(cache) == 2


def test_components_are_part_of_the_key(tmp_path: Path, cache: Path) -> None:
    root = _tree(tmp_path / "repo", settings=f"{tmp_path.name}=1\n")
    component = root / "components" / "extra"
    component.mkdir(parents=True)
    (component / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [account.yaml]\n"
    )
    (component / "account.yaml").write_text(ACCOUNT.replace("media-apps", "extra"))
    plain = build(root, "apps/plex", revision="r", lenient=False)
    with_component = build(
        root, "apps/plex", revision="r", lenient=False, components=["../../components/extra"]
    )
    names = {o["metadata"]["name"] for o in with_component if o["kind"] == "ServiceAccount"}
    assert names == {"media-apps", "extra"}
    assert len(with_component) == len(plain) + 1
    assert _entries(cache) == 2


def test_a_failure_is_not_kept_and_names_its_own_directory(tmp_path: Path, cache: Path) -> None:
    roots = [_tree(tmp_path / name, settings=f"{tmp_path.name}=1\n") for name in ("a", "b")]
    for root in roots:
        (root / "apps" / "plex" / "deployment.yaml").unlink()
    for root in roots:
        with pytest.raises(BuildError, match=str(root / "apps" / "plex")):
            build_path(root, "apps/plex", revision=root.name, lenient=False)
    assert not cache.exists() or _entries(cache) == 0


def test_two_processes_wanting_one_build_at_once_run_kustomize_once(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    # A kubectl that logs each kustomize run and takes long enough for both to be waiting.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    runs = tmp_path / "runs.log"
    fake = bin_dir / "kubectl"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {runs}\nsleep 1\nexec {kubectl} "$@"\n')
    fake.chmod(0o755)
    roots = [_tree(tmp_path / name, settings=f"{tmp_path.name}=1\n") for name in ("a", "b")]
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        BUILD_CACHE_ENV: str(tmp_path / "cache"),
    }
    code = (
        "import json, sys; from pathlib import Path;"
        "from gpushift_twin.flux._build import build_path;"
        "print(json.dumps(build_path(Path(sys.argv[1]), 'apps/plex', revision='r', lenient=False)))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True, env=env
        )
        for root in roots
    ]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs[0] == outs[1]
    assert len(runs.read_text().splitlines()) == 1
    assert _entries(tmp_path / "cache") == 1
