"""`gpushift cutover --repo`: the preflight checks the merge target, on the homelab twin over
HTTP (a separate process, as a user runs it).

The targets are copies of the homelab rendered for DRA (5 shares per card), each with one
change made here: the ConsumableShares gate turned off (a `gpushift check` error), or the DRA
driver's OCIRepository at 0.4.0.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.runbook.conftest import Env, homelab
from tests.runbook.test_homelab import _untouched, _versions

DRIVER = "kubernetes/apps/gpu-operator/dra-driver-nvidia-gpu/app"
RELEASE = "HelmRelease/gpu-operator/dra-driver-nvidia-gpu"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with homelab(tmp_path_factory.mktemp("homelab")) as e:
        yield e


def _copy(env: Env, name: str, edits: dict[str, tuple[str, str]]) -> Path:
    """The DRA tree with, in each file of the driver's app, ``old`` replaced by ``new`` once."""
    tree = env.tmp / name
    shutil.copytree(env.dra, tree)
    for file, (old, new) in edits.items():
        path = tree / DRIVER / file
        text = path.read_text()
        assert text.count(old) == 1
        path.write_text(text.replace(old, new))
    return tree


GATE_OFF = {"helmrelease.yaml": ("ConsumableShares: true", "ConsumableShares: false")}
OLD_DRIVER = {"ocirepository.yaml": ("tag: 0.5.0", "tag: 0.4.0")}


def _refused(env: Env, target: Path) -> list[str]:
    before = _versions(env)
    code, events, err = env.cutover(
        "cutover", "--to", "dra", "--repo", str(env.plugin), "--target", str(target),
        "--merge", "false",
    )  # fmt: skip
    assert code == 4, err
    result = events[-1]
    assert result["kind"] == "CutoverResult" and result["result"] == "refused"
    # Refused before anything was changed.
    _untouched(before, _versions(env))
    reasons: list[str] = result["reasons"]
    return reasons


def test_a_check_error_at_the_target_refuses_naming_rule_file_and_object(env: Env) -> None:
    reasons = _refused(env, _copy(env, "gate-off", GATE_OFF))
    # The one error gpushift check finds there, and nothing else.
    assert len(reasons) == 1
    assert reasons[0].startswith(
        "gpushift check finds an error at the target: consumable-shares-gate-missing in "
        f"{DRIVER}/helmrelease.yaml:40 ({RELEASE}): "
    )


def test_an_old_driver_chart_at_the_target_refuses_naming_its_file(env: Env) -> None:
    assert _refused(env, _copy(env, "driver-0.4", OLD_DRIVER)) == [
        f"{DRIVER}/ocirepository.yaml:13: {RELEASE} at the target installs "
        "dra-driver-nvidia-gpu 0.4.0: consumable shares need 0.5.0 or later"
    ]


def test_both_at_once_and_with_every_other_reason(env: Env) -> None:
    target = _copy(env, "both", GATE_OFF | OLD_DRIVER)
    before = _versions(env)
    code, events, err = env.cutover(
        "cutover", "--to", "dra", "--repo", str(env.plugin), "--target", str(target),
        "--apps", "flux-system/nope", "--merge", "false",
    )  # fmt: skip
    assert code == 4, err
    _untouched(before, _versions(env))
    reasons = events[-1]["reasons"]
    assert reasons[0] == "Kustomization/flux-system/nope does not exist"
    assert reasons[1].startswith(f"{DRIVER}/ocirepository.yaml:13: {RELEASE} at the target")
    assert reasons[2].startswith(
        "gpushift check finds an error at the target: consumable-shares-gate-missing"
    )
    assert len(reasons) == 3


def test_a_clean_target_passes_and_the_plan_names_its_chart(env: Env) -> None:
    code, out, err = env.cutover(
        "cutover", "--to", "dra", "--plan", "--repo", str(env.plugin), "--target", str(env.dra)
    )
    assert code == 0, err
    plan, result = out[0], out[-1]
    assert plan["kind"] == "CutoverPlan" and plan["refusals"] == []
    assert result["result"] == "planned" and result["reasons"] == []
    note = plan["steps"][0]["note"]
    assert f"gpushift check at the target {env.dra}: 0 error findings" in note
    assert f"DRA driver chart at the target: 0.5.0 in {DRIVER}/ocirepository.yaml:13" in note


def test_without_repo_the_plan_says_the_targets_chart_was_not_checked(env: Env) -> None:
    code, out, err = env.cutover("cutover", "--to", "dra", "--plan")
    assert code == 0, err
    assert out[0]["steps"][0]["note"].endswith(
        "the DRA driver chart at the target was not checked (no --repo): only the deployed "
        "release's"
    )


def test_a_target_that_is_neither_directory_nor_revision_is_bad_input(env: Env) -> None:
    code, out, err = env.cutover(
        "cutover", "--to", "dra", "--plan", "--repo", str(env.plugin), "--target", "nope"
    )
    assert code == 2 and out == []
    assert err == (
        f"gpushift: error: {env.plugin}: --target 'nope': neither a directory nor a git "
        "revision of the repository\n"
    )


MODEL = "kubernetes/apps/ai/llmkube/models/llama-nvidia.yaml"
LOW = (
    "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n"
    "  name: gpu-preemptible\nvalue: -100\n"
)


def test_preemption_the_target_ends_is_a_warning_in_the_plan(env: Env) -> None:
    # The model yields its slice to default-priority pods under the device plugin; at the DRA
    # target kube-scheduler no longer preempts it. The plan warns and still goes ahead.
    target = env.tmp / "preemptible"
    shutil.copytree(env.dra, target)
    path = target / MODEL
    text = path.read_text()
    assert text.count("  runtimeClassName: nvidia\n") == 1
    path.write_text(
        text.replace(
            "  runtimeClassName: nvidia\n",
            "  runtimeClassName: nvidia\n  priorityClassName: gpu-preemptible\n",
        )
        + LOW
    )
    line = 1 + path.read_text().splitlines().index("  priorityClassName: gpu-preemptible")
    code, out, err = env.cutover(
        "cutover", "--to", "dra", "--plan", "--repo", str(env.plugin), "--target", str(target)
    )
    assert code == 0, err
    plan, result = out[0], out[-1]
    assert result["result"] == "planned" and plan["refusals"] == []
    (warning,) = plan["steps"][0]["note"].split("; warning: ")[1:]
    assert warning.startswith(
        f"dra-preemption-lost at {MODEL}:{line} (InferenceService/ai/llama-nvidia): "
        "InferenceService/ai/llama-nvidia (PriorityClass gpu-preemptible, priority -100) is "
        "outranked by "
    )
