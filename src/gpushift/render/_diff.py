"""The unified diff between two rendered trees: the pull request an operator reviews."""

from __future__ import annotations

import difflib
from collections.abc import Mapping


def diff_trees(before: Mapping[str, str], after: Mapping[str, str], *, context: int = 3) -> str:
    """A git-style unified diff (``a/``/``b/`` paths, ``/dev/null`` for added or removed files).

    Files are compared in path order. Returns an empty string when the trees are equal.
    """
    chunks: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        chunks.append(f"diff --git a/{path} b/{path}\n")
        if old is None:
            chunks.append("new file mode 100644\n")
        elif new is None:
            chunks.append("deleted file mode 100644\n")
        lines = difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            (new or "").splitlines(keepends=True),
            fromfile=f"a/{path}" if old is not None else "/dev/null",
            tofile=f"b/{path}" if new is not None else "/dev/null",
            n=context,
        )
        chunks.extend(line if line.endswith("\n") else line + "\n" for line in lines)
    return "".join(chunks)
