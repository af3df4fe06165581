"""check on the whole seed cluster (../shared/fixtures/full), which Flux applies cleanly."""

from __future__ import annotations

from pathlib import Path

from gpushift.rules import run_check

REPO = Path(__file__).resolve().parents[3] / "shared/fixtures/full/LukeEvansTech__talos-cluster"


def test_whole_cluster_has_no_error_finding() -> None:
    # Every Kustomization of this cluster is Ready on Flux, so no finding may claim a file
    # cannot be applied. Its recyclarr config (a configMapGenerator input with a `!env_var`
    # tag) and its AlertmanagerConfig (`matchType: =`) once read as yaml-errors.
    result = run_check([REPO])
    errors = [(f.rule, f.path) for f in result.findings if f.severity.value == "error"]
    assert errors == []
    assert {(f.rule, f.path.rsplit("/", 1)[-1]) for f in result.findings} == {
        ("driver-root-mismatch", "helmrelease.yaml"),
        ("unknown-chart-values", "helmrelease.yaml"),
    }
