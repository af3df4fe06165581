"""A rollback's target without a server: which revision a tree is served at, whether it is the
revision the move being undone started from, and what the preflight and the plan make of the
error findings the cluster ran before that move."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from tests.runbook.test_planner import _cluster, _view
from tests.runbook.test_target import APP, ERROR, RELEASE, _git, _tree

from gpushift.reports import Finding, Severity
from gpushift.runbook import (
    NEVER_RESTORED,
    Options,
    Target,
    commit_tree,
    discover,
    identified,
    plan,
    preflight,
    read_target,
    returning,
)

BACK = Options(to="device-plugin")
COMMIT = "0123456789abcdef0123456789abcdef01234567"
DUAL = Finding(
    "dual-advertiser",
    Severity.ERROR,
    "kubernetes/apps/kube-system/plugin/helmrelease.yaml",
    9,
    "HelmRelease/kube-system/nvidia-device-plugin",
    "both allocators hand out every card",
)
CHECK_ERROR = (
    "gpushift check finds an error at the target: consumable-shares-gate-missing in "
    "kubernetes/apps/gpu-operator/dra/helmrelease.yaml:13 "
    "(HelmRelease/gpu-operator/dra-driver-nvidia-gpu): the kubelet plugin exits at start"
)


def _served(repo: Path, rev: str | None = None) -> Target:
    """The target as a rollback reads it: with the revision and tree it is served at."""
    return identified(read_target(repo, target=rev), repo=repo, rev=rev)


def _reasons(target: Target) -> list[str]:
    view = _view(_cluster())
    consumers, loose = discover(view, apps=None)
    reasons = preflight(view, BACK, consumers=tuple(consumers), loose=tuple(loose), target=target)
    return [r for r in reasons if "target" in r]


def test_a_plain_directory_is_served_at_its_content_digest(tmp_path: Path) -> None:
    root = _tree(tmp_path / "plain")
    (root / "README.md").write_text("home-ops\n")
    files = sorted(p for p in root.rglob("*") if p.is_file())
    # The walk: the top's files, then the one folder holding files, names sorted.
    top = [p for p in files if p.parent == root]
    below = [p for p in files if p.parent != root]
    h = hashlib.sha1()
    for p in top + below:
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
    assert _served(root).revision == h.hexdigest()


def test_a_checkout_is_served_at_its_commit_and_a_changed_one_at_no_known_revision(
    tmp_path: Path,
) -> None:
    repo = _tree(tmp_path / "repo")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "plugin")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert _served(repo).revision == head
    (repo / "new.yaml").write_text("kind: ConfigMap\n")  # untracked: not the commit either
    assert _served(repo).revision is None
    # A revision is read from git, whatever the checkout holds.
    assert _served(repo, "HEAD").revision == head


def test_the_revision_the_move_started_from_keeps_its_errors_as_warnings() -> None:
    target = Target("/src/home-ops", (ERROR,), revision=COMMIT)
    for recorded in (f"main@sha1:{COMMIT}", f"sha1:{COMMIT}", f"main/{COMMIT}"):
        back = returning(target, run="r1", revision=recorded)
        assert back.errors == ()
        assert back.existing == (ERROR,)
        assert back.back_to == f"run r1's starting revision {recorded}"
        assert _reasons(back) == []
    note = plan(_view(_cluster()), BACK, target=back).steps[0].note
    assert note.endswith(
        f"; warning: the cluster ran this before the move (the target is run r1's starting "
        f"revision main/{COMMIT}): "
        + CHECK_ERROR.removeprefix("gpushift check finds an error at the target: ")
    )


def test_another_tree_with_the_same_error_still_refuses_and_says_why() -> None:
    other = Target("/src/home-ops", (ERROR,), revision="f" * 40)
    back = returning(other, run="r1", revision=f"main@sha1:{COMMIT}")
    assert back.errors == (ERROR,) and back.existing == ()
    assert _reasons(back) == [
        CHECK_ERROR,
        f"the target is not exactly run r1's starting revision main@sha1:{COMMIT}: only a "
        "rollback to that very tree may bring back the errors the cluster ran before the move",
    ]
    # A checkout with changes is no known revision: the same.
    changed = returning(Target("/src/home-ops", (ERROR,)), run="r1", revision=f"main@sha1:{COMMIT}")
    assert changed.errors == (ERROR,)


def test_both_ledgers_on_one_card_are_never_brought_back() -> None:
    assert "dual-advertiser" in NEVER_RESTORED
    target = Target("/src/home-ops", (ERROR, DUAL), revision=COMMIT)
    back = returning(target, run="r1", revision=f"main@sha1:{COMMIT}")
    assert back.errors == (DUAL,)
    assert back.existing == (ERROR,)
    # The refusal names the finding; no hint to give another target, none would do.
    assert _reasons(back) == [
        "gpushift check finds an error at the target: dual-advertiser in "
        "kubernetes/apps/kube-system/plugin/helmrelease.yaml:9 "
        "(HelmRelease/kube-system/nvidia-device-plugin): both allocators hand out every card"
    ]


@given(
    served=st.text("0123456789abcdef", min_size=40, max_size=40),
    recorded=st.text("0123456789abcdef", min_size=40, max_size=40),
    ref=st.sampled_from(["main@sha1:", "sha1:", "main/", "v1.2.3@sha1:"]),
)
def test_the_errors_pass_exactly_when_the_commits_are_equal(
    served: str, recorded: str, ref: str
) -> None:
    back = returning(Target("t", (ERROR,), revision=served), run="r", revision=ref + recorded)
    assert (back.existing == (ERROR,)) == (served == recorded)
    assert (back.errors == ()) == (served == recorded)


def test_no_recorded_revision_matches_nothing() -> None:
    back = returning(Target("t", (ERROR,), revision=COMMIT), run="r1", revision="")
    assert back.errors == (ERROR,)
    assert back.back_to == "run r1"


def test_a_revert_of_the_move_has_the_tree_it_started_from(tmp_path: Path) -> None:
    # The repository keeps its manifests in a folder of the git repository, as most do.
    top = tmp_path / "home-ops"
    repo = _tree(top / "cluster")
    (repo / APP / "helmrelease.yaml").write_text(RELEASE + "    consumableShares: 5\n")
    _git(top, "init", "-q")
    _git(top, "add", ".")
    _git(top, "commit", "-qm", "the tree the cluster runs, with its error")
    start = _head(top)
    (repo / APP / "helmrelease.yaml").write_text(RELEASE)
    _git(top, "commit", "-qam", "the move")
    _git(top, "revert", "--no-edit", "HEAD")
    (top / "README.md").write_text("outside the folder: not what Flux applies from it\n")
    _git(top, "add", ".")
    _git(top, "commit", "-qm", "docs")
    reverted = _served(repo, "HEAD")
    assert reverted.revision != start and reverted.errors
    assert reverted.tree == commit_tree(repo, start) is not None
    back = returning(reverted, run="r1", revision=f"main@sha1:{start}", tree=reverted.tree)
    assert back.errors == () and [f.rule for f in back.existing] == [
        "consumable-shares-gate-missing"
    ]
    # The checkout itself, clean, is HEAD's tree; with a change in the folder, no tree.
    assert _served(repo).tree == reverted.tree
    (repo / APP / "extra.yaml").write_text("kind: ConfigMap\n")
    assert _served(repo).tree is None
    # The move's own commit has another tree: its errors would still refuse.
    moved = _served(repo, "HEAD~2")
    assert moved.tree != reverted.tree
    # A commit the repository does not hold has no tree.
    assert commit_tree(repo, "f" * 40) is None


def _head(repo: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
