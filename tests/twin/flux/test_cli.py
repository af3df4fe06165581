"""`gpushift twin serve --example homelab`, `git-set` and `wait-ready`, through kubectl."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpushift.cli import main
from gpushift.render import write_example

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


def _kubectl(kc: Path, *args: str) -> str:
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(kc), *args], capture_output=True, text=True, check=True
    )
    return out.stdout


@needs_kubectl
def test_serve_example_git_set_and_wait_ready(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpushift",
            "twin",
            "serve",
            "--example",
            "homelab",
            "--time-scale",
            "200",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kc),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("gpushift twin serving https://127.0.0.1:")
        assert main(["twin", "wait-ready", "--kubeconfig", str(kc), "--timeout", "60"]) == 0
        nodes = json.loads(_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
        assert [n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes] == ["5", "5", "5"]
        before = _kubectl(
            kc,
            "-n",
            "flux-system",
            "get",
            "gitrepository",
            "flux-system",
            "-o",
            "jsonpath={.status.artifact.revision}",
        )
        dra = write_example(tmp_path / "dra", allocator="dra", sharing=5)
        assert main(["twin", "git-set", str(dra), "--kubeconfig", str(kc)]) == 0
        url = _kubectl(
            kc,
            "-n",
            "flux-system",
            "get",
            "gitrepository",
            "flux-system",
            "-o",
            "jsonpath={.spec.url}",
        )
        assert url == f"file://{dra.resolve()}"
        assert main(["twin", "wait-ready", "--kubeconfig", str(kc), "--timeout", "60"]) == 0
        after = _kubectl(
            kc,
            "-n",
            "flux-system",
            "get",
            "gitrepository",
            "flux-system",
            "-o",
            "jsonpath={.status.artifact.revision}",
        )
        assert after != before and after.startswith("main@sha1:")
        applied = _kubectl(
            kc,
            "-n",
            "gpu-operator",
            "get",
            "ks",
            "dra-driver-nvidia-gpu",
            "-o",
            "jsonpath={.status.lastAppliedRevision}",
        )
        assert applied == after
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)


def test_bad_vars_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("nodes:\n- {name: n1, gpus: [{product: NVIDIA L4}]}\n")
    repo = tmp_path / "repo"
    (repo / "kubernetes/apps").mkdir(parents=True)
    bad = tmp_path / "vars.yaml"
    bad.write_text("- not\n- a map\n")
    code = main(
        [
            "twin",
            "serve",
            "--port",
            "0",
            "--kubeconfig-out",
            str(tmp_path / "kc"),
            "--nodes",
            str(nodes),
            "--repo",
            str(repo),
            "--vars",
            str(bad),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert str(bad) in err and "expected a map of variable names to values" in err


@needs_kubectl
def test_git_set_moves_every_source_that_serves_the_same_checkout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A repository whose Kustomizations read it as `home-ops` besides the twin's `flux-system`:
    # the merge moves both, and leaves a source of another repository alone.
    kc = tmp_path / "kc"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "gpushift", "twin", "serve", "--example", "homelab"),
            *("--time-scale", "200", "--port", "0", "--kubeconfig-out", str(kc)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def url(name: str) -> str:
        return _kubectl(
            kc, "-n", "flux-system", "get", "gitrepository", name, "-o", "jsonpath={.spec.url}"
        )

    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("gpushift twin serving https://127.0.0.1:")
        checkout = url("flux-system")
        for name, where in (("home-ops", checkout), ("charts", "https://example.com/charts")):
            manifest = tmp_path / f"{name}.yaml"
            manifest.write_text(
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n"
                f"  name: {name}\n  namespace: flux-system\nspec:\n  interval: 1h\n"
                f"  url: {where}\n"
            )
            _kubectl(kc, "apply", "-f", str(manifest))
        capsys.readouterr()
        dra = write_example(tmp_path / "dra", allocator="dra", sharing=5)
        assert main(["twin", "git-set", str(dra), "--kubeconfig", str(kc)]) == 0
        moved = f"file://{dra.resolve()}"
        assert (url("flux-system"), url("home-ops")) == (moved, moved)
        assert url("charts") == "https://example.com/charts"
        assert (
            "GitRepository/flux-system/flux-system, GitRepository/flux-system/home-ops now at"
            in (capsys.readouterr().out)
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
