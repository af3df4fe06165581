"""A twin's objects as one ``v1`` List (``gpushift twin export``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpushift.common import UsageError
from gpushift.kube import Access
from gpushift_twin.apiserver import as_list, load, new_store


def export(
    *,
    kubeconfig: Path | None = None,
    state: Path | None = None,
    access: Access | None = None,
) -> dict[str, Any]:
    """Every object of a twin as one ``v1`` List: a running twin reached through ``access``
    (or ``kubeconfig``; it must serve the twin marker), or a saved ``state`` file.

    Raises ``UsageError`` when both or neither source is given, ``InputError`` for an
    unreadable or invalid state file or a server that is not a twin, and ``kube.KubeError``
    when the running twin cannot be read.
    """
    if access is None and kubeconfig is not None:
        access = Access(kubeconfig=kubeconfig)
    if (access is None) == (state is None):
        raise UsageError("give exactly one of --twin (a running twin) and --state")
    if state is not None:
        store = new_store()
        load(store, state)
        return as_list(store)
    from gpushift import kube  # only a running twin needs the client
    from gpushift_twin._guard import require_twin

    assert access is not None
    with kube.connect(
        kubeconfig=access.kubeconfig, context=access.context, check_server=True
    ) as client:
        require_twin(client)
        return kube.export_all(client)
