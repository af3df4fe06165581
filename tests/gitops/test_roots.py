"""Cluster roots and partial trees: what the walk starts from, and what the summary says.

Each tree is written here; the expectations are read from it by hand (which Kustomization
deploys which, which one nothing deploys).
"""

from __future__ import annotations

from pathlib import Path

from tests.gitops.test_repo import POD, ks, kustomization, write

from gpushift.gitops import load_repo, summarize
from gpushift.rules import run_check

GIT_REPOSITORY = """
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: home-kubernetes, namespace: flux-system}
spec: {interval: 30m, url: "https://example.org/home.git", ref: {branch: main}}
"""
OWN = {"kind": "GitRepository", "name": "home-kubernetes"}

# Two apps as a home-ops `apps/<namespace>` directory holds them, without the cluster root
# that would deploy `apps/` (checking one directory of a larger repository).
APPS = {
    "apps/media/kustomization.yaml": kustomization("./jellyfin/ks.yaml", "./plex/ks.yaml"),
    "apps/media/jellyfin/ks.yaml": ks("jellyfin", "./apps/media/jellyfin/app"),
    "apps/media/jellyfin/app/pod.yaml": POD.format(name="jellyfin", ns="media"),
    "apps/media/plex/ks.yaml": ks("plex", "./apps/media/plex/app"),
    "apps/media/plex/app/pod.yaml": POD.format(name="plex", ns="media"),
}


def test_partial_tree_takes_unreferenced_kustomizations_as_roots(tmp_path: Path) -> None:
    repo = load_repo([write(tmp_path, APPS)])
    assert not repo.cluster_root
    assert sorted((o.kind, o.name) for o in repo.taken_roots) == [
        ("Kustomization", "jellyfin"),
        ("Kustomization", "plex"),
    ]
    assert {w.name: w.active for w in repo.workloads} == {"jellyfin": True, "plex": True}
    assert {c.name for c in summarize(repo).consumers} == {"jellyfin", "plex"}
    assert (
        "roots: 2 unreferenced Kustomizations taken as roots (no cluster root in the tree)"
        in run_check([tmp_path]).to_text()
    )


def test_partial_tree_roots_in_json(tmp_path: Path) -> None:
    summary = summarize(load_repo([write(tmp_path, APPS)])).to_dict()
    assert summary["roots"] == {
        "cluster_root": False,
        "taken": [
            {"kind": "Kustomization", "namespace": "flux-system", "name": "jellyfin"},
            {"kind": "Kustomization", "namespace": "flux-system", "name": "plex"},
        ],
    }
    # Additive: the keys that were there before stay.
    assert {"gpu_stack", "allocator", "consumers", "parked"} <= set(summary)


def test_cluster_root_is_not_a_partial_tree(tmp_path: Path) -> None:
    files = {**APPS, "flux/apps.yaml": ks("cluster-apps", "./apps")}
    repo = load_repo([write(tmp_path, files)])
    assert repo.cluster_root
    summary = summarize(repo)
    assert summary.taken_roots == ()
    assert summary.to_dict()["roots"] == {"cluster_root": True, "taken": []}
    assert "roots:" not in run_check([tmp_path]).to_text()
    assert {w.name: w.active for w in repo.workloads} == {"jellyfin": True, "plex": True}


def test_flux_system_bootstrap_is_a_cluster_root(tmp_path: Path) -> None:
    files = {**APPS, "flux-system/gotk-sync.yaml": ks("flux-system", "./flux-system")}
    assert load_repo([write(tmp_path, files)]).cluster_root


def test_loose_helm_release_taken_as_a_root(tmp_path: Path) -> None:
    release = """
    apiVersion: helm.toolkit.fluxcd.io/v2
    kind: HelmRelease
    metadata: {name: ollama, namespace: ai}
    spec:
      chart: {spec: {chart: ollama, sourceRef: {kind: HelmRepository, name: ollama}}}
    """
    repo = load_repo([write(tmp_path, {"helmrelease.yaml": release})])
    assert not repo.cluster_root
    assert "roots: 1 unreferenced HelmRelease taken as a root (no cluster root in the tree)" in (
        run_check([tmp_path]).to_text()
    )


def test_cluster_root_reading_its_own_repository_under_another_name(tmp_path: Path) -> None:
    # The older cluster templates (gelato/homecluster, tparker00/home-ops): the repository's
    # own GitRepository is `home-kubernetes`, and `cluster` syncs the directory it is written
    # in, which holds `cluster-apps`. Nothing above includes `cluster`: it is the root, and
    # the apps' targetNamespace comes through the chain.
    files = {
        "kubernetes/flux/config/kustomization.yaml": kustomization("./cluster.yaml"),
        "kubernetes/flux/config/cluster.yaml": GIT_REPOSITORY
        + "---\n"
        + ks("cluster", "./kubernetes/flux", sourceRef=OWN),
        "kubernetes/flux/apps.yaml": ks("cluster-apps", "./kubernetes/apps", sourceRef=OWN),
        "kubernetes/apps/media/kustomization.yaml": kustomization("./jellyfin/ks.yaml"),
        "kubernetes/apps/media/jellyfin/ks.yaml": ks(
            "jellyfin", "./kubernetes/apps/media/jellyfin/app", sourceRef=OWN, targetNamespace="tv"
        ),
        "kubernetes/apps/media/jellyfin/app/pod.yaml": POD.format(name="jellyfin", ns="media"),
        # Written but left out of media/kustomization.yaml: switched off.
        "kubernetes/apps/media/plex/ks.yaml": ks(
            "plex", "./kubernetes/apps/media/plex/app", sourceRef=OWN
        ),
        "kubernetes/apps/media/plex/app/pod.yaml": POD.format(name="plex", ns="media"),
    }
    repo = load_repo([write(tmp_path, files)])
    assert repo.cluster_root
    by_name = {k.name: k for k in repo.kustomizations}
    assert by_name["cluster-apps"].directory == "kubernetes/apps"
    assert {w.name: (w.namespace, w.active) for w in repo.workloads} == {
        "jellyfin": ("tv", True),
        "plex": ("media", False),
    }


def test_kustomization_syncing_only_its_own_directory_is_no_cluster_root(tmp_path: Path) -> None:
    # plex's ks.yaml syncs the directory it is written in, which holds no other Kustomization,
    # and media/kustomization.yaml leaves it out: it stays switched off, not a root.
    files = {
        **APPS,
        "apps/media/kustomization.yaml": kustomization("./jellyfin/ks.yaml"),
        "apps/media/plex/ks.yaml": ks("plex", "./apps/media/plex"),
    }
    repo = load_repo([write(tmp_path, files)])
    assert not repo.cluster_root
    assert {w.name: w.active for w in repo.workloads} == {"jellyfin": True, "plex": False}
    assert [o.name for o in repo.taken_roots] == ["jellyfin"]
