"""What a repository puts on the cluster (``Repo.deployed``), one test per way check and
kustomize-controller used to disagree.

Each tree is written here and the expected objects are read from it by hand: which
kustomization sets which namespace, which kinds are cluster-scoped, which files the
cluster's root reaches.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.gitops.test_repo import ks, kustomization, write

from gpushift.flux import read_tree
from gpushift.gitops import cluster_roots, load_repo, namespaced

SECRET = """
apiVersion: v1
kind: Secret
metadata: {name: cluster-secrets}
stringData: {SECRET_DOMAIN: example.org}
"""
COMPONENT = """
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources: [./secret.yaml]
"""
#: A bootstrapped cluster: flux-system syncs clusters/home, which deploys apps/.
ROOT = {
    "clusters/home/flux-system/gotk-sync.yaml": ks("flux-system", "./clusters/home"),
    "clusters/home/apps.yaml": ks("apps", "./apps"),
}


def _namespace_dir(namespace: str, *resources: str) -> str:
    return kustomization(
        *resources,
        extra=f"namespace: {namespace}\ncomponents:\n  - ../../components/common\n",
    )


def test_component_in_every_namespace_is_one_object_per_namespace(tmp_path: Path) -> None:
    # apps/a and apps/b both include components/common; kustomize builds the Secret once
    # for each namespace transformer, so Flux applies a/cluster-secrets and b/cluster-secrets.
    files = {
        **ROOT,
        "components/common/kustomization.yaml": COMPONENT,
        "components/common/secret.yaml": SECRET,
        "apps/kustomization.yaml": kustomization("./a", "./b"),
        "apps/a/kustomization.yaml": _namespace_dir("a", "./cm.yaml"),
        "apps/a/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\n",
        "apps/b/kustomization.yaml": _namespace_dir("b", "./cm.yaml"),
        "apps/b/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\n",
    }
    deployed = load_repo([write(tmp_path, files)]).deployed()
    secrets = {(ns, name) for _, kind, ns, name in deployed if kind == "Secret"}
    assert secrets == {("a", "cluster-secrets"), ("b", "cluster-secrets")}


CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.org}
spec:
  group: example.org
  scope: Cluster
  names: {kind: Widget, plural: widgets}
  versions: [{name: v1, served: true, storage: true}]
"""
OBJECTS = """
apiVersion: example.org/v1
kind: Widget
metadata: {name: w}
---
apiVersion: example.org/v1
kind: Gadget
metadata: {name: g}
---
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata: {name: allow-all}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: letsencrypt}
"""


def test_cluster_scoped_custom_kinds_have_no_namespace(tmp_path: Path) -> None:
    # kustomize's namespace transformer sets `a` on every kind it does not know; the API
    # server drops it for cluster-scoped kinds: Widget (the tree's CRD says Cluster),
    # Cilium's clusterwide policy and cert-manager's ClusterIssuer. Gadget has no CRD here
    # and is namespaced, as kustomize assumes.
    files = {
        **ROOT,
        "apps/kustomization.yaml": kustomization("./crd.yaml", "./a"),
        "apps/crd.yaml": CRD,
        "apps/a/kustomization.yaml": kustomization("./objects.yaml", extra="namespace: a\n"),
        "apps/a/objects.yaml": OBJECTS,
    }
    deployed = load_repo([write(tmp_path, files)]).deployed()
    scoped = {(kind, ns) for _, kind, ns, _ in deployed if kind != "Kustomization"}
    assert scoped == {
        ("CustomResourceDefinition", None),
        ("Widget", None),
        ("Gadget", "a"),
        ("CiliumClusterwideNetworkPolicy", None),
        ("ClusterIssuer", None),
    }
    assert namespaced("example.org/v1", "Widget", crds={("example.org", "Widget"): False}) is False
    assert namespaced("example.org/v1", "Widget") is True


