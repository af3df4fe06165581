"""Flux inside the twin, so a real GitOps repository runs on it.

source-controller (a GitRepository backed by a local directory or a git ref of a local
repository; OCIRepository and HelmRepository Ready without network), kustomize-controller
(build, substitute, apply with field manager ``kustomize-controller``, prune, dependsOn,
health checks, force) and helm-controller (the chart models of ``gpushift_twin.charts``) run
on the cluster's virtual clock::

    repo = render.write_example(tmp / "repo")
    with run_gitops(example("homelab"), directory=repo, time_scale=200) as (twin, cluster, flux):
        ...  # kubectl --kubeconfig twin.kubeconfig get ks,hr -A

``kubectl kustomize`` outputs are kept by the content of what each build reads; with
``BUILD_CACHE_ENV`` (``GPUSHIFT_TWIN_BUILD_CACHE``) naming a directory, twins in separate
processes share them there.
"""

import lazy_loader

# The names of __init__.pyi, each imported from its module on first use: a command that
# needs one room does not import the others (docs/decisions.md, lazy packages).
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
