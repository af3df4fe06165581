"""`render --diff`: the pull request between two allocators of one config."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpushift._sharing import Allocator
from gpushift.render import diff_trees, load_example, render_tree, with_overrides


def test_diff_of_equal_trees_is_empty() -> None:
    tree = {"a.yaml": "x: 1\n"}
    assert diff_trees(tree, dict(tree)) == ""


def test_diff_marks_added_removed_and_changed_files() -> None:
    before = {"gone.yaml": "a: 1\n", "same.yaml": "s: 1\n", "changed.yaml": "k: old\n"}
    after = {"new.yaml": "b: 2\n", "same.yaml": "s: 1\n", "changed.yaml": "k: new\n"}
    assert diff_trees(before, after) == (
        "diff --git a/changed.yaml b/changed.yaml\n"
        "--- a/changed.yaml\n"
        "+++ b/changed.yaml\n"
        "@@ -1 +1 @@\n"
        "-k: old\n"
        "+k: new\n"
        "diff --git a/gone.yaml b/gone.yaml\n"
        "deleted file mode 100644\n"
        "--- a/gone.yaml\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-a: 1\n"
        "diff --git a/new.yaml b/new.yaml\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/new.yaml\n"
        "@@ -0,0 +1 @@\n"
        "+b: 2\n"
    )


def test_operator_to_dra_is_the_migration_pull_request() -> None:
    base = load_example("homelab")
    before = render_tree(with_overrides(base, allocator=Allocator.GPU_OPERATOR))
    after = render_tree(with_overrides(base, allocator=Allocator.DRA))
    diff = diff_trees(before, after)
    apps = "kubernetes/apps"
    # The three values that must flip together, in one change.
    assert "-      enabled: true\n" in diff
    assert "+      enabled: false\n" in diff
    assert f"+++ b/{apps}/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml" in diff
    assert "+    gpuResourcesEnabledOverride: true\n" in diff
    assert "+    consumableShares: 5\n" in diff
    # Time-slicing goes; claim templates come; consumers move from requests to claims.
    assert "+++ /dev/null\n" in diff
    assert f"--- a/{apps}/gpu-operator/gpu-operator/app/time-slicing-config.yaml" in diff
    assert f"+++ b/{apps}/media/gpu-claim-templates/app/resourceclaimtemplate.yaml" in diff
    assert "-                nvidia.com/gpu: 1\n" in diff
    assert "+              claims:\n" in diff
    # The llmkube InferenceService keeps its request: only its comment and dependency change.
    isvc = diff.split(f"diff --git a/{apps}/ai/llmkube/models/llama-nvidia.yaml")[1]
    isvc = isvc.split("diff --git")[0]
    assert "-    gpu: 1" not in isvc


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_apply_turns_one_tree_into_the_other(tmp_path: Path) -> None:
    base = load_example("homelab")
    before = render_tree(with_overrides(base, allocator=Allocator.GPU_OPERATOR))
    after = render_tree(with_overrides(base, allocator=Allocator.DRA, sharing="unlimited"))
    for rel, text in before.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    patch = tmp_path / "pr.diff"
    patch.write_text(diff_trees(before, after), encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "apply", "pr.diff"], check=True)
    patch.unlink()
    result = {
        str(p.relative_to(tmp_path)): p.read_text(encoding="utf-8")
        for p in tmp_path.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(tmp_path).parts
    }
    assert result == after
