"""The homelab example renders the LukeEvansTech repository's own before and after states.

The fixture repositories are read in place. The before state is gpu-operator time-slicing with
replicas 5; the after state is the repository's DRA migration (dra-driver-nvidia-gpu 0.5.0,
5 consumable shares, a claim template in media).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushift._sharing import Allocator
from gpushift.render import load_example, render_tree, with_overrides

REPOS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "repos"
BEFORE = REPOS / "LukeEvansTech__talos-cluster"
AFTER = REPOS / "LukeEvansTech__talos-cluster__later-dra"

pytestmark = pytest.mark.skipif(not AFTER.is_dir(), reason="fixture repositories are absent")


def fixture_docs(repo: Path, rel: str) -> list[Any]:
    return [d for d in yaml.safe_load_all((repo / rel).read_text(encoding="utf-8")) if d]


def rendered_docs(tree: dict[str, str], rel: str) -> list[Any]:
    return [d for d in yaml.safe_load_all(tree[rel]) if d]


@pytest.fixture(scope="module")
def dra_tree() -> dict[str, str]:
    return render_tree(with_overrides(load_example("homelab"), allocator=Allocator.DRA))


@pytest.fixture(scope="module")
def operator_tree() -> dict[str, str]:
    return render_tree(load_example("homelab"))


DRA_APP = "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu"


def test_dra_driver_values_equal_the_repository_after_migration(dra_tree: dict[str, str]) -> None:
    (theirs,) = fixture_docs(AFTER, f"{DRA_APP}/app/helmrelease.yaml")
    (ours,) = rendered_docs(dra_tree, f"{DRA_APP}/app/helmrelease.yaml")
    assert ours["spec"]["values"] == theirs["spec"]["values"]
    assert ours["spec"]["chartRef"] == theirs["spec"]["chartRef"]


def test_dra_driver_source_equals_the_repository(dra_tree: dict[str, str]) -> None:
    (theirs,) = fixture_docs(AFTER, f"{DRA_APP}/app/ocirepository.yaml")
    (ours,) = rendered_docs(dra_tree, f"{DRA_APP}/app/ocirepository.yaml")
    for key in ("url", "ref", "layerSelector"):
        assert ours["spec"][key] == theirs["spec"][key]


def test_dra_driver_kustomization_orders_like_the_repository(dra_tree: dict[str, str]) -> None:
    (theirs,) = fixture_docs(AFTER, f"{DRA_APP}/ks.yaml")
    (ours,) = rendered_docs(dra_tree, f"{DRA_APP}/ks.yaml")
    for key in ("dependsOn", "healthChecks", "path", "sourceRef", "targetNamespace"):
        assert ours["spec"][key] == theirs["spec"][key], key
    assert ours["metadata"] == theirs["metadata"]


def test_claim_template_equals_the_repository(dra_tree: dict[str, str]) -> None:
    rel = "kubernetes/apps/media/gpu-claim-templates/app/resourceclaimtemplate.yaml"
    assert rendered_docs(dra_tree, rel) == fixture_docs(AFTER, rel)
    (theirs,) = fixture_docs(AFTER, "kubernetes/apps/media/gpu-claim-templates/ks.yaml")
    (ours,) = rendered_docs(dra_tree, "kubernetes/apps/media/gpu-claim-templates/ks.yaml")
    assert ours["spec"]["dependsOn"] == theirs["spec"]["dependsOn"]
    # Their template comment asks for force: true on a change; the rendered tree has it.
    assert ours["spec"]["force"] is True


def test_time_slicing_config_equals_the_repository_before(operator_tree: dict[str, str]) -> None:
    rel = "kubernetes/apps/gpu-operator/gpu-operator/app/time-slicing-config.yaml"
    (theirs,) = fixture_docs(BEFORE, rel)
    (ours,) = rendered_docs(operator_tree, rel)
    assert ours["metadata"] == theirs["metadata"]
    assert yaml.safe_load(ours["data"]["any"]) == yaml.safe_load(theirs["data"]["any"])
    assert ours["data"]["any"] == theirs["data"]["any"]


def test_gpu_operator_values_agree_with_the_repository_before(
    operator_tree: dict[str, str],
) -> None:
    rel = "kubernetes/apps/gpu-operator/gpu-operator/app/helmrelease.yaml"
    (theirs,) = fixture_docs(BEFORE, rel)
    (ours,) = rendered_docs(operator_tree, rel)
    # The values gpushift renders, compared with the same keys in the repository.
    for key in ("driver", "toolkit", "cdi", "devicePlugin", "gfd", "dcgmExporter"):
        assert ours["spec"]["values"][key] == theirs["spec"]["values"][key], key


def test_runtime_class_equals_the_repository(operator_tree: dict[str, str]) -> None:
    rel = "kubernetes/apps/gpu-operator/gpu-operator/app/runtimeclass.yaml"
    assert rendered_docs(operator_tree, rel) == fixture_docs(BEFORE, rel)


def test_media_consumers_ask_as_the_repository_does(operator_tree: dict[str, str]) -> None:
    for app in ("jellyfin", "pinchflat", "dispatcharr"):
        rel = f"kubernetes/apps/media/{app}/app/helmrelease.yaml"
        (theirs,) = fixture_docs(BEFORE, rel)
        (ours,) = rendered_docs(operator_tree, rel)
        their_pod = theirs["spec"]["values"]["defaultPodOptions"]
        our_pod = ours["spec"]["values"]["defaultPodOptions"]
        assert our_pod["runtimeClassName"] == their_pod["runtimeClassName"]
        assert our_pod["affinity"] == their_pod["affinity"]
        their_res = theirs["spec"]["values"]["controllers"][app]["containers"]["app"]["resources"]
        our_res = ours["spec"]["values"]["controllers"][app]["containers"]["app"]["resources"]
        assert our_res["limits"]["nvidia.com/gpu"] == their_res["limits"]["nvidia.com/gpu"]
        assert our_res["requests"]["nvidia.com/gpu"] == their_res["requests"]["nvidia.com/gpu"]
        (their_ks,) = fixture_docs(BEFORE, f"kubernetes/apps/media/{app}/ks.yaml")
        (our_ks,) = rendered_docs(operator_tree, f"kubernetes/apps/media/{app}/ks.yaml")
        assert our_ks["spec"]["dependsOn"][0] in their_ks["spec"]["dependsOn"]
