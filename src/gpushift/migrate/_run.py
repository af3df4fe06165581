"""Reading a repository, planning, and producing the diff (or writing it)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushift._errors import InputError
from gpushift.gitops import Repo, load_repo
from gpushift.migrate._common import Options
from gpushift.migrate._plan import Plan
from gpushift.migrate._to_device_plugin import plan_to_device_plugin
from gpushift.migrate._to_dra import plan_to_dra
from gpushift.migrate._to_gpucluster import plan_to_gpucluster
from gpushift.migrate._verify import verify
from gpushift.migrate._writer import apply_plan, write_files
from gpushift.render import diff_trees

_YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class Result:
    """A planned (or written) migration: the plan, the diff, and whether it was written."""

    root: Path
    plan: Plan
    diff: str
    written: bool

    @property
    def exit_code(self) -> int:
        """0 when there is nothing to do or it was written; 1 when a diff was shown."""
        return 0 if self.plan.empty or self.written else 1

    def summary(self) -> str:
        """What changed, and what needs a person."""
        if self.plan.empty:
            return f"nothing to do: the repository already uses {self.plan.to}\n"
        verb = "Changed" if self.written else "Would change"
        lines = [f"{verb} ({len(self.plan.files())} files):"]
        lines += [f"  {c}" for c in self.plan.changes()]
        if self.plan.notes:
            lines.append("Needs a person:")
            lines += [f"  {n}" for n in self.plan.notes]
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """The plan, the diff and whether it was written, as JSON."""
        out: dict[str, Any] = self.plan.to_dict()
        out["written"] = self.written
        out["diff"] = self.diff
        return json.dumps(out, indent=2) + "\n"


def read_repository(path: str | Path) -> tuple[Repo, dict[str, str], frozenset[str]]:
    """The model of the repository at ``path``, its YAML texts, and every file path in it.

    Paths are relative to ``path`` with POSIX separators. Raises InputError when ``path`` is
    not a directory.
    """
    root = Path(path)
    if not root.is_dir():
        raise InputError("not a directory", path=str(path))
    files: set[str] = set()
    texts: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            files.add(rel)
            if name.endswith(_YAML_SUFFIXES):
                try:
                    # Bytes, not read_text: universal newlines would turn CRLF into LF.
                    texts[rel] = full.read_bytes().decode("utf-8")
                except (OSError, UnicodeDecodeError) as err:
                    raise InputError(f"cannot read: {err}", path=rel) from None
    return load_repo([root]), texts, frozenset(files)


def plan_migration(
    repo: Repo, texts: dict[str, str], files: frozenset[str], options: Options
) -> Plan:
    """The plan for ``options.to`` (pure: no I/O)."""
    if options.to == "dra":
        return plan_to_dra(repo, texts, files, options)
    if options.to == "gpucluster":
        return plan_to_gpucluster(repo, texts, files, options)
    return plan_to_device_plugin(repo, texts, files, options)


def migrate(path: str | Path, options: Options, *, write: bool = False) -> Result:
    """Plan the migration of the repository at ``path``; with ``write``, apply it.

    Everything is planned and applied in memory first, so a refusal (InputError) leaves every
    file as it was; the write itself is all files or none. Before a diff or a write, the
    result is read back (``verify``): every new text must parse and the migrated tree must run
    one allocator, the one asked for, with the same consumers and the promised capacity per
    card.
    """
    root = Path(path)
    repo, texts, files = read_repository(root)
    plan = plan_migration(repo, texts, files, options)
    changes = apply_plan(plan, texts)
    if not plan.empty:
        # The diff shown is the diff --write would write: both refuse a broken result.
        verify(root, repo, plan, changes, options)
    before = {p: texts[p] for p in changes if p in texts}
    after = {p: t for p, t in changes.items() if t is not None}
    diff = diff_trees(before, after)
    if write and not plan.empty:
        write_files(root, changes)
    return Result(root=root, plan=plan, diff=diff, written=write and not plan.empty)
