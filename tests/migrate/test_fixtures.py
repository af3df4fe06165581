"""Every fixture repository with a device plugin: migrate, check, diff, rerun, round trip."""

from __future__ import annotations

import difflib
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from tests.migrate.conftest import DEVICE_PLUGIN_REPOS, REPOS, copy_repo, needs_fixtures, snapshot

from gpushift.gitops import Repo, load_repo, summarize
from gpushift.migrate import Options, migrate
from gpushift.reports import Severity
from gpushift.rules import check_repo

pytestmark = needs_fixtures

NAMES = sorted(DEVICE_PLUGIN_REPOS)


def _errors(repo: Repo) -> list[str]:
    return [
        f"{f.path}:{f.line} {f.rule} {f.message}"
        for f in check_repo(repo)
        if f.severity is Severity.ERROR
    ]


@pytest.mark.parametrize("name", NAMES)
def test_migrates_and_checks_clean(name: str, tmp_path: Path) -> None:
    root = copy_repo(name, tmp_path)
    before = summarize(load_repo([root]))
    assert before.allocator == "device-plugin"
    assert before.sharing.replicas == DEVICE_PLUGIN_REPOS[name]
    migrate(root, Options(to="dra"), write=True)
    repo = load_repo([root])
    assert _errors(repo) == []
    after = summarize(repo)
    assert after.allocator == "dra"
    # Same capacity per card: N time-slicing replicas become N consumable shares.
    assert after.sharing.mode == "consumable-shares"
    assert after.sharing.replicas == DEVICE_PLUGIN_REPOS[name]
    # Every consumer that asked for nvidia.com/gpu now claims, except where no claim fits.
    for c in after.consumers:
        assert c.request in ("claim", "bridged", "none"), c
        if c.request == "bridged":
            assert c.workload.origin_kind == "llmkube"


@pytest.mark.parametrize("name", NAMES)
def test_second_run_is_a_no_op(name: str, tmp_path: Path) -> None:
    root = copy_repo(name, tmp_path)
    migrate(root, Options(to="dra"), write=True)
    files = snapshot(root)
    again = migrate(root, Options(to="dra"), write=True)
    assert again.plan.empty and again.diff == "" and again.exit_code == 0
    assert snapshot(root) == files


@pytest.mark.parametrize("name", NAMES)
def test_diff_applies_with_git(name: str, tmp_path: Path) -> None:
    root = copy_repo(name, tmp_path)
    result = migrate(root, Options(to="dra"))
    assert result.exit_code == 1 and result.diff
    # Nothing is written without --write.
    assert snapshot(root) == snapshot(REPOS / name)
    patch = tmp_path / "migrate.diff"
    patch.write_text(result.diff)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=root, check=True)
    subprocess.run(["git", "apply", str(patch)], cwd=root, check=True)
    assert migrate(root, Options(to="dra")).plan.empty


def _comments(text: str) -> Counter[str]:
    return Counter(
        line.strip() for line in text.splitlines() if line.strip().startswith(("#", "---"))
    )


@pytest.mark.parametrize("name", NAMES)
def test_comments_and_markers_are_kept(name: str, tmp_path: Path) -> None:
    root = copy_repo(name, tmp_path)
    before = snapshot(root)
    result = migrate(root, Options(to="dra"), write=True)
    removed = {f.file for f in result.plan.removed_files}
    for edit in result.plan.edits:
        old = _comments(before[edit.file].decode())
        new = _comments((root / edit.file).read_text())
        # Every comment, `# yaml-language-server` line and document marker is still there.
        assert old - new == Counter(), edit.file
    assert removed.isdisjoint(e.file for e in result.plan.edits)


def _model(repo: Repo) -> dict[str, Any]:
    summary = summarize(repo)
    return {
        "allocator": summary.allocator,
        "sharing": summary.sharing,
        # Exporters are left out: --to dra drops their nvidia.com/gpu request for good (it
        # took a share that a workload could use), and the way back does not restore it.
        "consumers": sorted(
            (c.namespace, c.name, c.kind, c.request)
            for c in summary.consumers
            if not c.workload.monitoring
        ),
        "releases": sorted(
            (h.chart, h.target_namespace, h.name)
            for h in repo.helm_releases
            if h.active
            and h.chart in ("gpu-operator", "nvidia-device-plugin", "dra-driver-nvidia-gpu")
        ),
        "gpu_requests": sorted(
            (w.namespace, w.name, ct.name, str(ct.extended()))
            for w in repo.workloads
            if w.active and not w.monitoring
            for ct in w.pod.all_containers
            if ct.extended() is not None
        ),
        "claims": sorted(
            (w.namespace, w.name, pc.name) for w in repo.workloads for pc in w.pod.resource_claims
        ),
    }


