"""Whole repositories: their own roots, a synthetic root's default source, what the twin
assumes healthy, and placeholder Secrets (Flux on a store, no cluster agents)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.twin.flux.conftest import ready_condition, wait_for

from gpushift._errors import UsageError
from gpushift._kinds import by_kind
from gpushift_twin import Store, new_store
from gpushift_twin.cluster import VirtualClock
from gpushift_twin.flux import Flux, bootstrap
from gpushift_twin.flux._roots import find_roots

KS = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"
CHILD = KS + (
    "metadata: {{name: {name}, namespace: flux-system}}\n"
    "spec:\n  interval: 1h\n  path: {path}\n  prune: true\n{extra}"
)
ROOT = (
    KS
    + """\
metadata: {name: cluster-apps, namespace: flux-system}
spec:
  interval: 1h
  path: ./kubernetes/apps
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
  patches:
    - patch: |-
        apiVersion: kustomize.toolkit.fluxcd.io/v1
        kind: Kustomization
        metadata:
          name: _
        spec:
          sourceRef: {kind: GitRepository, name: flux-system, namespace: flux-system}
          postBuild:
            substitute: {GREETING: hello}
      target:
        group: kustomize.toolkit.fluxcd.io
        kind: Kustomization
"""
)
CM = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n"
    "data: {data}\n"
)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _get(store: Store, kind: str, name: str, ns: str | None = None) -> dict[str, Any] | None:
    for o in store.list(by_kind(kind), namespace=ns).objects:
        if o["metadata"]["name"] == name:
            return o
    return None


def _ready(store: Store, name: str) -> dict[str, Any]:
    return ready_condition(_get(store, "Kustomization", name, "flux-system"))


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[Store, VirtualClock]]:
    store = new_store()
    clock = VirtualClock(time_scale=200.0)
    store.clock = clock.now
    yield store, clock


def _run(store: Store, clock: VirtualClock, **kw: Any) -> Flux:
    return Flux(store, clock=clock, lenient=True, **kw).start()


# --- root detection ---------------------------------------------------------------------------


def test_the_cluster_template_root_is_found_with_its_patches(tmp_path: Path) -> None:
    repo = _write(tmp_path, {"kubernetes/flux/cluster/ks.yaml": ROOT, "kubernetes/apps/x.yaml": ""})
    roots = find_roots(repo)
    assert roots is not None and roots.origin == "kubernetes/flux/cluster/ks.yaml"
    (root,) = roots.kustomizations
    assert root["metadata"]["name"] == "cluster-apps"
    assert root["spec"]["patches"][0]["target"]["kind"] == "Kustomization"
    assert roots.git["metadata"] == {
        "name": "flux-system",
        "namespace": "flux-system",
        "annotations": {"kustomize.toolkit.fluxcd.io/reconcile": "disabled"},
    }
    assert roots.git["spec"]["url"] == f"file://{repo.resolve()}"


GOTK_SYNC = """\
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: flux-system, namespace: flux-system}
spec:
  interval: 1m0s
  ref: {branch: main}
  secretRef: {name: flux-system}
  url: ssh://git@github.com/example/fleet
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: flux-system, namespace: flux-system}
spec:
  interval: 10m0s
  path: ./clusters/%s
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
"""


def test_a_bootstrapped_cluster_root_replaces_the_remote_with_the_directory(
    tmp_path: Path,
) -> None:
    repo = _write(tmp_path, {"clusters/home/flux-system/gotk-sync.yaml": GOTK_SYNC % "home"})
    roots = find_roots(repo)
    assert roots is not None and roots.origin == "clusters/home/flux-system/gotk-sync.yaml"
    assert roots.kustomizations[0]["spec"]["path"] == "./clusters/home"
    # No credentials, no remote ref: the local directory is the source.
    assert roots.git["spec"] == {"interval": "1m0s", "url": f"file://{repo.resolve()}"}


CLUSTER_YAML = """\
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: home-kubernetes, namespace: flux-system}
spec:
  interval: 30m
  url: https://github.com/example/homecluster.git
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: cluster, namespace: flux-system}
spec:
  interval: 30m
  path: ./kubernetes/flux
  sourceRef: {kind: GitRepository, name: home-kubernetes}
