"""check on ApplicationSets with matrix, merge, cluster and network generators
(tests/rules/repos/appsets). Every GPU Deployment there asks for ``nvidia.com/gpu: 1`` (line
13) and nothing advertises GPUs, so ``no-advertiser`` names exactly the Deployments some
generated Application deploys."""

from __future__ import annotations

from pathlib import Path

from gpushift.gitops import load_repo
from gpushift.rules import run_check

TREE = Path(__file__).parent / "repos" / "appsets"


def test_generated_applications_reach_exactly_their_directories() -> None:
    report = run_check([TREE])
    reached = {(f.path, f.object) for f in report.findings if f.rule == "no-advertiser"}
    assert reached == {
        # matrix: clusters/a and clusters/b (git files, prefixed "config") each rendered into
        # the directories generator: workloads/a/* and workloads/b/*; workloads/c has no
        # cluster file, so idle is not deployed.
        ("workloads/a/vllm/deployment.yaml", "Deployment/vllm/vllm"),
        ("workloads/b/comfy/deployment.yaml", "Deployment/comfy/comfy"),
        # merge on app: plex keeps the base namespace, frigate takes the override's nvr;
        # ghost is only in the override, so it is dropped.
        ("media/plex/deployment.yaml", "Deployment/media/plex"),
        ("media/frigate/deployment.yaml", "Deployment/nvr/frigate"),
        # clusters {}: the local in-cluster and both cluster Secrets (gpu-1 from stringData,
        # cpu-1 from base64 data); per-cluster/retired names no cluster.
        ("per-cluster/in-cluster/deployment.yaml", "Deployment/agents/local-agent"),
        ("per-cluster/gpu-1/deployment.yaml", "Deployment/agents/gpu-agent"),
        ("per-cluster/cpu-1/deployment.yaml", "Deployment/agents/cpu-agent"),
        # selector gpu=true: only gpu-1 (the local cluster has no labels, cpu-1 is false);
        # the namespace is the generator's values.team.
        ("selected/gpu-1/deployment.yaml", "Deployment/ml/trainer"),
    }


def test_network_generators_are_reported_not_guessed() -> None:
    report = run_check([TREE])
    got = {
        (f.rule, f.severity.value, f.path, f.line, f.object)
        for f in report.findings
        if f.rule == "applicationset-not-expanded"
    }
    assert got == {
        # The scmProvider entry of org-repos (line 8 of bootstrap/forge.yaml).
        (
            "applicationset-not-expanded",
            "warning",
            "bootstrap/forge.yaml",
            8,
            "ApplicationSet/argocd/org-repos",
        ),
        # The pullRequest child of previews' matrix (line 32): the matrix cannot be expanded.
        (
            "applicationset-not-expanded",
            "warning",
            "bootstrap/forge.yaml",
            32,
            "ApplicationSet/argocd/previews",
        ),
    }
    message = next(f.message for f in report.findings if f.object.endswith("/org-repos"))
    assert "scmProvider" in message and "not seen" in message
    # Neither generates an Application: only the eight of the other sets exist.
    apps = {o.name for o in load_repo([TREE]).objects if o.kind == "Application"}
    assert apps == {
        "a-vllm",
        "b-comfy",
        "plex",
        "frigate",
        "in-cluster-agent",
        "gpu-1-agent",
        "cpu-1-agent",
        "gpu-1-training",
    }
    assert report.exit_code == 1  # from no-advertiser; the warnings alone would not fail


def test_no_network_generator_no_finding(tmp_path: Path) -> None:
    (tmp_path / "set.yaml").write_text(
        (TREE / "bootstrap" / "merge.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    report = run_check([tmp_path])
    assert not [f for f in report.findings if f.rule == "applicationset-not-expanded"]
