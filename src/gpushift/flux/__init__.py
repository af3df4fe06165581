"""Flux semantics in one place, shared by the repository model, the twin and the runbook.

- the kustomize build subset (``KustomizeBuilder`` over a ``Tree`` from ``read_tree``) and its
  patch functions;
- Flux post-build substitution (``substitute``, ``substitute_tree``) and the values a
  Secret gives it (``secret_values``: a SOPS-encrypted one's as ``ENCRYPTED_VALUE``);
- the Helm values merge (``merge_values``) and helm-controller's ``targetPath``;
- Flux conditions as fluxcd/pkg writes them, Ready and kstatus evaluation (pure functions on
  API bodies).
- the client-side operations, as the flux CLI performs them over ``gpushift.kube``: suspend,
  resume, request a reconcile, and the checks its waits use (the reconcile handshake, and
  ``object_ready``: Ready at a generation and revision)::

    token = request_reconcile(kube, KUSTOMIZATION, name="apps", namespace="flux-system")
    reconcile_and_wait(kube, KUSTOMIZATION, name="apps", namespace="flux-system", token=token)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpushift.flux._client import (
        GITREPOSITORY,
        HELMRELEASE,
        KUSTOMIZATION,
        handled,
        new_token,
        object_ready,
        reconcile_and_wait,
        request_reconcile,
        resume,
        revision,
        suspend,
    )
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
    selector_matches,
)
from gpushift.flux._secrets import ENCRYPTED_VALUE, is_sops_encrypted, secret_values
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
    ready_condition,
    set_condition,
)
from gpushift.flux._subst import (
    VAR_NAME,
    breaks_yaml,
    may_break_yaml,
    substitute,
    substitute_tree,
)
from gpushift.flux._tree import YamlError, read_tree
from gpushift.flux._values import merge_values, value_at_target_path

__all__ = [
    "ENCRYPTED_VALUE",
    "FINALIZER",
    "GITREPOSITORY",
    "HELMRELEASE",
    "KUSTOMIZATION",
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
    "breaks_yaml",
    "drop_condition",
    "duration",
    "go_duration",
    "handled",
    "is_sops_encrypted",
    "kstatus",
    "may_break_yaml",
    "merge_values",
    "new_token",
    "norm",
    "object_ready",
    "observed",
    "parent",
    "parse_patches",
    "patch_targets",
    "read_tree",
    "ready",
    "ready_condition",
    "reconcile_and_wait",
    "rename",
    "request_reconcile",
    "resume",
    "revision",
    "secret_values",
    "selector_matches",
    "set_condition",
    "substitute",
    "substitute_tree",
    "suspend",
    "value_at_target_path",
]


#: Names of the client operations, imported on first use: they pull in gpushift.kube (lightkube,
#: httpx), which the offline readers (``gpushift check``) never need.
_CLIENT_NAMES = frozenset(
    {
        "GITREPOSITORY",
        "HELMRELEASE",
        "KUSTOMIZATION",
        "handled",
        "is_sops_encrypted",
        "new_token",
        "object_ready",
        "reconcile_and_wait",
        "request_reconcile",
        "resume",
        "revision",
        "secret_values",
        "selector_matches",
        "suspend",
    }
)


def __getattr__(name: str) -> Any:
    if name in _CLIENT_NAMES:
        from gpushift.flux import _client

        value = getattr(_client, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
