"""migrate --write on every fixture repository (partial and whole clusters) and the project's
example: either the written files all parse and the tree checks clean, or it refuses (exit 2)
with nothing changed."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.error import ReusedAnchorWarning
from tests.migrate.conftest import REPOS, ROOT, snapshot

from gpushift._errors import InputError
from gpushift.gitops import summarize
from gpushift.migrate import Options, migrate, read_repository
from gpushift.rules import run_check

pytestmark = [pytest.mark.slow(seconds=20)]

FULL = REPOS.parent / "full"
TREES = sorted(
    [p for p in (*REPOS.glob("*"), *FULL.glob("*")) if p.is_dir()]
    + [ROOT / "examples" / "homelab-repo"]
)


def _parses(text: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReusedAnchorWarning)
        list(YAML(typ="rt").load_all(text))


@pytest.mark.parametrize("to", ["dra", "device-plugin"])
@pytest.mark.parametrize("tree", TREES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_written_clean_or_refused_untouched(tree: Path, to: str, tmp_path: Path) -> None:
    root = tmp_path / tree.name
    shutil.copytree(tree, root)
    before = snapshot(root)
    try:
        result = migrate(root, Options(to=to), write=True)  # type: ignore[arg-type]
    except InputError:
        assert snapshot(root) == before
        return
    after = snapshot(root)
    if result.plan.empty:
        assert after == before
        return
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed
    for rel in sorted(changed & after.keys()):
        if rel.endswith((".yaml", ".yml")):
            _parses(after[rel].decode())
    assert run_check([root]).exit_code == 0
    repo, _, _ = read_repository(root)
    assert summarize(repo).allocator == ("dra" if to == "dra" else "device-plugin")
