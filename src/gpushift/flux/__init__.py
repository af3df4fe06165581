"""Flux semantics in one place, shared by the repository model, the twin and the runbook.

- the kustomize build subset (``KustomizeBuilder`` over a ``Tree`` from ``read_tree``) and its
  patch functions;
- Flux post-build substitution (``substitute``, ``substitute_tree``);
- the Helm values merge (``merge_values``) and helm-controller's ``targetPath``;
- Flux conditions as fluxcd/pkg writes them, Ready and kstatus evaluation (pure functions on
  API bodies).
"""

from __future__ import annotations

from gpushift.flux._kustomize import (
    KUSTOMIZATION_FILES,
    Doc,
    Item,
    Keys,
    KustomizeBuilder,
    Tree,
    apply_patch,
    norm,
    parent,
    parse_patches,
    patch_targets,
    rename,
)
from gpushift.flux._status import (
    FINALIZER,
    REQUESTED_AT,
    Artifact,
    Condition,
    InventoryEntry,
    drop_condition,
    duration,
    go_duration,
    kstatus,
    observed,
    ready,
    set_condition,
)
from gpushift.flux._subst import VAR_NAME, substitute, substitute_tree
from gpushift.flux._tree import YamlError, read_tree
from gpushift.flux._values import merge_values, value_at_target_path

__all__ = [
    "FINALIZER",
    "KUSTOMIZATION_FILES",
    "REQUESTED_AT",
    "VAR_NAME",
    "Artifact",
    "Condition",
    "Doc",
    "InventoryEntry",
    "Item",
    "Keys",
    "KustomizeBuilder",
    "Tree",
    "YamlError",
    "apply_patch",
    "drop_condition",
    "duration",
    "go_duration",
    "kstatus",
    "merge_values",
    "norm",
    "observed",
    "parent",
    "parse_patches",
    "patch_targets",
    "read_tree",
    "ready",
    "rename",
    "set_condition",
    "substitute",
    "substitute_tree",
    "value_at_target_path",
]
