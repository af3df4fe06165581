"""The repository's GPU summary (``summarize``)."""

from __future__ import annotations

from gpushift.gitops._model import Repo, Summary


def summarize(repo: Repo) -> Summary:
    """The GPU summary of ``repo``: active allocator, sharing mode, consumers, classes."""
    raise NotImplementedError
