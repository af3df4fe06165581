"""Type stub of gpushift_twin.flux: its public names, which __init__.py loads on first use."""

from ._buildcache import BUILD_CACHE_ENV
from ._control import (
    NotReady,
    git_set,
    not_ready,
    not_ready_objects,
    wait_for_kubeconfig,
    wait_ready,
)
from ._crds import install_crds
from ._release import modelled, pinned_flux, unserved_apis
from ._runner import Flux, bootstrap, run_gitops
from ._seeds import read_secret
from ._serve import FluxOptions, flux_for, read_vars, start_flux
from ._sources import local_path

__all__ = [
    "BUILD_CACHE_ENV",
    "Flux",
    "FluxOptions",
    "NotReady",
    "bootstrap",
    "flux_for",
    "git_set",
    "install_crds",
    "local_path",
    "modelled",
    "not_ready",
    "not_ready_objects",
    "pinned_flux",
    "read_secret",
    "read_vars",
    "run_gitops",
    "start_flux",
    "unserved_apis",
    "wait_for_kubeconfig",
    "wait_ready",
]
