"""llmkube InferenceServices rendered as llmkube's deployment builder does.

Expectations from defilantech/LLMKube: pkg/apiutil/gpu.go GPUCount takes
Model.spec.hardware.gpu.count when it is above zero, else InferenceService spec.resources.gpu,
and the container gets ``limits[nvidia.com/gpu]`` only for a count above zero.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpushift.gitops import load_repo


def _tree(tmp_path: Path, model_count: object, isvc_gpu: object) -> Path:
    gpu: dict[str, object] = {"enabled": True}
    if model_count is not None:
        gpu["count"] = model_count
    docs = [
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": "m", "namespace": "ai"},
            "spec": {"source": "https://example.invalid/m.gguf", "hardware": {"gpu": gpu}},
        },
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "metadata": {"name": "svc", "namespace": "ai"},
            "spec": {"modelRef": "m", "resources": {"gpu": isvc_gpu}},
        },
    ]
    (tmp_path / "llm.yaml").write_text(yaml.safe_dump_all(docs))
    return tmp_path


@pytest.mark.parametrize(
    ("model_count", "isvc_gpu", "limits"),
    [
        (2, 1, {"nvidia.com/gpu": 2}),  # the Model's count wins when above zero
        (0, 1, {"nvidia.com/gpu": 1}),  # zero means "not set": the service's count
        (-1, 1, {"nvidia.com/gpu": 1}),  # so does a negative one
        (None, 1, {"nvidia.com/gpu": 1}),
        (None, 0, None),  # no GPU asked for: no limits at all
        (True, 1, {"nvidia.com/gpu": 1}),  # a YAML boolean is not a count
    ],
)
def test_gpu_count_follows_llmkube(
    tmp_path: Path, model_count: object, isvc_gpu: object, limits: dict[str, int] | None
) -> None:
    repo = load_repo([_tree(tmp_path, model_count, isvc_gpu)])
    (workload,) = [w for w in repo.workloads if w.name == "svc"]
    (container,) = workload.pod.containers
    assert container.resources.get("limits") == limits
