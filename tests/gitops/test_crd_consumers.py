"""GPU consumers through operator CRDs and parked workloads, read off
tests/rules/repos/crd-consumers (a tree without a Flux root: everything in it is deployed)."""

from __future__ import annotations

from pathlib import Path

from gpushift.gitops import load_repo, summarize

TREE = Path(__file__).resolve().parents[1] / "rules" / "repos" / "crd-consumers"


def test_every_operator_consumer_is_seen() -> None:
    s = summarize(load_repo([TREE]))
    got = {(c.kind, c.namespace, c.name, c.request) for c in s.consumers}
    assert got == {
        # KServe: the model container asks for a GPU; the other only sets
        # NVIDIA_VISIBLE_DEVICES=all (it reaches the GPU without asking).
        ("InferenceService", "ml", "llm", "extended"),
        ("InferenceService", "ml", "sidecar-reader", "none"),
        # Ray: the gpu worker group of each of RayCluster, RayJob and RayService; the heads
        # ask for nothing.
        ("RayCluster", "ray", "raycluster-gpu", "extended"),
        ("RayJob", "ray", "rayjob-gpu", "extended"),
        ("RayService", "ray", "rayservice-gpu", "extended"),
        # Kubeflow: the Notebook, both PyTorchJob roles, the TrainJob's resourcesPerNode.
        ("Notebook", "kubeflow-user", "jupyter", "extended"),
        ("PyTorchJob", "kubeflow-user", "mnist-master", "extended"),
        ("PyTorchJob", "kubeflow-user", "mnist-worker", "extended"),
        ("TrainJob", "kubeflow-user", "finetune", "extended"),
        # Knative Service and Argo Rollout with nvidia.com/gpu; the web Rollout asks nothing.
        ("Service", "ml", "whisper", "extended"),
        ("Rollout", "ml", "canary", "extended"),
        # An unknown CRD's embedded PodTemplateSpec with a claim; cpu-only is not a workload.
        ("Simulation", "lab", "sim", "claim"),
    }


def test_replicas_zero_is_parked_not_a_consumer() -> None:
    s = summarize(load_repo([TREE]))
    parked = {(c.kind, c.name) for c in s.parked}
    # the Deployment at replicas: 0 and the RayCluster's spare group at replicas: 0.
    assert parked == {("Deployment", "parked"), ("RayCluster", "raycluster-spare")}
    assert not {c.name for c in s.consumers} & {"parked", "raycluster-spare"}
    assert [c["name"] for c in s.to_dict()["parked"]] == ["parked", "raycluster-spare"]


def test_unknown_crd_without_gpu_is_no_workload() -> None:
    repo = load_repo([TREE])
    assert "cpu-only" not in {w.name for w in repo.workloads}
    assert "web" in {w.name for w in repo.workloads}  # a known CRD is read, GPU or not
