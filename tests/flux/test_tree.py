"""read_tree keys files by their path below the root however the root is spelled."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpushift.flux import read_tree


def test_a_root_given_through_dot_dot_keys_files_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repos" / "home-ops"
    (repo / "kubernetes" / "flux").mkdir(parents=True)
    (repo / "kubernetes" / "flux" / "cluster.yaml").write_text("kind: ConfigMap\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    root = Path(os.path.join("..", "repos", "home-ops"))

    tree, errors, real = read_tree(root, [root])

    assert not errors
    assert list(tree.docs) == ["kubernetes/flux/cluster.yaml"]
    assert Path(real["kubernetes/flux/cluster.yaml"]).samefile(
        repo / "kubernetes" / "flux" / "cluster.yaml"
    )
