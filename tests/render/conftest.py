"""Shared fixtures for the render tests: configs and trees built from the homelab example."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from gpushift.render import GpushiftConfig, example_text, parse_config, render_tree

Tree = dict[str, str]


def _homelab_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(example_text("homelab"))
    return data


def _config_from(data: dict[str, Any]) -> GpushiftConfig:
    return parse_config(yaml.safe_dump(data, sort_keys=False), display="test.yaml")


@pytest.fixture
def homelab_data() -> dict[str, Any]:
    """The homelab example as plain data, for a test to vary."""
    return _homelab_data()


@pytest.fixture
def config_from() -> Callable[[dict[str, Any]], GpushiftConfig]:
    """Validate data as a config file would be (raises InputError)."""
    return _config_from


# Rendering is pure, so tests share trees; test_tree.py checks determinism separately.
_TREES: dict[str, Tree] = {}


@pytest.fixture
def tree_for() -> Callable[..., Tree]:
    """``tree_for(allocator, sharing, **top_level_changes)``: a homelab tree (do not mutate)."""

    def build(allocator: str, sharing: Any, **changes: Any) -> Tree:
        key = json.dumps([allocator, sharing, changes], sort_keys=True)
        if key not in _TREES:
            data = _homelab_data()
            data["allocator"] = allocator
            data["sharing"] = sharing
            data.update(changes)
            _TREES[key] = render_tree(_config_from(data))
        return _TREES[key]

    return build


@pytest.fixture
def docs() -> Callable[[Tree, str], list[Any]]:
    """``docs(tree, path)``: the YAML documents of a file below kubernetes/apps/."""

    def load(tree: Tree, path: str) -> list[Any]:
        return list(yaml.safe_load_all(tree[f"kubernetes/apps/{path}"]))

    return load
