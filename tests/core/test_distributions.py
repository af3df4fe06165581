"""The two distributions: gpushift's wheel holds no twin code and runs without it; the twin's
wheel holds the twin and brings `gpushift rehearse` and `gpushift twin` back.

Built with the same uv the Makefile installs (``python3 -m uv``), from this checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_REPO = ROOT / "examples" / "homelab-repo"


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    for python in ("python3", sys.executable):
        probe = subprocess.run([python, "-m", "uv", "--version"], capture_output=True)
        if probe.returncode == 0:
            return [python, "-m", "uv"]
    pytest.fail("uv is not installed: `make setup` installs it (python3 -m pip install uv)")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [*_uv(), "build", "--all-packages", "--wheel", "-q", "-o", str(out)],
        cwd=ROOT,
        check=True,
    )
    built = {p.name.split("-")[0]: p for p in out.glob("*.whl")}
    assert sorted(built) == ["gpushift", "gpushift_twin"]
    return built


def _metadata(wheel: Path) -> tuple[list[str], dict[str, list[str]], str]:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        headers = Parser().parsestr(z.read(meta).decode())
        entry_points = z.read(points[0]).decode() if points else ""
    return names, {"Requires-Dist": headers.get_all("Requires-Dist") or []}, entry_points


def test_the_product_wheel_holds_no_twin_code(wheels: dict[str, Path]) -> None:
    names, meta, entry_points = _metadata(wheels["gpushift"])
    tops = {n.split("/")[0] for n in names}
    assert tops == {"gpushift", "gpushift-0.1.0.dist-info"}
    # The twin's modules by their old and new homes, and its only users (rehearse, the CLI).
    assert not [n for n in names if "twin" in n or "rehearse" in n]
    assert "gpushift-twin==0.1.0; extra == 'twin'" in meta["Requires-Dist"]
    # The twin's server and report libraries are the twin's, not the product's.
    product_deps = {r.split(">")[0].split("=")[0].split(";")[0] for r in meta["Requires-Dist"]}
    assert not product_deps & {"aiohttp", "plotly", "croniter", "lazy-loader"}
    assert "gpushift = gpushift.cli:main" in entry_points


def test_the_twin_wheel_holds_the_twin_and_its_commands(wheels: dict[str, Path]) -> None:
    names, meta, entry_points = _metadata(wheels["gpushift_twin"])
    assert {n.split("/")[0] for n in names} == {"gpushift_twin", "gpushift_twin-0.1.0.dist-info"}
    for module in ("apiserver/_server.py", "cluster/_kubelet.py", "flux/_kustomizations.py"):
        assert f"gpushift_twin/{module}" in names
    assert "gpushift_twin/rehearse/_run.py" in names
    assert "gpushift==0.1.0" in meta["Requires-Dist"]
    assert "[gpushift.commands]" in entry_points
    assert "rehearse = gpushift_twin.cli:run" in entry_points
    assert "twin = gpushift_twin.cli:run" in entry_points


@pytest.mark.slow(seconds=20)
def test_gpushift_alone_runs_and_names_the_extra(wheels: dict[str, Path], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([*_uv(), "venv", "-q", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [*_uv(), "pip", "install", "-q", "--python", str(python), str(wheels["gpushift"])],
        check=True,
    )
    gpushift = venv / "bin" / "gpushift"

    checked = subprocess.run(
        [str(gpushift), "check", str(EXAMPLE_REPO)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr
    for command in (["rehearse", "--example", "homelab"], ["twin", "serve", "-h"]):
        ran = subprocess.run([str(gpushift), *command], capture_output=True, text=True)
        assert ran.returncode == 2
        assert ran.stderr == (
            f"gpushift: error: `gpushift {command[0]}` comes with the twin, which is not "
            "installed: pip install 'gpushift[twin]'\n"
        )
    imported = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util; print(importlib.util.find_spec('gpushift_twin'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout == "None\n"
