"""The seed cluster's time-slicing before-state, migrated, against its later DRA state.

Expectations come from reading the fixture files: ``LukeEvansTech__talos-cluster`` (gpu-operator
with devicePlugin on, time-slicing replicas 5, five app-template media consumers and one llmkube
InferenceService) and ``LukeEvansTech__talos-cluster__later-dra`` (the DRA driver 0.5.0 with
consumableShares 5, nvidiaDriverRoot /usr/local, template any-nvidia-gpu in media).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.migrate.conftest import REPOS, copy_repo, needs_fixtures

from gpushift.gitops import load_repo, summarize
from gpushift.migrate import Options, migrate

pytestmark = needs_fixtures

LATER = REPOS / "LukeEvansTech__talos-cluster__later-dra"
APPS = Path("kubernetes/apps")
CONSUMERS = {
    # release -> (controller, GPU container), as their helmrelease.yaml files write them
    "jellyfin": ("jellyfin", "app"),
    "plex": ("plex", "app"),
    "tdarr": ("tdarr", "node"),
    "pinchflat": ("pinchflat", "app"),
    "dispatcharr": ("dispatcharr", "app"),
}


def _doc(path: Path, index: int = 0) -> Any:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None][index]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path_factory.mktemp("luke"))
    result = migrate(root, Options(to="dra"), write=True)
    assert result.written and result.exit_code == 0
    return root


def test_the_three_values_flip_together(migrated: Path) -> None:
    op = _doc(migrated / APPS / "gpu-operator/gpu-operator/app/helmrelease.yaml")
    assert op["spec"]["values"]["devicePlugin"]["enabled"] is False
    dra = _doc(migrated / APPS / "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    later = _doc(LATER / APPS / "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    values, want = dra["spec"]["values"], later["spec"]["values"]
    assert values["resources"]["gpus"]["enabled"] is True is want["resources"]["gpus"]["enabled"]
    assert values["gpuResourcesEnabledOverride"] is True is want["gpuResourcesEnabledOverride"]


def test_shares_gate_and_driver_root_match_the_later_state(migrated: Path) -> None:
    dra = _doc(migrated / APPS / "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    later = _doc(LATER / APPS / "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml")
    values, want = dra["spec"]["values"], later["spec"]["values"]
    assert values["consumableShares"] == want["consumableShares"] == 5
    assert values["featureGates"] == want["featureGates"] == {"ConsumableShares": True}
    assert values["nvidiaDriverRoot"] == want["nvidiaDriverRoot"] == "/usr/local"
    assert values["resources"]["computeDomains"] == {"enabled": False}
    assert dra["spec"]["chartRef"] == later["spec"]["chartRef"]


def test_chart_source_is_unsigned_0_5_with_its_reason(migrated: Path) -> None:
    path = migrated / APPS / "gpu-operator/dra-driver-nvidia-gpu/app/ocirepository.yaml"
    oci = _doc(path)
    later = _doc(LATER / APPS / "gpu-operator/dra-driver-nvidia-gpu/app/ocirepository.yaml")
    assert oci["spec"]["url"] == later["spec"]["url"]
    assert oci["spec"]["ref"]["tag"] == later["spec"]["ref"]["tag"] == "0.5.0"
    assert "verify" not in oci["spec"]
    assert "no cosign signature, so there is no verify block" in path.read_text()


def test_driver_kustomization_waits_for_the_operator(migrated: Path) -> None:
    ks = _doc(migrated / APPS / "gpu-operator/dra-driver-nvidia-gpu/ks.yaml")
    later = _doc(LATER / APPS / "gpu-operator/dra-driver-nvidia-gpu/ks.yaml")
    assert ks["metadata"] == {"name": "dra-driver-nvidia-gpu", "namespace": "gpu-operator"}
    assert ks["spec"]["dependsOn"] == later["spec"]["dependsOn"] == [{"name": "gpu-operator"}]
    assert ks["spec"]["path"] == later["spec"]["path"]
    assert ks["spec"]["healthChecks"] == later["spec"]["healthChecks"]
    parent = _doc(migrated / APPS / "gpu-operator/kustomization.yaml")
    assert parent["resources"] == [
        "./namespace.yaml",
        "./gpu-operator/ks.yaml",
        "./dra-driver-nvidia-gpu/ks.yaml",
    ]
    operator_ks = _doc(migrated / APPS / "gpu-operator/gpu-operator/ks.yaml")
    assert operator_ks["spec"]["healthChecks"] == [
        {
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "name": "gpu-operator",
            "namespace": "gpu-operator",
        }
    ]


def test_claim_template_and_its_namespace(migrated: Path) -> None:
    rct = _doc(migrated / APPS / "media/gpu-claim-templates/app/resourceclaimtemplate.yaml")
    later = _doc(LATER / APPS / "media/gpu-claim-templates/app/resourceclaimtemplate.yaml")
    assert rct["metadata"] == later["metadata"] == {"name": "any-nvidia-gpu", "namespace": "media"}
    assert rct["spec"] == later["spec"]
    ks = _doc(migrated / APPS / "media/gpu-claim-templates/ks.yaml")
    want = _doc(LATER / APPS / "media/gpu-claim-templates/ks.yaml")
    assert ks["spec"]["dependsOn"] == want["spec"]["dependsOn"]
    assert ks["spec"]["path"] == want["spec"]["path"]
    assert ks["spec"]["targetNamespace"] == "media"
    # The template spec is immutable: its Kustomization recreates it.
    assert ks["spec"]["force"] is True


@pytest.mark.parametrize("release", sorted(CONSUMERS))
def test_consumers_claim_the_template(migrated: Path, release: str) -> None:
    controller, container = CONSUMERS[release]
    hr = _doc(migrated / APPS / f"media/{release}/app/helmrelease.yaml")
    values = hr["spec"]["values"]
    ctrl = values["controllers"][controller]
    pod = ctrl.get("pod", {}).get("resourceClaims") or values["defaultPodOptions"]["resourceClaims"]
    assert pod == [{"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}]
    resources = ctrl["containers"][container]["resources"]
    assert resources["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/gpu" not in resources.get("requests", {})
    assert "nvidia.com/gpu" not in resources.get("limits", {})
    # Its Kustomization waits for the claim template as well as for what it waited for before.
    ks = _doc(migrated / APPS / f"media/{release}/ks.yaml")
    assert ks["spec"]["dependsOn"][0] == {"name": "gpu-operator", "namespace": "gpu-operator"}
    assert ks["spec"]["dependsOn"][-1] == {"name": "gpu-claim-templates"}
    # Placement stays: the runtime class and the GPU-node affinity.
    options = values["defaultPodOptions"]
    assert options["runtimeClassName"] == "nvidia"
    term = options["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "nvidia.com/gpu.present"


def test_bridged_service_is_unchanged(migrated: Path) -> None:
    rel = APPS / "ai/llmkube/models/qwen3.8-27b.yaml"
    assert (migrated / rel).read_bytes() == (
        REPOS / "LukeEvansTech__talos-cluster" / rel
    ).read_bytes()
    summary = summarize(load_repo([migrated]))
    requests = {(c.namespace, c.name): c.request for c in summary.consumers}
    assert requests[("ai", "llama-nvidia")] == "bridged"
    assert {requests[("media", r)] for r in CONSUMERS} == {"claim"}
    assert summary.allocator == "dra"
    assert summary.claim_templates == ("media/any-nvidia-gpu",)


def test_time_slicing_config_is_gone(migrated: Path) -> None:
    app = migrated / APPS / "gpu-operator/gpu-operator/app"
    assert not (app / "time-slicing-config.yaml").exists()
    assert "./time-slicing-config.yaml" not in _doc(app / "kustomization.yaml")["resources"]
    assert "config" not in _doc(app / "helmrelease.yaml")["spec"]["values"]["devicePlugin"]


def test_summary_names_what_needs_a_person(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    result = migrate(root, Options(to="dra"))
    text = result.summary()
    assert "Needs a person:" in text
    assert "kubernetes/apps/ai/llmkube/models/qwen3.8-27b.yaml" in text
    assert "InferenceService ai/llama-nvidia" in text
    # No kustomization.yaml for media/ in this partial tree: the new app must be listed by hand.
    assert "kubernetes/apps/media/gpu-claim-templates/ks.yaml: add it" in text


def test_jellyfin_keeps_every_other_line_byte_for_byte(tmp_path: Path) -> None:
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    rel = APPS / "media/jellyfin/app/helmrelease.yaml"
    before = (root / rel).read_text().splitlines(keepends=True)
    migrate(root, Options(to="dra"), write=True)
    after = (root / rel).read_text().splitlines(keepends=True)
    # The file has two `nvidia.com/gpu: 1` lines (requests and limits); they go, and two lines of
    # container claims plus three of pod resourceClaims come in.
    kept = [line for line in before if line.strip() != "nvidia.com/gpu: 1"]
    assert len(kept) == len(before) - 2
    assert len(after) == len(kept) + 5
    it = iter(after)
    assert all(any(line == other for other in it) for line in kept)  # kept, in order
    added = [line for line in after if line not in before]
    assert [line.strip() for line in added] == [
        "claims:",
        "- name: gpu",
        "resourceClaims:",
        "- name: gpu",
        "resourceClaimTemplateName: any-nvidia-gpu",
    ]


@pytest.mark.parametrize(
    "rel",
    [
        "gpu-operator/dra-driver-nvidia-gpu/ks.yaml",
        "gpu-operator/dra-driver-nvidia-gpu/app/helmrelease.yaml",
        "gpu-operator/dra-driver-nvidia-gpu/app/ocirepository.yaml",
        "media/gpu-claim-templates/ks.yaml",
    ],
)
def test_new_files_carry_the_repositorys_schema_lines(migrated: Path, rel: str) -> None:
    # The later state's files start with `---` and the same yaml-language-server line as the
    # operator's files of that name.
    want = (LATER / APPS / rel).read_text().splitlines()[:2]
    assert want[1].startswith("# yaml-language-server: $schema=")
    assert (migrated / APPS / rel).read_text().splitlines()[:2] == want


def test_a_subdirectory_keeps_flux_paths_from_the_repository_root(tmp_path: Path) -> None:
    # Given kubernetes/apps rather than the root, files are placed relative to it, but the
    # Kustomizations' spec.path stays relative to the repository root, as Flux reads it.
    root = copy_repo("LukeEvansTech__talos-cluster", tmp_path)
    apps = root / APPS
    assert migrate(apps, Options(to="dra"), write=True).written
    ks = _doc(apps / "gpu-operator/dra-driver-nvidia-gpu/ks.yaml")
    assert ks["spec"]["path"] == "./kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app"
    rct_ks = _doc(apps / "media/gpu-claim-templates/ks.yaml")
    assert rct_ks["spec"]["path"] == "./kubernetes/apps/media/gpu-claim-templates/app"
    assert migrate(apps, Options(to="device-plugin"), write=True).written
    assert not (apps / "gpu-operator/dra-driver-nvidia-gpu").exists()
