"""`gpushift migrate` end to end: diff, summary, json, --write, exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpushift.cli import main

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / ".." / "shared" / "fixtures" / "repos"
LUKE = "LukeEvansTech__talos-cluster"

needs_fixtures = pytest.mark.skipif(not REPOS.is_dir(), reason="fixture repositories not present")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(REPOS / LUKE, target)
    return target


@needs_fixtures
def test_diff_then_write_then_nothing_to_do(repo: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "gpushift", "migrate", str(repo), "--to", "dra"]
    shown = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert shown.returncode == 1
    assert shown.stdout.startswith("diff --git a/")
    assert "Would change" in shown.stderr and "Needs a person:" in shown.stderr
    patch = tmp_path / "p.diff"
    patch.write_text(shown.stdout)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True)
    written = subprocess.run([*cmd, "--write"], capture_output=True, text=True, check=False)
    assert written.returncode == 0 and written.stdout == ""
    assert written.stderr.startswith("Changed (")
    again = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert again.returncode == 0 and again.stdout == ""
    assert again.stderr == "nothing to do: the repository already uses dra\n"


@needs_fixtures
def test_json_output(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["migrate", str(repo), "--to", "dra", "--sharing", "unlimited", "-o", "json"])
    assert code == 1
    out = json.loads(capsys.readouterr().out)
    assert out["to"] == "dra" and out["written"] is False
    assert out["diff"].startswith("diff --git ")
    files = {f["file"] for f in out["new_files"]}
    assert "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml" in files
    flip = [e for e in out["edits"] if e["path"][-2:] == ["devicePlugin", "enabled"]]
    assert flip == [
        {
            "file": "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml",
            "doc": 0,
            "path": ["spec", "values", "devicePlugin", "enabled"],
            "op": "set",
            "old": True,
            "new": False,
            "reason": flip[0]["reason"],
        }
    ]
    assert "consumableShares: unlimited" in out["diff"]
    assert any("InferenceService ai/llama-nvidia" in n for n in out["needs_a_person"])


@needs_fixtures
def test_sharing_n_and_template_name(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["migrate", str(repo), "--to", "dra", "--sharing", "3", "--template-name", "media-gpu"]
    )
    assert code == 1
    diff = capsys.readouterr().out
    assert "+    consumableShares: 3\n" in diff
    assert "+  name: media-gpu\n" in diff
    assert "resourceClaimTemplateName: media-gpu" in diff


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sharing", "lots"], "--sharing must be keep, N, memory or unlimited"),
        (["--sharing", "0"], "--sharing 0: --to dra needs 1 or more"),
        (["--template-name", "Any_GPU"], "is not a valid object name"),
    ],
)
def test_bad_sharing_exits_2(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", str(tmp_path), "--to", "dra", *args]) == 2
    assert message in capsys.readouterr().err


def test_memory_back_to_the_device_plugin_is_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", str(tmp_path), "--to", "device-plugin", "--sharing", "memory"]) == 2
    assert "needs --to dra" in capsys.readouterr().err


def test_missing_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", str(tmp_path / "absent"), "--to", "dra"]) == 2
    assert "not a directory" in capsys.readouterr().err


@needs_fixtures
def test_memory_sharing_needs_a_size_and_no_bridged_consumer(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The seed cluster's llmkube InferenceService stays bridged: it cannot ask for memory.
    code = main(
        ["migrate", str(repo), "--to", "dra", "--sharing", "memory", "--memory-per-claim", "4Gi"]
    )
    assert code == 2
    assert "kubernetes/apps/ai/llmkube/models/qwen3.8-27b.yaml:" in capsys.readouterr().err
    flatops = tmp_path / "flatops"
    shutil.copytree(REPOS / "jfroy__flatops", flatops)
    assert main(["migrate", str(flatops), "--to", "dra", "--sharing", "memory"]) == 2
    assert "memoryPerClaim" in capsys.readouterr().err
    code = main(
        ["migrate", str(flatops), "--to", "dra", "--sharing", "memory", "--memory-per-claim", "4Gi"]
    )
    assert code == 1
    diff = capsys.readouterr().out
    assert "+    consumableShares: memory\n" in diff
    assert "+                memory: 4Gi\n" in diff
