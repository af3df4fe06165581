"""``gpushift migrate``: the pull request that moves a repository between allocators.

``plan_migration(repo, texts, files, options)`` plans the edits as values (``Plan``: ``Edit``,
``NewFile``, ``RemovedFile`` and notes for a person); ``apply_plan`` turns a plan into new
file texts with ruamel.yaml round trips that keep everything else byte for byte;
``verify`` reads the result back (it must parse and keep the plan's promise);
``write_files`` writes them all or none. ``migrate(path, options)`` does all of it and returns
a ``Result`` with the diff and the summary.
"""

from __future__ import annotations

from gpushift.migrate._common import Options, SharingOption
from gpushift.migrate._plan import ABSENT, Edit, NewFile, Plan, RemovedFile
from gpushift.migrate._run import Result, migrate, plan_migration, read_repository
from gpushift.migrate._verify import verify
from gpushift.migrate._writer import apply_plan, edit_text, write_files

__all__ = [
    "ABSENT",
    "Edit",
    "NewFile",
    "Options",
    "Plan",
    "RemovedFile",
    "Result",
    "SharingOption",
    "apply_plan",
    "edit_text",
    "migrate",
    "plan_migration",
    "read_repository",
    "verify",
    "write_files",
]