def test_namespace_transformer_renames_the_namespace_object(tmp_path: Path) -> None:
    # A Namespace written as `_` in a kustomization with `namespace: volsync-system` is
    # built (and applied) as Namespace volsync-system.
    files = {
        **ROOT,
        "apps/kustomization.yaml": kustomization("./ns.yaml", extra="namespace: volsync-system\n"),
        "apps/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: _}\n",
    }
    deployed = load_repo([write(tmp_path, files)]).deployed()
    assert ("v1", "Namespace", None, "volsync-system") in deployed
    assert not any(name == "_" for _, _, _, name in deployed)


TALOS_PATCH = """
apiVersion: v1alpha1
kind: VLANConfig
name: bond0.20
"""


def test_files_the_cluster_root_does_not_reach_are_not_deployed(tmp_path: Path) -> None:
    # talos/ and scratch/ are read by talosctl and by nobody: flux-system syncs
    # clusters/home, which deploys apps/ only.
    files = {
        **ROOT,
        "apps/kustomization.yaml": kustomization("./cm.yaml"),
        "apps/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: a}\n",
        "talos/patches/vlan.yaml": TALOS_PATCH,
        "scratch/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: a}\n",
    }
    repo = load_repo([write(tmp_path, files)])
    assert repo.deployed() == {
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "flux-system"),
        ("kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "apps"),
        ("v1", "ConfigMap", "a", "cm"),
    }
    assert {o.name: o.active for o in repo.objects if o.kind in ("VLANConfig", "ConfigMap")} == {
        "": False,
        "cm": True,
        "x": False,
    }


GIT = """
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: home-kubernetes, namespace: flux-system}
spec: {interval: 30m, url: "https://example.org/home.git", ref: {branch: main}}
"""
HOME = {"kind": "GitRepository", "name": "home-kubernetes"}
#: The older cluster templates: `cluster` is applied by hand and syncs kubernetes/flux,
#: which holds its own file (config/cluster.yaml) and cluster-apps.
SELF_SYNC = {
    "kubernetes/flux/config/kustomization.yaml": kustomization("./cluster.yaml"),
    "kubernetes/flux/config/cluster.yaml": GIT
    + "---\n"
    + ks("cluster", "./kubernetes/flux", sourceRef=HOME),
    "kubernetes/flux/apps.yaml": ks("cluster-apps", "./kubernetes/apps", sourceRef=HOME),
    "kubernetes/apps/kustomization.yaml": kustomization("./cm.yaml"),
    "kubernetes/apps/cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: a}\n"
    ),
    "kubernetes/bootstrap/helmfile-values.yaml": textwrap.dedent(
        """\
        apiVersion: v1
        kind: ConfigMap
        metadata: {name: bootstrap-only, namespace: a}
        """
    ),
}


def test_self_syncing_root_is_the_cluster_root(tmp_path: Path) -> None:
    root = write(tmp_path, SELF_SYNC)
    found = cluster_roots(read_tree(root, [root])[0])
    assert [(r.layout, r.origin) for r in found] == [
        ("self-sync", "kubernetes/flux/config/cluster.yaml")
    ]
    assert [d.data["metadata"]["name"] for d in found[0].kustomizations] == ["cluster"]
    assert found[0].git is not None
    assert found[0].git.data["metadata"]["name"] == "home-kubernetes"
    # What the cluster applies starts there: the bootstrap directory is not deployed.
    assert {name for _, kind, _, name in load_repo([root]).deployed()} == {
        "home-kubernetes",
        "cluster",
        "cluster-apps",
        "cm",
    }


def test_partial_tree_has_no_cluster_roots(tmp_path: Path) -> None:
    files = {
        "apps/kustomization.yaml": kustomization("./ks.yaml"),
        "apps/ks.yaml": ks("app", "./apps/app"),
    }
    root = write(tmp_path, files)
    assert cluster_roots(read_tree(root, [root])[0]) == []
