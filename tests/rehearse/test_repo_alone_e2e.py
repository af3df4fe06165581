"""`rehearse --repo PATH` alone, on the twin: ``fixtures/coral-consumer`` (see
``test_repo_alone.py``) rehearsed without ``--target`` and without ``--nodes``, the default
inventory's labels read back from the twin over HTTP, and ``--nodes`` left as given."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpushift import kube
from gpushift_twin.rehearse import (
    DEFAULT_NODES,
    TwinOptions,
    as_json,
    as_text,
    default_inventory,
    rehearse,
    repo_seeds,
    running_twin,
    settle,
)
from gpushift_twin.rehearse import RehearseOptions as Options

pytestmark = [pytest.mark.slow(seconds=90)]

CORAL = Path(__file__).parent / "fixtures/coral-consumer"
CORAL_LABEL = "google.feature.node.kubernetes.io/coral"
TRANSCODE = "node-role.example.com/transcode"
LINES = [
    "target: the repository as `gpushift migrate --to dra` writes it (17 files changed)",
    "node gpu-node-0 labelled google.feature.node.kubernetes.io/coral=true: frigate requires "
    "it; give --nodes for your real nodes",
    "node gpu-node-1 labelled node-role.example.com/transcode=true: tdarr requires it; give "
    "--nodes for your real nodes",
]


def test_the_repository_alone_rehearses_both_moves(tmp_path: Path) -> None:
    result = rehearse(Options(example=None, repo=CORAL), workdir=tmp_path)
    assert [(r.to, r.result) for r in result.runs] == [("dra", "done"), ("device-plugin", "done")]
    assert result.violations == ()
    assert result.exit_code == 0
    # 17 files, read from the fixture: the DRA driver's four and its line in
    # kube-system/kustomization.yaml, the device plugin's four removed, the claim template's
    # three and its line in media/kustomization.yaml, and each consumer's deployment.yaml and
    # ks.yaml (a claim; dependsOn the driver and the template).
    assert result.setup == tuple(LINES)
    target = tmp_path / "target/kubernetes/apps"
    assert (target / "kube-system/dra-driver-nvidia-gpu/ks.yaml").is_file()
    frigate = yaml.safe_load((target / "media/frigate/app/deployment.yaml").read_text())
    pod = frigate["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}]
    # Both consumers Running before and after, 5 shares per card on every node.
    first, last = result.samples[0], result.samples[-1]
    assert first.gpu_pods_running == last.gpu_pods_running == 2
    assert first.allocatable == last.allocatable == tuple((f"gpu-node-{i}", 5) for i in range(3))
    # Under DRA each claim names its card: frigate's on the Coral node, tdarr's on the other.
    (after_dra,) = [cards for title, cards in result.cards if title == "after dra"]
    held = {t.rsplit("-", 2)[0]: c.node for c in after_dra for t in c.tenants}
    assert held == {"media/frigate": "gpu-node-0", "media/tdarr": "gpu-node-1"}
    text = as_text(result).splitlines()
    assert text[1:4] == LINES
    doc = as_json(result)
    assert doc["target"]["madeBy"] == "gpushift migrate --to dra"
    assert doc["target"]["filesChanged"] == 17
    assert doc["nodeLabels"] == [
        {"node": "gpu-node-0", "key": CORAL_LABEL, "value": "true", "requiredBy": ["frigate"]},
        {"node": "gpu-node-1", "key": TRANSCODE, "value": "true", "requiredBy": ["tdarr"]},
    ]


def test_the_default_nodes_carry_the_labels_and_the_consumers_run_there(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(default_inventory(CORAL).text, encoding="utf-8")
    options = TwinOptions(example=None, repo=CORAL, nodes=nodes)
    with (
        running_twin(options, workdir=tmp_path, settle=None) as twin,
        kube.connect(kubeconfig=twin.kubeconfig) as client,
    ):
        settled = settle(client, seeds=repo_seeds(CORAL), timeout=60)
        listed = client.list(kube.ResourceRef.named("Node"))
        pods = client.list(kube.ResourceRef.named("Pod"), namespace="media")
    assert settled.ok, [u.line() for u in settled.blocking]
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in listed}
    assert labels["gpu-node-0"][CORAL_LABEL] == "true"
    assert labels["gpu-node-1"][TRANSCODE] == "true"
    assert CORAL_LABEL not in labels["gpu-node-1"] and CORAL_LABEL not in labels["gpu-node-2"]
    assert TRANSCODE not in labels["gpu-node-0"] and TRANSCODE not in labels["gpu-node-2"]
    placed = {
        p["metadata"]["labels"]["app"]: (p["spec"].get("nodeName"), p["status"].get("phase"))
        for p in pods
    }
    assert placed == {"frigate": ("gpu-node-0", "Running"), "tdarr": ("gpu-node-1", "Running")}


def test_given_nodes_get_no_label_and_the_pending_consumers_are_explained(
    tmp_path: Path,
) -> None:
    # The consumers' Kustomizations neither wait nor health-check: the twin settles with both
    # Deployments applied and their pods Pending, and the rehearsal goes on, as before.
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(DEFAULT_NODES, encoding="utf-8")
    result = rehearse(Options(example=None, repo=CORAL, nodes=nodes), workdir=tmp_path / "w")
    assert result.node_labels == ()
    assert result.setup == (LINES[0],)
    assert nodes.read_text(encoding="utf-8") == DEFAULT_NODES
    start = [p for p in result.pending if p.startswith("at the start: ")]
    (frigate,) = [p for p in start if p.startswith("at the start: pod media/frigate-")]
    assert f"no node has the label {CORAL_LABEL}=true its nodeSelector asks for" in frigate
    (tdarr,) = [p for p in start if p.startswith("at the start: pod media/tdarr-")]
    assert "node(s) didn't match Pod's node affinity/selector" in tdarr
    assert result.samples[0].gpu_pods_running == 0
