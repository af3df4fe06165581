"""The embedded homelab repository: ``gpushift render``'s homelab example (gpu-operator,
time-slicing replicas 5), written where a GitRepository can point at it."""

from __future__ import annotations

from pathlib import Path

from gpushift._atomic import write_tree
from gpushift._sharing import Allocator, parse_sharing
from gpushift.render._load import load_example, with_overrides
from gpushift.render._tree import render_tree


def write_example(
    directory: Path, *, allocator: str = "gpu-operator", sharing: str | int = 5
) -> Path:
    """Write the homelab tree (the layout ``gpushift render --example homelab`` produces) for
    ``allocator`` and ``sharing`` into ``directory``; returns it.

    ``allocator="dra"`` gives the tree an operator merges to move to DRA.
    """
    config = with_overrides(
        load_example("homelab"), allocator=Allocator(allocator), sharing=parse_sharing(str(sharing))
    )
    return write_tree(render_tree(config), directory, force=True)