"""
APPS_YAML = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: cluster-gitops-apps, namespace: flux-system}
spec:
  path: ./kubernetes/apps
  sourceRef: {kind: GitRepository, name: fuzzlab-gitops}
"""


def test_the_older_templates_roots_keep_the_repositorys_own_source_name(tmp_path: Path) -> None:
    # gelato/homecluster and tparker00/home-ops: kubernetes/flux/config/cluster.yaml, whose
    # `cluster` applies kubernetes/flux and so apps.yaml's cluster-apps on the same source.
    repo = _write(
        tmp_path / "a",
        {
            "kubernetes/flux/config/cluster.yaml": CLUSTER_YAML,
            "kubernetes/flux/apps.yaml": APPS_YAML.replace(
                "name: fuzzlab-gitops", "name: home-kubernetes"
            ).replace("cluster-gitops-apps", "cluster-apps"),
        },
    )
    roots = find_roots(repo)
    assert roots is not None and roots.origin == "kubernetes/flux/config/cluster.yaml"
    assert [k["metadata"]["name"] for k in roots.kustomizations] == ["cluster"]
    assert roots.git["metadata"]["name"] == "home-kubernetes"
    assert roots.git["spec"] == {"interval": "30m", "url": f"file://{repo.resolve()}"}
    # sepffuzzball/fuzzlab-gitops: kubernetes/flux/apps.yaml alone, nothing in the tree applies
    # it; a partial tree (gitops.cluster_roots finds no root), so the twin makes its own.
    repo = _write(tmp_path / "b", {"kubernetes/flux/apps.yaml": APPS_YAML})
    assert find_roots(repo) is None


def test_several_bootstrapped_clusters_need_a_choice(tmp_path: Path) -> None:
    repo = _write(
        tmp_path,
        {
            "clusters/home/flux-system/gotk-sync.yaml": GOTK_SYNC % "home",
            "clusters/lab/flux-system/gotk-sync.yaml": GOTK_SYNC % "lab",
        },
    )
    with pytest.raises(UsageError, match=r"2 clusters \(home, lab\).*--root ./clusters/<name>"):
        find_roots(repo)
    roots = find_roots(repo, root="./clusters/lab")
    assert roots is not None and roots.kustomizations[0]["spec"]["path"] == "./clusters/lab"
    assert find_roots(_write(tmp_path / "plain", {"apps/a.yaml": ""})) is None


