"""Render the GPU stack and its consumers as a Flux tree, for any allocator, from one config.

``load_config`` / ``load_example`` read a ``gpushift.yaml``; ``with_overrides`` swaps the
allocator or sharing mode; ``render_tree`` returns the files; ``write_tree`` writes them
atomically; ``diff_trees`` shows what changes between two allocators.
"""

from __future__ import annotations

from gpushift._atomic import write_tree
from gpushift.render._common import kustomization_ref
from gpushift.render._config import (
    Chart,
    Charts,
    Cluster,
    Consumer,
    ConsumerStyle,
    GpushiftConfig,
    Observability,
    Toleration,
)
from gpushift.render._diff import diff_trees
from gpushift.render._example import write_example
from gpushift.render._gpu_operator import bridge_device_class
from gpushift.render._load import (
    EXAMPLES,
    example_text,
    load_config,
    load_example,
    parse_config,
    with_overrides,
)
from gpushift.render._schema import config_schema, config_schema_text
from gpushift.render._tree import render_tree

__all__ = [
    "EXAMPLES",
    "Chart",
    "Charts",
    "Cluster",
    "Consumer",
    "ConsumerStyle",
    "GpushiftConfig",
    "Observability",
    "Toleration",
    "bridge_device_class",
    "config_schema",
    "config_schema_text",
    "diff_trees",
    "example_text",
    "kustomization_ref",
    "load_config",
    "load_example",
    "parse_config",
    "render_tree",
    "with_overrides",
    "write_example",
    "write_tree",
]
