"""Shared helpers: fixture repositories copied to tmp_path before anything writes to them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPOS = ROOT / ".." / "shared" / "fixtures" / "repos"

#: Fixture repositories whose active allocator is the device plugin (read from their files:
#: gpu-operator with devicePlugin on, or a standalone nvidia-device-plugin release), and the
#: time-slicing replicas their config gives each card.
DEVICE_PLUGIN_REPOS = {
    "LukeEvansTech__talos-cluster": 5,
    "jfroy__flatops": 8,
    "heavybullets8__heavy-ops": 4,
    "Tanguille__cluster__88576ac4-device-plugin": 8,
}

needs_fixtures = pytest.mark.skipif(not REPOS.is_dir(), reason="fixture repositories not present")


def copy_repo(name: str, tmp_path: Path) -> Path:
    """A copy of fixture repository ``name`` under ``tmp_path``."""
    target = tmp_path / name
    shutil.copytree(REPOS / name, target)
    return target


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
