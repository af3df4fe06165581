"""Rules see GPU consumers that arrive through operator CRDs; parked workloads hold nothing.

tests/rules/repos/crd-consumers deploys no allocator, so every running GPU request is a
no-advertiser; lines are counted in its files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpushift.rules import run_check

TREE = Path(__file__).parent / "repos" / "crd-consumers"


def test_operator_consumers_without_an_allocator() -> None:
    found = run_check([TREE]).findings
    unserved = {(f.path, f.line) for f in found if f.rule == "no-advertiser"}
    assert unserved == {
        ("kserve.yaml", 16),  # predictor.model nvidia.com/gpu
        ("ray.yaml", 25),  # RayCluster gpu group (the spare group is at replicas: 0)
        ("ray.yaml", 62),  # RayJob gpu group
        ("ray.yaml", 87),  # RayService gpu group
        ("kubeflow.yaml", 14),  # Notebook
        ("kubeflow.yaml", 32),  # PyTorchJob Master
        ("kubeflow.yaml", 42),  # PyTorchJob Worker
        ("kubeflow.yaml", 54),  # TrainJob resourcesPerNode
        ("knative-rollout.yaml", 13),  # Knative Service
        ("knative-rollout.yaml", 31),  # Rollout canary
    }
    # KServe's env: NVIDIA_VISIBLE_DEVICES=all with a GPU (line 12), and without one (29).
    assert [(f.path, f.line) for f in found if f.rule == "visible-devices-override"] == [
        ("kserve.yaml", 12)
    ]
    assert [(f.path, f.line) for f in found if f.rule == "gpu-access-without-allocation"] == [
        ("kserve.yaml", 29)
    ]
    # The unknown CRD's claim names a template that is not in the tree (line 12).
    assert [(f.path, f.line) for f in found if f.rule == "claim-template-missing"] == [
        ("other.yaml", 12)
    ]


def test_parked_deployment_is_not_left_pending(check: Any, kit: Any) -> None:
    parked = kit.deployment("app", kit.GPU_POD).replace(
        "spec:\n  selector", "spec:\n  replicas: 0\n  selector", 1
    )
    assert "no-advertiser" not in kit.ids(check({"app.yaml": parked}))
    running = kit.deployment("app", kit.GPU_POD)
    assert kit.only(check({"app.yaml": running}), "no-advertiser") == [("app.yaml", 16)]
