"""The building blocks gpushift shares with programs built on it, the twin distribution first.

Raw API bodies and the kinds table, the two input errors, YAML reading with file and line,
Kubernetes quantities, child processes that end with their parent, atomic writes, git and the
CRDs of the table's custom kinds. The modules behind these names are private; a program outside
the ``gpushift`` package imports from here or from a package's ``__init__`` (an import-linter
contract holds the twin to it).
"""

from __future__ import annotations

from gpushift._atomic import write_file
from gpushift._children import die_with_parent
from gpushift._children import stop as stop_child
from gpushift._crds import custom_crds
from gpushift._errors import InputError, UsageError
from gpushift._git import GitError, git, tree_digest, unpack_revision
from gpushift._kinds import FLUX_VERSION, FLUX_VERSIONS, KINDS, Kind, builtin_kinds, by_kind, lookup
from gpushift._obj import Obj, as_dict
from gpushift._quantity import QuantityError, format_quantity
from gpushift._quantity import is_binary as is_binary_quantity
from gpushift._quantity import parse as parse_quantity
from gpushift._quantity import value as quantity_value
from gpushift._yaml import Document, describe, expand_lists, locate, parse_text, read_file
from gpushift._yaml import load as load_yaml
from gpushift._yaml import load_all as load_yaml_all

__all__ = [
    "FLUX_VERSION",
    "FLUX_VERSIONS",
    "KINDS",
    "Document",
    "GitError",
    "InputError",
    "Kind",
    "Obj",
    "QuantityError",
    "UsageError",
    "as_dict",
    "builtin_kinds",
    "by_kind",
    "custom_crds",
    "describe",
    "die_with_parent",
    "expand_lists",
    "format_quantity",
    "git",
    "is_binary_quantity",
    "load_yaml",
    "load_yaml_all",
    "locate",
    "lookup",
    "parse_quantity",
    "parse_text",
    "quantity_value",
    "read_file",
    "stop_child",
    "tree_digest",
    "unpack_revision",
    "write_file",
]
