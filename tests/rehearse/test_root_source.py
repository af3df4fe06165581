"""The GitRepository a rehearsal's merge moves is the one the repository's roots read.

The older cluster templates' root (``kubernetes/flux/config/cluster.yaml``) reads its own
GitRepository, ``home-kubernetes``; an app that reads ``flux-system`` makes the twin serve
that name too, from the same directory. Moving ``flux-system`` would leave the roots on the
old tree (gelato/homecluster's cutover then waited at the merge for a revision that never
came).
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.twin.flux.conftest import serve_repo

from gpushift import kube
from gpushift_twin.rehearse._run import root_source

CLUSTER = """\
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: home-kubernetes, namespace: flux-system}
spec:
  interval: 30m
  url: https://github.com/example/home-kubernetes.git
  ref: {branch: main}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: cluster, namespace: flux-system}
spec:
  interval: 30m
  path: ./kubernetes/flux
  prune: true
  sourceRef: {kind: GitRepository, name: home-kubernetes}
"""
APPS = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: cluster-apps, namespace: flux-system}
spec:
  interval: 30m
  path: ./kubernetes/apps
  prune: true
  sourceRef: {kind: GitRepository, name: home-kubernetes}
"""
OTHER = """\
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: other, namespace: flux-system}
spec:
  interval: 30m
  path: ./kubernetes/apps/other/app
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
"""
NODES = "nodes:\n- name: n\n  gpus: [{product: NVIDIA L4}]\n"
GIT = kube.ResourceRef.named("GitRepository", "source.toolkit.fluxcd.io/v1")


def test_the_merge_moves_the_source_the_roots_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    files = {
        "kubernetes/flux/config/cluster.yaml": CLUSTER,
        "kubernetes/flux/apps.yaml": APPS,
        "kubernetes/apps/other/ks.yaml": OTHER,
        "kubernetes/apps/other/app/configmap.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: default}\n"
        ),
    }
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    with serve_repo(tmp_path, repo, NODES) as (kc, _err):
        deadline = time.monotonic() + 60
        names: set[str] = set()
        while time.monotonic() < deadline and names != {"home-kubernetes", "flux-system"}:
            with kube.connect(kubeconfig=kc) as client:
                names = {r["metadata"]["name"] for r in client.list(GIT)}
            time.sleep(0.2)
        assert names == {"home-kubernetes", "flux-system"}
        assert root_source(kc) == "flux-system/home-kubernetes"
