"""`gpushift render` on the command line: exit codes, messages and the files it leaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift.cli import main
from gpushift.render import config_schema_text

Capture = pytest.CaptureFixture[str]


def run(capsys: Capture, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_render_example_writes_the_tree(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "out"
    code, stdout, err = run(
        capsys,
        "render",
        "--example",
        "homelab",
        "--allocator",
        "dra",
        "--sharing",
        "5",
        "--out",
        str(out),
    )
    assert (code, err) == (0, "")
    written = sorted(p for p in out.rglob("*.yaml"))
    assert stdout == f"wrote {len(written)} files to {out} (allocator dra, sharing 5)\n"
    helm = out / "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml"
    assert "consumableShares: 5" in helm.read_text(encoding="utf-8")


def test_render_refuses_to_overwrite(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "out"
    args = ("render", "--example", "homelab", "--out", str(out))
    assert run(capsys, *args)[0] == 0
    code, stdout, err = run(capsys, *args)
    assert code == 2
    assert stdout == ""
    assert (
        err == f"gpushift: error: {out}: --out is not empty; pass --force to replace its contents\n"
    )
    assert run(capsys, *args, "--force")[0] == 0


def test_render_a_config_file(tmp_path: Path, capsys: Capture) -> None:
    cfg = tmp_path / "gpushift.yaml"
    cfg.write_text(
        "allocator: device-plugin\nsharing: 4\ncluster: {talos: true}\n"
        "consumers:\n  - {namespace: media, name: plex, style: deployment}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    code, _, err = run(capsys, "render", str(cfg), "--out", str(out))
    assert (code, err) == (0, "")
    deploy = out / "kubernetes/apps/media/plex/app/deployment.yaml"
    assert "nvidia.com/gpu: 1" in deploy.read_text(encoding="utf-8")


def test_bad_config_exits_2_with_file_line_and_field(tmp_path: Path, capsys: Capture) -> None:
    cfg = tmp_path / "gpushift.yaml"
    cfg.write_text("allocator: gpu-operator\nsharing: memory\n", encoding="utf-8")
    code, stdout, err = run(capsys, "render", str(cfg), "--out", str(tmp_path / "out"))
    assert code == 2
    assert stdout == ""
    assert err.startswith(f"gpushift: error: {cfg}:2: sharing: 'memory' needs allocator dra")
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_refused_override(tmp_path: Path, capsys: Capture) -> None:
    code, _, err = run(
        capsys,
        "render",
        "--example",
        "homelab",
        "--allocator",
        "device-plugin",
        "--sharing",
        "unlimited",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 2
    assert "sharing: 'unlimited' needs allocator dra" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("render", "--out", "x"), "give either a CONFIG file or --example NAME"),
        (("render", "c.yaml", "--example", "homelab", "--out", "x"), "give either a CONFIG"),
        (("render", "--example", "homelab"), "--out DIR is required"),
        (("render", "--example", "homelab", "--diff"), "--diff needs --to ALLOCATOR"),
        (("render", "--example", "homelab", "--to", "dra", "--out", "x"), "only apply with --diff"),
        (("render", "--example", "nope", "--out", "x"), "unknown example 'nope'"),
        (("render", "--example", "homelab", "--sharing", "half", "--out", "x"), "--sharing: must"),
    ],
)
def test_usage_errors(args: tuple[str, ...], message: str, capsys: Capture) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2
    assert message in err


def test_diff_prints_the_migration(capsys: Capture) -> None:
    code, stdout, err = run(
        capsys, "render", "--example", "homelab", "--diff", "--from", "gpu-operator", "--to", "dra"
    )
    assert (code, err) == (1, "")  # a diff, as diff(1) exits
    assert stdout.startswith("diff --git a/kubernetes/apps/")
    assert "+    gpuResourcesEnabledOverride: true\n" in stdout


def test_diff_to_another_sharing_mode(capsys: Capture) -> None:
    code, stdout, err = run(
        capsys,
        "render",
        "--example",
        "homelab",
        "--diff",
        "--to",
        "dra",
        "--to-sharing",
        "unlimited",
    )
    assert (code, err) == (1, "")
    assert "+    consumableShares: unlimited\n" in stdout
    assert "-            replicas: 5\n" in stdout


def test_diff_default_from_is_the_configs_allocator(capsys: Capture) -> None:
    explicit = run(
        capsys,
        "render",
        "--example",
        "homelab",
        "--diff",
        "--from",
        "gpu-operator",
        "--to",
        "device-plugin",
    )
    default = run(capsys, "render", "--example", "homelab", "--diff", "--to", "device-plugin")
    assert explicit == default


def test_schema_option_prints_the_published_schema(capsys: Capture) -> None:
    code, stdout, _ = run(capsys, "render", "--schema")
    assert code == 0
    assert stdout == config_schema_text()


def test_help_documents_exit_codes(capsys: Capture) -> None:
    code, stdout, _ = run(capsys, "render", "--help")
    assert code == 0
    assert "Exit codes: 0 tree written" in " ".join(stdout.split())
