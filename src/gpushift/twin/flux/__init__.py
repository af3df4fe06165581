"""Flux inside the twin, so a real GitOps repository runs on it.

source-controller (a GitRepository backed by a local directory or a git ref of a local
repository; OCIRepository and HelmRepository Ready without network), kustomize-controller
(build, substitute, apply with field manager ``kustomize-controller``, prune, dependsOn,
health checks, force) and helm-controller (the chart models of ``gpushift.twin.charts``) run
on the cluster's virtual clock::

    repo = render.write_example(tmp / "repo")
    with run_gitops(example("homelab"), directory=repo, time_scale=200) as (twin, cluster, flux):
        ...  # kubectl --kubeconfig twin.kubeconfig get ks,hr -A

``kubectl kustomize`` outputs are kept by the content of what each build reads; with
``BUILD_CACHE_ENV`` (``GPUSHIFT_TWIN_BUILD_CACHE``) naming a directory, twins in separate
processes share them there.
"""

from __future__ import annotations

from gpushift.twin.flux._buildcache import CACHE_ENV as BUILD_CACHE_ENV
from gpushift.twin.flux._control import git_set, not_ready, wait_for_kubeconfig, wait_ready
from gpushift.twin.flux._crds import crd
from gpushift.twin.flux._crds import install as install_crds
from gpushift.twin.flux._runner import Flux, bootstrap, run_gitops
from gpushift.twin.flux._serve import read_vars, start_flux
from gpushift.twin.flux._sources import local_path

__all__ = [
    "BUILD_CACHE_ENV",
    "Flux",
    "bootstrap",
    "crd",
    "git_set",
    "install_crds",
    "local_path",
    "not_ready",
    "read_vars",
    "run_gitops",
    "start_flux",
    "wait_for_kubeconfig",
    "wait_ready",
]
