"""migrate --to dra on the seed cluster names the preemption its model relies on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SEED = Path(__file__).resolve().parents[3] / "shared/fixtures/full/LukeEvansTech__talos-cluster"


def _gpushift(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpushift", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_seed_migrated_to_dra_needs_a_person() -> None:
    # The seed's llmkube model runs at PriorityClass gpu-preemptible (-100), below its five
    # default-priority media apps; migrate --to dra must say that preemption ends.
    done = _gpushift("migrate", str(SEED), "--to", "dra")
    assert done.returncode == 1, done.stderr
    notes = done.stderr.split("Needs a person:\n", 1)[1].splitlines()
    (note,) = [n for n in notes if "dra-preemption-lost" in n]
    assert "InferenceService/ai/llama-nvidia (PriorityClass gpu-preemptible, priority -100)" in note
    assert "HelmRelease/media/plex" not in note  # the first three by name, then a count
    assert "HelmRelease/media/dispatcharr (no PriorityClass, priority 0)" in note
    assert "and 2 more" in note
