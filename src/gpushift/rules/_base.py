"""Reading the checked tree as it was at a git revision (``gpushift check --base REV``)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from gpushift._errors import InputError
from gpushift._git import GitError, git, unpack_revision


def _git(*args: str, cwd: Path) -> bytes:
    try:
        return git(*args, cwd=cwd)
    except GitError as err:
        if err.missing:
            raise InputError("--base needs git, which is not installed") from None
        raise InputError(f"--base: git {args[0]} failed: {err.reason}") from None


@contextmanager
def tree_at(paths: Sequence[str | Path], *, rev: str) -> Iterator[list[Path]]:
    """The same ``paths``, as they were at ``rev``, in a temporary directory.

    Yields one path per input path (a directory or file inside the temporary tree; it may not
    exist when the path is new since ``rev``). The directory is removed afterwards.

    Raises InputError when a path is not inside a git work tree or ``rev`` is unknown.
    """
    first = Path(paths[0]).resolve()
    anchor = first if first.is_dir() else first.parent
    top = Path(_git("rev-parse", "--show-toplevel", cwd=anchor).decode().strip()).resolve()
    try:
        _git("rev-parse", "--verify", "--quiet", f"{rev}^{{tree}}", cwd=top)
    except InputError:
        raise InputError(f"--base: unknown git revision {rev!r} in {top}") from None
    prefixes: list[str] = []
    for raw in paths:
        p = Path(raw).resolve()
        try:
            prefixes.append(p.relative_to(top).as_posix())
        except ValueError:
            raise InputError(f"{raw} is not inside the git work tree {top}") from None
    wanted = [p for p in prefixes if p not in ("", ".")]
    # Paths new since rev are not in the archive; git archive fails on missing pathspecs.
    existing = [p for p in wanted if _git("ls-tree", rev, "--", p, cwd=top).strip()]
    with tempfile.TemporaryDirectory(prefix="gpushift-base-") as tmp:
        root = Path(tmp)
        if existing or not wanted:
            try:
                unpack_revision(root, repo=top, rev=rev, paths=existing)
            except GitError as err:
                raise InputError(f"--base: git archive failed: {err.reason}") from None
        out = []
        for prefix in prefixes:
            target = root / prefix if prefix not in ("", ".") else root
            if not target.exists():
                target.mkdir(parents=True, exist_ok=True)
            out.append(target)
        yield out
