"""Running git, unpacking a revision into a directory (``git archive``), and naming the
revision a directory is served at."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

from gpushift._children import die_with_parent


class GitError(Exception):
    """git failed or is not installed. ``stderr`` is what git wrote (stripped), ``args`` the
    subcommand and its arguments."""

    def __init__(self, *, args: Sequence[str], stderr: str, missing: bool = False) -> None:
        super().__init__(stderr or f"git {' '.join(args)} failed")
        self.git_args = tuple(args)
        self.stderr = stderr
        #: True when git itself is not installed.
        self.missing = missing

    @property
    def reason(self) -> str:
        """git's last line of error output, or ``unknown error``."""
        lines = self.stderr.splitlines()
        return lines[-1] if lines else "unknown error"


def git(*args: str, cwd: Path) -> bytes:
    """git's standard output for ``args`` run in ``cwd``. Raises GitError on failure."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            check=False,
            preexec_fn=die_with_parent(),  # ends with this process, kill -9 included
        )
    except FileNotFoundError:
        raise GitError(args=args, stderr="git is not installed", missing=True) from None
    if done.returncode != 0:
        raise GitError(args=args, stderr=done.stderr.decode("utf-8", "replace").strip())
    return done.stdout


def unpack_revision(dest: Path, *, repo: Path, rev: str, paths: Sequence[str] = ()) -> None:
    """Write the files of ``rev`` (only ``paths`` below the top, when given) into ``dest``.

    Raises GitError when git fails (an unknown revision, a path missing at ``rev``).
    """
    archive = git("archive", "--format=tar", rev, *(("--", *paths) if paths else ()), cwd=repo)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")


def tree_digest(root: Path) -> str:
    """SHA-1 over a directory's files in sorted order (each its relative path, a NUL, its
    bytes; ``.git`` left out): how the twin's source-controller names the revision of a
    directory that is not a git checkout (``main@sha1:<digest>``, docs/twin.md)."""
    h = hashlib.sha1()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(n for n in dirnames if n != ".git")
        for name in sorted(filenames):
            p = Path(dirpath, name)
            h.update(p.relative_to(root).as_posix().encode() + b"\0")
            try:
                h.update(p.read_bytes())
            except OSError:
                continue
    return h.hexdigest()
