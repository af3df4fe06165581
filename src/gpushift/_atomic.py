"""Writing all at once: a temporary file or directory next to the target, then a rename.

A failure at any point leaves the target as it was (absent, empty, the old file or the old
tree), never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from gpushift._errors import InputError


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new, never half: a
    temporary file beside it, fsync, then a rename (parent directories are made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_tree(files: Mapping[str, str], out: str | os.PathLike[str], *, force: bool) -> Path:
    """Write ``files`` (relative path → text) as the directory ``out``; return its path.

    Raises InputError when ``out`` is a non-empty directory and ``force`` is false, when it is
    not a directory, or when the tree cannot be written (nothing is then changed).
    """
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise InputError("--out exists and is not a directory", path=str(target))
    if target.is_dir() and any(target.iterdir()) and not force:
        raise InputError(
            "--out is not empty; pass --force to replace its contents", path=str(target)
        )
    parent = target.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.gpushift-", dir=parent))
    except OSError as err:
        raise InputError(f"cannot create the output directory: {err}", path=str(target)) from None
    try:
        for rel, text in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _swap_in(staging=staging, target=target.absolute())
    except OSError as err:
        shutil.rmtree(staging, ignore_errors=True)
        raise InputError(f"cannot write the rendered tree: {err}", path=str(target)) from None
    except BaseException:
        # Interrupted (Ctrl-C): leave no staging directory behind either.
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _swap_in(*, staging: Path, target: Path) -> None:
    """Replace ``target`` by ``staging`` with renames; on failure restore ``target``."""
    if not target.exists():
        staging.rename(target)
        return
    old = target.with_name(f"{staging.name}.old")
    target.rename(old)
    try:
        staging.rename(target)
    except OSError:
        with contextlib.suppress(OSError):
            old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)
