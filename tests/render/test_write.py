"""The atomic writer: no overwrite without --force, and no half-written tree on failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpushift._errors import InputError
from gpushift.render import write_tree

FILES = {"kubernetes/apps/a/ks.yaml": "---\na: 1\n", "kubernetes/apps/b/x.yaml": "---\nb: 2\n"}


def tree_of(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_writes_a_new_directory(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "out"
    write_tree(FILES, out, force=False)
    assert tree_of(out) == FILES
    # Only the target is left behind: no staging directory next to it.
    assert [p.name for p in out.parent.iterdir()] == ["out"]


def test_writes_into_an_empty_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    write_tree(FILES, out, force=False)
    assert tree_of(out) == FILES


def test_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="not empty; pass --force"):
        write_tree(FILES, out, force=False)
    assert tree_of(out) == {"keep.txt": "mine"}


def test_force_replaces_the_old_tree(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.yaml").write_text("old", encoding="utf-8")
    write_tree(FILES, out, force=True)
    assert tree_of(out) == FILES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_refuses_a_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("x", encoding="utf-8")
    with pytest.raises(InputError, match="not a directory"):
        write_tree(FILES, out, force=True)


def test_a_failed_write_leaves_the_old_tree(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.yaml").write_text("old", encoding="utf-8")
    # A path that cannot be created: a file where a directory must go.
    bad = {**FILES, "kubernetes/apps/a/ks.yaml/inner.yaml": "x"}
    with pytest.raises(InputError, match="cannot write the rendered tree"):
        write_tree(bad, out, force=True)
    assert tree_of(out) == {"stale.yaml": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_an_unwritable_parent_changes_nothing(tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o500)
    try:
        with pytest.raises(InputError):
            write_tree(FILES, parent / "out", force=False)
        assert list(parent.iterdir()) == []
    finally:
        parent.chmod(0o700)


def test_an_interrupted_write_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    calls = 0
    real_write = Path.write_text

    def interrupt_second_file(self: Path, *args: object, **kwargs: object) -> int:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt
        return real_write(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", interrupt_second_file)
    with pytest.raises(KeyboardInterrupt):
        write_tree(FILES, out, force=False)
    assert list(tmp_path.iterdir()) == []
