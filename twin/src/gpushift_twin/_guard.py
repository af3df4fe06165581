"""The twin-only commands' guard: they act only on a server that says it is a twin."""

from __future__ import annotations

from gpushift.common import InputError
from gpushift.kube import Kube, KubeError
from gpushift_twin.apiserver import TWIN_MARKER, TWIN_MARKER_PATH


def require_twin(client: Kube) -> None:
    """Return if the server answers the twin's discovery marker (``/twin/v1``), else refuse.

    ``twin git-set`` re-points a GitRepository at a local directory: on a real cluster that a
    merged kubeconfig happens to name, that would be a real change. So anything that is not a
    twin is refused before any request that could change it.

    Raises:
        InputError: the server is not a twin (exit 2).
        KubeError: the server could not be reached.
    """
    try:
        marker = client.get_path(TWIN_MARKER_PATH)
    except KubeError as err:
        if err.code == 0:
            raise
        marker = {}
    if marker.get("kind") != TWIN_MARKER["kind"] or marker.get("twin") is not True:
        raise InputError(
            f"{client.server} is not a gpushift twin (it does not serve {TWIN_MARKER_PATH}); "
            "twin commands act only on a twin"
        )
