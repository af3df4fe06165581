"""The way back to a tree with an error the cluster already ran: ``fixtures/operator-and-plugin``
is ``coral-consumer`` with gpu-operator's own device plugin beside the standalone chart, on the
same cards (check's ``dual-device-plugin``, as sepffuzzball/fuzzlab-gitops runs).

The move to DRA removes both plugins. The rollback's target is the tree the twin ran before
the move, the very revision the cutover journal recorded, so its error passes as a warning
(the cluster as it was, no worse) instead of refusing the way back.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from gpushift_twin.rehearse import RehearseOptions as Options
from gpushift_twin.rehearse import as_json, as_text, rehearse

pytestmark = [pytest.mark.slow(seconds=40)]

REPO = Path(__file__).parent / "fixtures/operator-and-plugin"
STANDALONE = "kubernetes/apps/kube-system/nvidia-device-plugin/app/helmrelease.yaml"


def _content_sha1(root: Path) -> str:
    """The twin's name for a plain directory's revision (docs/twin.md): SHA-1 over each file,
    in walk order with sorted names, as its relative path, a NUL and its bytes."""
    h = hashlib.sha1()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath, name)
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def test_the_way_back_restores_the_plugins_the_cluster_ran_with_a_warning(tmp_path: Path) -> None:
    text = (REPO / STANDALONE).read_text().splitlines()
    line = text.index("  values:") + 1
    result = rehearse(Options(example=None, repo=REPO), workdir=tmp_path)

    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.violations == ()
    assert result.exit_code == 0
    to_dra, back = result.runs
    assert to_dra.warnings == ()
    (warning,) = back.warnings
    assert warning.startswith(
        f"the cluster ran this before the move (the target is run {to_dra.run}'s starting "
        f"revision main@sha1:{_content_sha1(REPO)}): dual-device-plugin in {STANDALONE}:{line} "
        "(HelmRelease/kube-system/nvidia-device-plugin): HelmRelease/gpu-operator/gpu-operator "
    )
    # Both allocators' agents came back: the cluster as it was before the move.
    assert result.samples[0].allocatable == result.samples[-1].allocatable
    assert f"  warning: {warning}" in as_text(result).splitlines()
    assert as_json(result)["runs"][1]["warnings"] == [warning]