def test_the_repositorys_root_patches_its_children(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    store, clock = env
    repo = _write(
        tmp_path,
        {
            "kubernetes/flux/cluster/ks.yaml": ROOT,
            # The child has no sourceRef of its own: the root's patch gives it one.
            "kubernetes/apps/ks.yaml": CHILD.format(name="app", path="./kubernetes/app", extra=""),
            "kubernetes/app/cm.yaml": CM.format(name="greeting", data="{text: '${GREETING}'}"),
        },
    )
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./kubernetes/apps", roots=find_roots(repo))
        wait_for(lambda: _ready(store, "app").get("status") == "True", what="the child")
        assert _get(store, "ConfigMap", "greeting", "default")["data"] == {"text": "hello"}  # type: ignore[index]
        assert "synthetic root" not in _ready(store, "app")["message"]
    finally:
        flux.stop()


def test_a_synthetic_root_defaults_a_missing_source_and_says_so(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    store, clock = env
    repo = _write(
        tmp_path,
        {
            "kubernetes/apps/ks.yaml": CHILD.format(name="app", path="./kubernetes/app", extra=""),
            "kubernetes/app/cm.yaml": CM.format(name="a", data="{k: v}"),
        },
    )
    flux = _run(store, clock, default_source=("flux-system", "flux-system"))
    try:
        bootstrap(store, directory=repo, path="./kubernetes/apps")
        cond = wait_for(
            lambda: _ready(store, "app").get("status") == "True" and _ready(store, "app")
        )
        assert cond["message"].endswith(
            "; spec.sourceRef is not set: the twin's synthetic root stands in for the "
            "repository's own, so GitRepository/flux-system/flux-system was used"
        )
    finally:
        flux.stop()


# --- assumed healthy --------------------------------------------------------------------------

HEALTH = """\
  healthChecks:
    - {apiVersion: ceph.rook.io/v1, kind: CephCluster, name: rook-ceph, namespace: default}
    - {apiVersion: apps/v1, kind: Deployment, name: rook-ceph-operator, namespace: default}
  timeout: 2m
  sourceRef: {kind: GitRepository, name: flux-system}
"""
HR = """\
apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: rook, namespace: default}
spec: {interval: 1h, url: https://charts.rook.io/release}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: rook-ceph, namespace: default}
spec:
  interval: 1h
  chart:
    spec:
      chart: rook-ceph
      sourceRef: {kind: HelmRepository, name: rook}
"""


def _health_repo(tmp_path: Path) -> Path:
    return _write(
        tmp_path,
        {
            "clusters/ks.yaml": CHILD.format(name="storage", path="./storage", extra=HEALTH)
            + "---\n"
            + CHILD.format(
                name="apps",
                path="./apps",
                extra="  dependsOn: [{name: storage}]\n"
                "  sourceRef: {kind: GitRepository, name: flux-system}\n",
            ),
            "storage/hr.yaml": HR,
            "apps/cm.yaml": CM.format(name="after-storage", data="{k: v}"),
        },
    )


def test_what_the_twin_does_not_model_is_assumed_healthy_and_dependents_run(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    store, clock = env
    repo = _health_repo(tmp_path)
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./clusters")
        cond = wait_for(
            lambda: _ready(store, "storage").get("status") == "True" and _ready(store, "storage"),
            what="storage Ready",
        )
        assert cond["reason"] == "ReconciliationSucceeded"
        # No CRD serves CephCluster; the operator Deployment is the unmodelled chart's.
        assert cond["message"].endswith(
            "; assumed healthy: CephCluster is not modelled, Deployment/default/"
            "rook-ceph-operator is not modelled (it would come from chart rook-ceph)"
        )
        wait_for(lambda: _get(store, "ConfigMap", "after-storage", "default"), what="the dependent")
    finally:
        flux.stop()


def test_strict_health_keeps_failing_what_the_twin_does_not_model(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    store, clock = env
    repo = _health_repo(tmp_path)
    flux = _run(store, clock, strict_health=True)
    try:
        bootstrap(store, directory=repo, path="./clusters")
        cond = wait_for(
            lambda: (
                _ready(store, "storage").get("reason") == "HealthCheckFailed"
                and _ready(store, "storage")
            ),
            timeout=30,
            what="the health check to time out",
        )
        assert cond["message"] == (
            "health check failed after 2m0s: timeout waiting for: "
            "[CephCluster/default/rook-ceph status: 'NotFound', "
            "Deployment/default/rook-ceph-operator status: 'NotFound']"
        )
        assert _get(store, "ConfigMap", "after-storage", "default") is None
    finally:
        flux.stop()


# --- placeholder Secrets ----------------------------------------------------------------------

SECRETS = """\
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: plex, namespace: default}
spec:
  secretStoreRef: {kind: ClusterSecretStore, name: onepassword}
  target:
    name: plex-secret
    template:
      type: kubernetes.io/dockerconfigjson
      data: {.dockerconfigjson: "{{ .auth }}"}
  data:
    - secretKey: PLEX_CLAIM
      remoteRef: {key: plex, property: claim}
---
apiVersion: v1
kind: Secret
metadata: {name: sealed, namespace: default}
stringData:
  password: ENC[AES256_GCM,data:abc,type:str]
sops:
  age:
    - recipient: age1xyz
  mac: ENC[AES256_GCM,data:def]
"""


def test_external_and_sops_secrets_become_placeholder_secrets(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    store, clock = env
    repo = _write(tmp_path, {"app/secrets.yaml": SECRETS})
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./app")
        made = wait_for(lambda: _get(store, "Secret", "plex-secret", "default"), what="the Secret")
        assert made["type"] == "kubernetes.io/dockerconfigjson"
        assert sorted(made["data"]) == [".dockerconfigjson", "PLEX_CLAIM"]
        assert base64.b64decode(made["data"]["PLEX_CLAIM"]) == b"twin-placeholder"
        assert made["metadata"]["annotations"]["twin.gpushift.io/placeholder"] == (
            "ExternalSecret/default/plex"
        )
        sealed = wait_for(
            lambda: _get(store, "Secret", "sealed", "default"), what="the SOPS Secret"
        )
        assert "sops" not in sealed
        # The value check substitutes from the same Secret (flux.ENCRYPTED_VALUE).
        assert base64.b64decode(sealed["data"]["password"]) == b"sops-encrypted"
        assert sealed["metadata"]["annotations"]["twin.gpushift.io/placeholder"] == "sops"
    finally:
        flux.stop()


def test_a_kustomization_of_a_remote_repository_is_assumed_healthy(
    env: tuple[Store, VirtualClock], tmp_path: Path
) -> None:
    store, clock = env
    remote = (
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\n"
        "metadata: {name: fleet, namespace: flux-system}\n"
        "spec: {interval: 1h, url: 'ssh://git@github.com/example/fleet.git'}\n"
    )
    repo = _write(
        tmp_path,
        {
            "clusters/git.yaml": remote,
            "clusters/ks.yaml": CHILD.format(
                name="fleet-sync",
                path="./",
                extra="  sourceRef: {kind: GitRepository, name: fleet}\n",
            ),
        },
    )
    flux = _run(store, clock)
    try:
        bootstrap(store, directory=repo, path="./clusters")
        cond = wait_for(
            lambda: (
                _ready(store, "fleet-sync").get("status") == "True" and _ready(store, "fleet-sync")
            ),
            what="the Kustomization",
        )
        assert cond["message"] == (
            "Applied nothing; assumed healthy: GitRepository/flux-system/fleet is not modelled "
            "(a remote repository)"
        )
        git = ready_condition(_get(store, "GitRepository", "fleet", "flux-system"))
        assert git["status"] == "True"
        assert git["message"].startswith("assumed healthy: GitRepository ssh://git@github.com/")
    finally:
        flux.stop()


GELATO = Path(__file__).resolve().parents[4] / "shared/fixtures/full/gelato__homecluster"


def test_the_older_cluster_template_root() -> None:
    # kubernetes/flux/config/cluster.yaml: GitRepository flux-system/home-kubernetes and the
    # Kustomization flux-system/cluster (path ./kubernetes/flux, substituting from
    # cluster-settings and cluster-secrets).
    roots = find_roots(GELATO)
    assert roots is not None
    assert roots.origin == "kubernetes/flux/config/cluster.yaml"
    assert roots.git["metadata"]["name"] == "home-kubernetes"
    assert roots.git["metadata"]["namespace"] == "flux-system"
    assert roots.git["spec"]["url"] == f"file://{GELATO.resolve()}"
    assert "ref" not in roots.git["spec"]
    [ks] = roots.kustomizations
    assert (ks["metadata"]["name"], ks["spec"]["path"]) == ("cluster", "./kubernetes/flux")
    assert [r["name"] for r in ks["spec"]["postBuild"]["substituteFrom"]] == [
        "cluster-settings",
        "cluster-secrets",
    ]
