"""A twin's objects as one ``v1`` List (``gpushift twin export``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpushift._errors import UsageError
from gpushift.twin.apiserver import as_list, load, new_store


def export(*, kubeconfig: Path | None = None, state: Path | None = None) -> dict[str, Any]:
    """Every object of a twin as one ``v1`` List: a running twin read through ``kubeconfig``,
    or a saved ``state`` file.

    Raises ``UsageError`` unless exactly one source is given, ``InputError`` for an unreadable
    or invalid state file, and ``kube.KubeError`` when the running twin cannot be read.
    """
    if (kubeconfig is None) == (state is None):
        raise UsageError("give exactly one of --kubeconfig and --state")
    if state is not None:
        store = new_store()
        load(store, state)
        return as_list(store)
    from gpushift import kube  # only a running twin needs the client

    with kube.connect(kubeconfig=kubeconfig) as client:
        return kube.export_all(client)
