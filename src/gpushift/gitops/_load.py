"""Reading a Flux repository into the model (``load_repo``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpushift.gitops._model import Repo


def load_repo(paths: Sequence[str | Path]) -> Repo:
    """Read the Flux repository (or partial tree) under ``paths``.

    The first path is the checked directory that ``Source.path`` is relative to (its parent
    for a file). YAML errors do not stop the read: they are collected in ``Repo.errors``.

    Raises InputError when a path does not exist.
    """
    raise NotImplementedError
