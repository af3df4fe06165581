"""allocator gpucluster: gpu-operator 26.7 with its GPUCluster (DRA) stack.

Expected values are read off the research notes on gpu-operator v26.7.0 (values.yaml:
``clusterPolicy.deployCR`` / ``gpuCluster.deployCR``, ``draDriver.featureGates`` and
``draDriver.gpus.kubeletPlugin.env`` for consumable shares; templates/validations.yaml: a
GPUCluster with ``driver.enabled`` needs ``driver.nvidiaDriverCRD.enabled``) and the GPUCluster
facts (its gpu.nvidia.com DeviceClass has no extendedResourceName; the validator assumes a
driver at /), not from the renderer's output.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpushift._errors import InputError

Tree = dict[str, str]
OPERATOR = "gpu-operator/gpu-operator/app"


def _cluster(homelab: dict[str, Any], **changes: Any) -> dict[str, Any]:
    cluster = {k: v for k, v in homelab["cluster"].items() if k != "talos"}
    cluster.update(changes)
    return cluster


@pytest.fixture
def gc_tree(tree_for: Callable[..., Tree], homelab_data: dict[str, Any]) -> Callable[..., Tree]:
    def build(sharing: Any, **cluster: Any) -> Tree:
        return tree_for(
            "gpucluster",
            sharing,
            cluster=_cluster(homelab_data, **cluster),
            charts={"gpuOperator": {"version": "26.7.0"}},
        )

    return build


def _values(docs: Any, tree: Tree) -> dict[str, Any]:
    (release,) = docs(tree, f"{OPERATOR}/helmrelease.yaml")
    values: dict[str, Any] = release["spec"]["values"]
    return values


def test_operator_deploys_the_gpucluster_not_the_clusterpolicy(gc_tree: Any, docs: Any) -> None:
    v = _values(docs, gc_tree(5))
    assert v["clusterPolicy"] == {"deployCR": False}
    assert v["gpuCluster"] == {"deployCR": True}
    # The operator installs the driver (not preinstalled): the chart's validation wants the
    # NVIDIADriver CRD with a GPUCluster.
    assert v["driver"] == {"enabled": True, "nvidiaDriverCRD": {"enabled": True}}
    # No ClusterPolicy operands: no device plugin, GFD, toolkit or CDI values.
    assert not {"devicePlugin", "gfd", "toolkit", "cdi"} & set(v)
    # The GPUCluster's exporter carries KUBERNETES_ENABLE_DRA and its RBAC itself.
    assert v["dcgmExporter"] == {"enabled": True, "serviceMonitor": {"enabled": True}}


def test_five_consumable_shares_as_gate_and_env(gc_tree: Any, docs: Any) -> None:
    v = _values(docs, gc_tree(5))
    assert v["draDriver"] == {
        "featureGates": {"ConsumableShares": True},
        "gpus": {"kubeletPlugin": {"env": [{"name": "CONSUMABLE_SHARES", "value": "5"}]}},
        "computeDomains": {"enabled": False},
    }


def test_exclusive_sets_no_shares(gc_tree: Any, docs: Any) -> None:
    v = _values(docs, gc_tree("exclusive"))
    assert v["draDriver"] == {"computeDomains": {"enabled": False}}


def test_preinstalled_driver_at_root(gc_tree: Any, docs: Any) -> None:
    v = _values(docs, gc_tree("unlimited", preinstalledDriver=True))
    assert v["driver"] == {"enabled": False}
    assert "hostPaths" not in v
    env = v["draDriver"]["gpus"]["kubeletPlugin"]["env"]
    assert env == [{"name": "CONSUMABLE_SHARES", "value": "unlimited"}]


def test_no_chart_of_the_dra_driver_and_consumers_on_claims(gc_tree: Any, docs: Any) -> None:
    tree = gc_tree(5)
    assert not any("dra-driver-nvidia-gpu" in p for p in tree)
    (ks,) = docs(tree, "media/gpu-claim-templates/ks.yaml")
    assert ks["spec"]["dependsOn"] == [{"name": "gpu-operator", "namespace": "gpu-operator"}]
    (rct,) = docs(tree, "media/gpu-claim-templates/app/resourceclaimtemplate.yaml")
    (request,) = rct["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    (jellyfin,) = docs(tree, "media/jellyfin/app/helmrelease.yaml")
    controller = jellyfin["spec"]["values"]["controllers"]["jellyfin"]
    assert controller["containers"]["app"]["resources"] == {"claims": [{"name": "gpu"}]}
    assert controller["pod"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "any-nvidia-gpu"}
    ]
    # No RuntimeClass: the GPUCluster runs no toolkit; DRA injects devices through CDI.
    assert "runtimeClassName" not in jellyfin["spec"]["values"]["defaultPodOptions"]
    assert f"kubernetes/apps/{OPERATOR}/runtimeclass.yaml" not in tree


def test_inference_service_is_bridged_by_a_class_of_its_own(gc_tree: Any, docs: Any) -> None:
    tree = gc_tree(5)
    (cls,) = docs(tree, f"{OPERATOR}/deviceclass-extended-resource.yaml")
    assert cls["apiVersion"] == "resource.k8s.io/v1"
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert cls["spec"]["selectors"] == [
        {
            "cel": {
                "expression": "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'gpu'"
            }
        }
    ]
    (kust,) = docs(tree, f"{OPERATOR}/kustomization.yaml")
    assert "./deviceclass-extended-resource.yaml" in kust["resources"]
    _, service = docs(tree, "ai/llmkube/models/llama-nvidia.yaml")
    assert service["spec"]["resources"] == {"gpu": 1}


def test_the_rendered_tree_checks_clean_of_allocator_errors(gc_tree: Any, tmp_path: Path) -> None:
    for rel, text in gc_tree(5).items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "gpushift", "check", str(tmp_path), "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    import json

    report = json.loads(out.stdout)
    assert report["summary"]["allocator"] == "dra"
    assert report["summary"]["dra_stack"] == "gpucluster"
    rules = {f["rule"] for f in report["findings"]}
    assert not rules & {
        "no-advertiser",
        "dual-advertiser",
        "unbridged-extended-resource",
        "gpucluster-clusterpolicy-conflict",
    }


def test_talos_is_refused(config_from: Any, homelab_data: dict[str, Any]) -> None:
    data = dict(homelab_data, allocator="gpucluster", charts={"gpuOperator": {"version": "26.7.0"}})
    with pytest.raises(InputError) as err:
        config_from(data)
    assert (
        "Talos installs the NVIDIA driver under /usr/local, and the GPUCluster "
        "derives the driver root from the validator, which assumes /" in err.value.message
    )


def test_driver_preinstalled_elsewhere_is_refused(
    config_from: Any, homelab_data: dict[str, Any]
) -> None:
    cluster = _cluster(homelab_data, preinstalledDriver=True, driverRoot="/opt/nvidia")
    data = dict(
        homelab_data,
        allocator="gpucluster",
        cluster=cluster,
        charts={"gpuOperator": {"version": "26.7.0"}},
    )
    with pytest.raises(InputError) as err:
        config_from(data)
    assert "the driver is preinstalled under /opt/nvidia" in err.value.message


def test_operator_before_26_7_is_refused(config_from: Any, homelab_data: dict[str, Any]) -> None:
    data = dict(homelab_data, allocator="gpucluster", cluster=_cluster(homelab_data))
    with pytest.raises(InputError) as err:
        config_from(data)
    assert "the GPUCluster needs gpu-operator 26.7.0 or later, got" in (err.value.message)


def test_cli_refuses_the_talos_example_with_exit_2(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpushift",
            "render",
            "--example",
            "homelab",
            "--allocator",
            "gpucluster",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "which assumes /" in out.stderr
    assert not (tmp_path / "o").exists()


def test_config_file_names_gpucluster(tmp_path: Path) -> None:
    cfg = tmp_path / "gpushift.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "allocator": "gpucluster",
                "sharing": 3,
                "charts": {"gpuOperator": {"version": "26.7.0"}},
            }
        ),
        encoding="utf-8",
    )
    out = subprocess.run(
        [sys.executable, "-m", "gpushift", "render", str(cfg), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "allocator gpucluster, sharing 3" in out.stdout
