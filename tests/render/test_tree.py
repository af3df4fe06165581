"""Every allocator × sharing combination the config allows: `gpushift check` passes the tree and
`kubectl kustomize` builds every kustomization.yaml. Also determinism.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushift._errors import InputError
from gpushift.render import parse_config, render_tree

Tree = dict[str, str]

ALLOCATORS = ("gpu-operator", "device-plugin", "dra")
SHARINGS: tuple[Any, ...] = ("exclusive", 1, 2, 5, "memory", "unlimited")
# Hand-derived from the rules in docs/config.md: the device plugin cannot do memory or
# unlimited and needs replicas >= 2; under dra, memory cannot serve the homelab's bridged
# llmkube InferenceService.
REFUSED = {
    ("gpu-operator", 1),
    ("gpu-operator", "memory"),
    ("gpu-operator", "unlimited"),
    ("device-plugin", 1),
    ("device-plugin", "memory"),
    ("device-plugin", "unlimited"),
    ("dra", "memory"),
}
ALLOWED = [(a, s) for a in ALLOCATORS for s in SHARINGS if (a, s) not in REFUSED]
# The one combination the example refuses, made valid by leaving out the bridged consumer.
MEMORY_MEDIA_ONLY = ("dra", "memory")
# A second cluster: not Talos (operator-installed driver), a tainted GPU pool, another GPU
# namespace and apps path, and every consumer style.
VARIANT: dict[str, Any] = {
    "cluster": {
        "talos": False,
        "gpuNamespace": "nvidia",
        "appsPath": "clusters/main/apps",
        "gpuNodes": {
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "ai", "effect": "NoSchedule"}
            ]
        },
    },
    "consumers": [
        {"namespace": "lab", "name": "trainer", "style": "deployment", "image": "nvcr.io/x:1"},
        {"namespace": "lab", "name": "notebook", "style": "app-template", "image": "quay.io/y:2"},
        {"namespace": "ai", "name": "qwen", "style": "inference-service", "model": "hf://q/q"},
    ],
}
VARIANT_COMBOS = [(a, s) for a in ALLOCATORS for s in ("exclusive", 3)]


def variant_tree(allocator: str, sharing: Any) -> Tree:
    data = {**VARIANT, "allocator": allocator, "sharing": sharing}
    return render_tree(parse_config(yaml.safe_dump(data, sort_keys=False), display="v.yaml"))


def _combination_ids(combo: tuple[str, Any]) -> str:
    return f"{combo[0]}-{combo[1]}"


@pytest.fixture
def render_combo(
    tree_for: Callable[..., Tree], homelab_data: dict[str, Any]
) -> Callable[[tuple[str, Any]], Tree]:
    def build(combo: tuple[str, Any]) -> Tree:
        if combo == MEMORY_MEDIA_ONLY:
            media = [c for c in homelab_data["consumers"] if c["namespace"] == "media"]
            return tree_for(*combo, consumers=media)
        return tree_for(*combo)

    return build


def write(tree: Tree, root: Path) -> Path:
    for rel, text in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("combo", [(a, s) for a in ALLOCATORS for s in SHARINGS], ids=str)
def test_every_combination_is_allowed_or_refused_as_documented(
    combo: tuple[str, Any], tree_for: Callable[..., Tree]
) -> None:
    if combo in REFUSED:
        with pytest.raises(InputError):
            tree_for(*combo)
    else:
        assert tree_for(*combo)


def test_rerender_is_byte_identical(homelab_data: dict[str, Any]) -> None:
    # Two configs parsed independently, so nothing is shared between the two renders; one
    # sharing mode per allocator covers every renderer.
    for allocator, sharing in (("gpu-operator", 5), ("device-plugin", 5), ("dra", "unlimited")):
        data = {**homelab_data, "allocator": allocator, "sharing": sharing}
        text = yaml.safe_dump(data, sort_keys=False)
        first = render_tree(parse_config(text, display="a.yaml"))
        second = render_tree(parse_config(text, display="b.yaml"))
        assert first == second
        assert first is not second


def test_tree_paths_and_text_form(render_combo: Callable[[tuple[str, Any]], Tree]) -> None:
    tree = render_combo(("dra", 5))
    assert list(tree) == sorted(tree)
    for path, text in tree.items():
        assert path.startswith("kubernetes/apps/")
        assert path.endswith(".yaml")
        assert text.endswith("\n") and not text.endswith("\n\n")
        assert "\t" not in text
        assert all(len(line) <= 100 for line in text.splitlines()), path


# --- kubectl kustomize -----------------------------------------------------------------------


def _kustomize_inputs(tree: Tree) -> Iterator[tuple[str, Tree]]:
    """Each folder holding a kustomization.yaml, with the files a build of it reads.

    Those are the folder's own files and the ``<app>/ks.yaml`` files a namespace folder lists.
    """
    for path in tree:
        if path.endswith("/kustomization.yaml"):
            folder = path.rsplit("/", 1)[0]
            inputs = {}
            for p, text in tree.items():
                if not p.startswith(folder + "/"):
                    continue
                rel = p[len(folder) + 1 :]
                if "/" not in rel or (rel.count("/") == 1 and rel.endswith("/ks.yaml")):
                    inputs[rel] = text
            yield folder, inputs


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_every_kustomization_builds(
    render_combo: Callable[[tuple[str, Any]], Tree], tmp_path: Path
) -> None:
    # Identical folders recur across combinations; build each distinct one once.
    jobs: dict[str, tuple[str, Tree]] = {}
    trees = [(combo, render_combo(combo)) for combo in [*ALLOWED, MEMORY_MEDIA_ONLY]]
    trees += [(combo, variant_tree(*combo)) for combo in VARIANT_COMBOS]
    for combo, tree in trees:
        for folder, inputs in _kustomize_inputs(tree):
            digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
            jobs.setdefault(digest, (f"{combo} {folder}", inputs))

    def build(digest: str) -> subprocess.CompletedProcess[str]:
        root = write(jobs[digest][1], tmp_path / digest[:16])
        return subprocess.run(
            ["kubectl", "kustomize", str(root)], capture_output=True, text=True, check=False
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(jobs, pool.map(build, jobs), strict=True))
    for digest, out in results.items():
        where, inputs = jobs[digest]
        assert out.returncode == 0, f"{where}: {out.stderr}"
        built = list(yaml.safe_load_all(out.stdout))
        # kustomize emits every object of every listed file, nothing dropped.
        listed = yaml.safe_load(inputs["kustomization.yaml"])["resources"]
        expected = sum(
            len([d for d in yaml.safe_load_all(inputs[r.removeprefix("./")]) if d]) for r in listed
        )
        assert len(built) == expected, where
    assert len(jobs) > 20


# --- gpushift check --------------------------------------------------------------------------


def _check_registered() -> bool:
    from typer.main import get_command

    from gpushift.cli import app

    command: Any = get_command(app)
    return "check" in getattr(command, "commands", {})


# Warnings a sharing mode raises by design: unlimited has no per-card ceiling, which is the
# point of choosing it (rule unlimited-no-ceiling, docs/rules.md).
EXPECTED_WARNINGS: dict[Any, set[str]] = {"unlimited": {"unlimited-no-ceiling"}}


@pytest.mark.skipif(
    not _check_registered(), reason="gpushift check (issue 3) is not registered yet"
)
@pytest.mark.parametrize("combo", [*ALLOWED, MEMORY_MEDIA_ONLY], ids=_combination_ids)
def test_check_passes_the_rendered_tree(
    combo: tuple[str, Any],
    render_combo: Callable[[tuple[str, Any]], Tree],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gpushift.cli import main

    root = write(render_combo(combo), tmp_path / "repo")
    code = main(["check", str(root), "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    serious = [f for f in report["findings"] if f["severity"] in ("error", "warning")]
    unexpected = [f for f in serious if f["rule"] not in EXPECTED_WARNINGS.get(combo[1], set())]
    assert unexpected == []
    assert code == 0
    expected_allocator = "device-plugin" if combo[0] != "dra" else "dra"
    assert report["summary"]["allocator"] == expected_allocator


@pytest.mark.skipif(
    not _check_registered(), reason="gpushift check (issue 3) is not registered yet"
)
@pytest.mark.parametrize("combo", VARIANT_COMBOS, ids=_combination_ids)
def test_check_passes_the_variant_tree(
    combo: tuple[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpushift.cli import main

    root = write(variant_tree(*combo), tmp_path / "repo")
    code = main(["check", str(root), "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert [f for f in report["findings"] if f["severity"] != "info"] == []
    assert code == 0


def test_rerun_in_fresh_processes_is_byte_identical(tmp_path: Path) -> None:
    import os
    import sys

    trees = []
    base = [sys.executable, "-m", "gpushift", "render", "--example", "homelab"]
    render_dra_5 = [*base, "--allocator", "dra", "--sharing", "5"]
    for seed in ("1", "2"):
        out = tmp_path / f"out-{seed}"
        subprocess.run(
            [*render_dra_5, "--out", str(out)],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        trees.append({p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()})
    assert trees[0] == trees[1]
    assert len(trees[0]) > 40