@pytest.mark.parametrize(
    ("name", "keep_old"),
    [(n, False) for n in NAMES]
    # --keep-old once per old stack: gpu-operator (its time-slicing ConfigMap stays) and a
    # standalone device plugin (its app stays, unlisted, and is listed again on the way back).
    + [("LukeEvansTech__talos-cluster", True), ("heavybullets8__heavy-ops", True)],
)
def test_round_trip_gives_the_same_model(name: str, keep_old: bool, tmp_path: Path) -> None:
    root = copy_repo(name, tmp_path)
    start = _model(load_repo([root]))
    migrate(root, Options(to="dra", keep_old=keep_old), write=True)
    assert _model(load_repo([root]))["allocator"] == "dra"
    back = migrate(root, Options(to="device-plugin"), write=True)
    assert back.written
    repo = load_repo([root])
    assert _model(repo) == start
    assert _errors(repo) == []
    assert migrate(root, Options(to="device-plugin")).plan.empty


def test_keep_old_keeps_the_standalone_plugin_unlisted(tmp_path: Path) -> None:
    root = copy_repo("heavybullets8__heavy-ops", tmp_path)
    migrate(root, Options(to="dra", keep_old=True), write=True)
    app = root / "kubernetes/apps/kube-system/nvidia-plugin"
    assert (app / "ks.yaml").is_file() and (app / "app/helmrelease.yaml").is_file()
    parent = (root / "kubernetes/apps/kube-system/kustomization.yaml").read_text()
    assert "./nvidia-plugin/ks.yaml" not in parent
    assert "./dra-driver-nvidia-gpu/ks.yaml" in parent


def test_keep_old_comments_the_time_slicing_config(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    migrate(root, Options(to="dra", keep_old=True), write=True)
    path = root / "kubernetes/apps/gpu-operator/gpu-operator/app/time-slicing-config.yaml"
    text = path.read_text()
    assert "# Kept by gpushift migrate --keep-old" in text
    assert "replicas: 5" in text
    assert _errors(load_repo([root])) == []


def test_already_dra_is_nothing_to_do() -> None:
    # jhart99's DRA driver is active and its gpu-operator has devicePlugin.enabled: false.
    result = migrate(REPOS / "jhart99__home-ops", Options(to="dra"))
    assert result.plan.empty and result.exit_code == 0 and result.diff == ""


def _words(value: Any) -> set[str]:
    """Every key and scalar inside an edit's old value, as text."""
    if isinstance(value, dict):
        return {str(k) for k in value} | {w for v in value.values() for w in _words(v)}
    if isinstance(value, list):
        return {w for v in value for w in _words(v)}
    return {str(value)}


@pytest.mark.parametrize("name", NAMES)
def test_only_planned_lines_change(name: str, tmp_path: Path) -> None:
    root = copy_repo(name, tmp_path)
    before = snapshot(root)
    result = migrate(root, Options(to="dra"), write=True)
    by_file: dict[str, list[Any]] = {}
    for edit in result.plan.edits:
        by_file.setdefault(edit.file, []).append(edit)
    for file, edits in by_file.items():
        old = before[file].decode().splitlines(keepends=True)
        new = (root / file).read_text().splitlines(keepends=True)
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        gone = [
            line
            for tag, i1, i2, _, _ in matcher.get_opcodes()
            if tag != "equal"
            for line in old[i1:i2]
        ]
        # A handful of lines per file, never a reformatted file.
        assert len(gone) <= 2 * len(edits) + 2, file
        # Each line that went names what an edit changed: the key it sets or deletes (or a
        # mapping the deletion emptied), or a key or value of what it removes. Every other line
        # is still there, byte for byte.
        names = {str(k) for e in edits for k in e.path[len(e.path) - 1 - e.prune :]} | {
            w for e in edits if e.op in ("delete", "remove") for w in _words(e.old)
        }
        for line in gone:
            assert any(n in line for n in names), (file, line)
