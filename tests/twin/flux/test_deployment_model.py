"""What check considers deployed is what the twin applies: every whole repository.

The twin's side is ``deployment.twin_applies`` (the functions its kustomize-controller
runs); check's is ``Repo.deployed()``. Then one test per way they used to differ, each on a
repository written here, run on the twin's Flux (a store, no cluster agents), with the
expectation read from the files by hand.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.twin.flux.conftest import wait_for
from tests.twin.flux.deployment import twin_applies
from tests.twin.flux.test_roots_and_health import _get, _ready, _run, _write

from gpushift.flux import breaks_yaml
from gpushift.gitops import load_repo
from gpushift_twin import Store, new_store
from gpushift_twin.cluster import VirtualClock
from gpushift_twin.flux import bootstrap
from gpushift_twin.flux._roots import find_roots

PROJECT = Path(__file__).resolve().parents[3]
FULL = PROJECT.parent / "shared/fixtures/full"
#: Whole repositories: the shared whole clusters, the embedded example, the rules' trees
#: without Argo CD (the twin runs Flux only).
WHOLE = [
    *(FULL / name for name in ("LukeEvansTech__talos-cluster", "gelato__homecluster")),
    FULL / "tparker00__home-ops",
    PROJECT / "examples/homelab-repo",
    *(PROJECT / "tests/rules/repos" / name for name in ("two-plugins", "mps", "crd-consumers")),
]


# Luke's 246 Kustomizations are a `kubectl kustomize` each (the build cache keeps them).
pytestmark = [pytest.mark.slow(seconds=150)]


def test_a_cluster_without_its_bootstrap_differs_only_by_its_roots() -> None:
    # sepffuzzball/fuzzlab-gitops holds kubernetes/flux/apps.yaml (cluster-gitops-apps) but
    # not the bootstrap that applies kubernetes/flux, nor the GitRepository and
    # substituteFrom objects it reads: a partial tree. check takes what nothing in it
    # deploys as roots (cluster-gitops-apps and the HelmRepositories of
    # kubernetes/flux/repositories); the twin makes its root for kubernetes/apps. Below
    # kubernetes/apps both deploy the same.
    repo = FULL / "sepffuzzball__fuzzlab-gitops"
    if not repo.is_dir():
        pytest.fail(f"fixture repository missing: {repo}")
    loaded = load_repo([repo])
    assert not loaded.find("GitRepository", "fuzzlab-gitops")
    files = {(o.api_version, o.kind, o.namespace, o.name): o.source.path for o in loaded.objects}
    twin = set(twin_applies(repo))
    check = set(loaded.deployed())
    assert twin - check == set()
    assert {files[i] for i in check - twin} == {"kubernetes/flux/apps.yaml"} | {
        files[i] for i in check - twin if files[i].startswith("kubernetes/flux/repositories/")
    }
    assert any(kind == "Kustomization" for _, kind, _, _ in check - twin)


@pytest.mark.parametrize("repo", WHOLE, ids=lambda p: p.name)
def test_check_deploys_what_the_twin_applies(repo: Path) -> None:
    if not repo.is_dir():
        pytest.fail(f"fixture repository missing: {repo}")
    twin = set(twin_applies(repo))
    check = set(load_repo([repo]).deployed())
    assert sorted(check - twin, key=str) == []
    assert sorted(twin - check, key=str) == []


# --- the differences, one repository each ---------------------------------------------------


@pytest.fixture
def env() -> Iterator[tuple[Store, VirtualClock]]:
    store = new_store()
    clock = VirtualClock(time_scale=200.0)
    store.clock = clock.now
    yield store, clock


KS = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
GIT = """\
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: home-kubernetes, namespace: flux-system}
spec: {interval: 30m, url: "https://example.org/home.git", ref: {branch: main}}
"""


def _ks(name: str, path: str, extra: str = "", source: str = "home-kubernetes") -> str:
    return KS + (
        f"metadata: {{name: {name}, namespace: flux-system}}\n"
        f"spec:\n  interval: 1h\n  path: {path}\n  prune: true\n"
        f"  sourceRef: {{kind: GitRepository, name: {source}}}\n{extra}"
    )


SETTINGS = "  postBuild:\n    substituteFrom:\n      - {kind: ConfigMap, name: cluster-settings}\n"
#: The older cluster templates: `cluster` (applied by hand) syncs kubernetes/flux, its own
#: directory, substituting from kubernetes/flux/vars, which it also applies.
SELF_SYNC = {
    "kubernetes/flux/config/kustomization.yaml": "resources: [./cluster.yaml]\n",
    "kubernetes/flux/config/cluster.yaml": GIT
    + "---\n"
    + _ks("cluster", "./kubernetes/flux", SETTINGS),
    "kubernetes/flux/vars/kustomization.yaml": "resources: [./cluster-settings.yaml]\n",
    "kubernetes/flux/vars/cluster-settings.yaml": (
        "apiVersion: v1\nkind: ConfigMap\n"
        "metadata: {name: cluster-settings, namespace: flux-system}\n"
        "data: {TIMEZONE: Europe/Paris}\n"
    ),
    "kubernetes/flux/apps.yaml": _ks("cluster-apps", "./kubernetes/apps", SETTINGS),
    "kubernetes/apps/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tz, namespace: default}\n"
        "data: {tz: '${TIMEZONE}'}\n"
    ),
}


def test_a_self_syncing_root_runs_with_the_variables_its_bootstrap_applies(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    # The twin used to find no root here and make its own; the children, reading
    # home-kubernetes, then had no source. Now `cluster` is the root, cluster-settings is
    # applied before it (it cannot substitute without), and the timezone reaches the app.
    store, clock = env
    repo = _write(tmp_path, SELF_SYNC)
    roots = find_roots(repo)
    assert roots is not None and roots.origin == "kubernetes/flux/config/cluster.yaml"
    assert [v["metadata"]["name"] for v in roots.variables] == ["cluster-settings"]
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./kubernetes/apps", roots=roots)
        wait_for(lambda: _ready(store, "cluster-apps").get("status") == "True", what="apps")
        assert _ready(store, "cluster").get("status") == "True"
        assert _get(store, "ConfigMap", "tz", "default")["data"] == {"tz": "Europe/Paris"}  # type: ignore[index]
    finally:
        flux.stop()


def test_without_post_build_a_variable_is_applied_as_written(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    # kustomize-controller substitutes only when spec.postBuild is set.
    store, clock = env
    files = {
        "kubernetes/apps/ks.yaml": _ks("app", "./kubernetes/app", source="flux-system"),
        "kubernetes/app/cm.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: raw, namespace: default}\n"
            "data: {domain: '${SECRET_DOMAIN}'}\n"
        ),
    }
    repo = _write(tmp_path, files)
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./kubernetes/apps")
        wait_for(lambda: _ready(store, "app").get("status") == "True", what="the app")
        assert _get(store, "ConfigMap", "raw", "default")["data"] == {"domain": "${SECRET_DOMAIN}"}  # type: ignore[index]
    finally:
        flux.stop()
    assert ("v1", "ConfigMap", "default", "raw") in load_repo([repo]).deployed()


def test_an_object_without_a_namespace_fails_its_kustomization(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    # Nothing sets the HelmRepository's namespace: kustomize-controller applies none of the
    # Kustomization ("HelmRepository/charts namespace not specified"), and check agrees.
    store, clock = env
    files = {
        "clusters/home/flux-system/gotk-sync.yaml": _ks(
            "flux-system", "./clusters/home", source="flux-system"
        ),
        "clusters/home/apps.yaml": _ks("apps", "./apps", source="flux-system"),
        "apps/kustomization.yaml": "resources: [./repo.yaml, ./cm.yaml]\n",
        "apps/repo.yaml": (
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\n"
            "metadata: {name: charts}\nspec: {interval: 1h, url: https://example.org}\n"
        ),
        "apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: a}\n",
    }
    repo = _write(tmp_path, files)
    flux = _run(store, clock, whole=True)
    try:
        bootstrap(store, directory=repo, path="./apps", roots=find_roots(repo))
        cond = wait_for(
            lambda: _ready(store, "apps").get("status") == "False" and _ready(store, "apps"),
            what="the failed apply",
        )
        assert cond["message"] == "HelmRepository/charts namespace not specified"
        assert _get(store, "ConfigMap", "c", "a") is None
    finally:
        flux.stop()
    deployed = load_repo([repo]).deployed()
    assert not any(kind in ("ConfigMap", "HelmRepository") for _, kind, _, _ in deployed)


def test_a_source_the_repository_does_not_define_is_the_repository(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    # `home` is read but defined nowhere (the bootstrap made it): check builds its path
    # from this tree, and the twin serves it from the same directory.
    store, clock = env
    files = {
        "kubernetes/apps/ks.yaml": _ks("app", "./kubernetes/app", source="home"),
        "kubernetes/app/cm.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: here, namespace: default}\n"
        ),
    }
    repo = _write(tmp_path, files)
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./kubernetes/apps")
        wait_for(lambda: _ready(store, "app").get("status") == "True", what="the app")
        assert _get(store, "ConfigMap", "here", "default") is not None
        home = _get(store, "GitRepository", "home", "flux-system")
        assert home is not None and home["spec"]["url"] == f"file://{repo.resolve()}"
    finally:
        flux.stop()
    assert ("v1", "ConfigMap", "default", "here") in load_repo([repo]).deployed()


def test_substitution_that_breaks_the_yaml_fails_the_build(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    # `${A},${B}` with neither set is a bare ",", which YAML does not read: BuildFailed.
    store, clock = env
    files = {
        "kubernetes/apps/ks.yaml": _ks(
            "app", "./kubernetes/app", "  postBuild: {substitute: {X: y}}\n", "flux-system"
        ),
        "kubernetes/app/cm.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: nets, namespace: default}\n"
            "data:\n  cidrs: ${A},${B}\n"
        ),
    }
    repo = _write(tmp_path, files)
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./kubernetes/apps")
        cond = wait_for(
            lambda: _ready(store, "app").get("status") == "False" and _ready(store, "app"),
            what="the failed build",
        )
        assert cond["reason"] == "BuildFailed"
        assert cond["message"].startswith("post build failed for 'nets': YAMLToJSON: ")
    finally:
        flux.stop()
    # check agrees: the Kustomization deploys nothing; quoted, the same value reads back.
    assert ("v1", "ConfigMap", "default", "nets") not in load_repo([repo]).deployed()
    assert breaks_yaml({"cidrs": "${A},${B}"}, {"X": "y"}) == "${A},${B}"
    assert breaks_yaml({"cidrs": "'${A},${B}'"}, {}) is None
    assert breaks_yaml({"tz": "${TZ}"}, {"TZ": "Europe/Paris"}) is None
    assert breaks_yaml({"k": "${A}"}, {"A": "{x"}) == "${A}"


def test_sops_values_substitute_alike_in_check_and_the_twin(tmp_path: Path) -> None:
    # A name built from a SOPS-encrypted value: both read it as flux.ENCRYPTED_VALUE.
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: cluster-secrets, namespace: flux-system}\n"
        "stringData: {SECRET_DOMAIN: 'ENC[AES256_GCM,data:abc,type:str]'}\n"
        "sops: {mac: 'ENC[AES256_GCM,data:def]'}\n"
    )
    secrets = "  postBuild:\n    substituteFrom:\n      - {kind: Secret, name: cluster-secrets}\n"
    files = {
        **SELF_SYNC,
        "kubernetes/flux/vars/kustomization.yaml": (
            "resources: [./cluster-settings.yaml, ./cluster-secrets.sops.yaml]\n"
        ),
        "kubernetes/flux/vars/cluster-secrets.sops.yaml": secret,
        "kubernetes/flux/apps.yaml": _ks("cluster-apps", "./kubernetes/apps", secrets),
        "kubernetes/apps/cert.yaml": (
            "apiVersion: cert-manager.io/v1\nkind: Certificate\n"
            "metadata: {name: '${SECRET_DOMAIN/./-}-production', namespace: network}\n"
        ),
    }
    repo = _write(tmp_path, files)
    names = {name for _, kind, _, name in load_repo([repo]).deployed() if kind == "Certificate"}
    assert names == {"sops-encrypted-production"}
    applied = twin_applies(repo)
    assert {name for _, kind, _, name in applied if kind == "Certificate"} == names
    # The twin applies the Secret as decryption would, with the same value.
    secret_obj = applied[("v1", "Secret", "flux-system", "cluster-secrets")]
    assert base64.b64decode(secret_obj["data"]["SECRET_DOMAIN"]) == b"sops-encrypted"
