"""The README's tour: render's homelab example, on either device-plugin allocator, migrates to
DRA and back, checking clean each way."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpushift._sharing import Allocator
from gpushift.gitops import load_repo, summarize
from gpushift.migrate import Options, migrate
from gpushift.render import load_example, render_tree, with_overrides
from gpushift.reports import Severity
from gpushift.rules import check_repo


def _render(root: Path, allocator: Allocator, sharing: int) -> None:
    cfg = with_overrides(load_example("homelab"), allocator=allocator, sharing=sharing)
    for rel, text in render_tree(cfg).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _errors(root: Path) -> list[str]:
    return [
        f"{f.path}:{f.line} {f.rule}"
        for f in check_repo(load_repo([root]))
        if f.severity is Severity.ERROR
    ]


@pytest.mark.parametrize(
    ("allocator", "sharing"), [(Allocator.GPU_OPERATOR, 5), (Allocator.DEVICE_PLUGIN, 4)]
)
def test_homelab_migrates_both_ways(allocator: Allocator, sharing: int, tmp_path: Path) -> None:
    _render(tmp_path, allocator, sharing)
    start = summarize(load_repo([tmp_path]))
    assert (start.allocator, start.sharing.replicas) == ("device-plugin", sharing)
    assert migrate(tmp_path, Options(to="dra"), write=True).written
    after = summarize(load_repo([tmp_path]))
    assert (after.allocator, after.sharing.mode, after.sharing.replicas) == (
        "dra",
        "consumable-shares",
        sharing,
    )
    assert _errors(tmp_path) == []
    assert migrate(tmp_path, Options(to="device-plugin"), write=True).written
    back = summarize(load_repo([tmp_path]))
    assert (back.allocator, back.sharing) == (start.allocator, start.sharing)
    assert [(c.name, c.request) for c in back.consumers] == [
        (c.name, c.request) for c in start.consumers
    ]
    assert _errors(tmp_path) == []
