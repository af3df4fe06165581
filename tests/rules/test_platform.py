"""driver-root-mismatch, runtimeclass-missing, dependency-order."""

from __future__ import annotations

from typing import Any

TALOS_PATCH = "machine:\n  kernel:\n    modules:\n      - name: nvidia\n"
QUIET_OFF = "devicePlugin:\n  enabled: false\ndcgmExporter:\n  enabled: false\n"


def test_talos_with_default_roots(check: Any, kit: Any) -> None:
    found = check(
        {
            "talos/patch.yaml": TALOS_PATCH,
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", QUIET_OFF),
            "dra.yaml": kit.helm_release(
                "dra",
                "dra-driver-nvidia-gpu",
                "gpuResourcesEnabledOverride: true\nnvidiaDriverRoot: /\n",
            ),
        }
    )
    # gpu-operator leaves hostPaths at its default: the finding points at spec.values.
    assert sorted(kit.only(found, "driver-root-mismatch")) == [("dra.yaml", 14), ("op.yaml", 12)]
    # The operator installs its own driver (driver.enabled defaults to true): both break.
    assert {f.severity.value for f in found if f.rule == "driver-root-mismatch"} == {"error"}


def test_talos_operator_with_preinstalled_driver_is_a_warning(check: Any, kit: Any) -> None:
    values = "driver:\n  enabled: false\ntoolkit:\n  enabled: false\n"
    found = check(
        {
            "talos/patch.yaml": TALOS_PATCH,
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values),
        }
    )
    (f,) = (f for f in found if f.rule == "driver-root-mismatch")
    assert (f.path, f.line, f.severity.value) == ("op.yaml", 12, "warning")
    # The GPUCluster DRA stack reads the path for its CDI specs: an error again.
    found = check(
        {
            "talos/patch.yaml": TALOS_PATCH,
            "op.yaml": kit.helm_release(
                "gpu-operator",
                "gpu-operator",
                values + "clusterPolicy:\n  deployCR: false\ngpuCluster:\n  deployCR: true\n",
            ),
        }
    )
    (f,) = (f for f in found if f.rule == "driver-root-mismatch")
    assert f.severity.value == "error"


def test_talos_with_usr_local(check: Any, kit: Any) -> None:
    found = check(
        {
            "talos/patch.yaml": TALOS_PATCH,
            "op.yaml": kit.helm_release(
                "gpu-operator",
                "gpu-operator",
                QUIET_OFF + "hostPaths:\n  driverInstallDir: /usr/local/\n",
            ),
            "dra.yaml": kit.helm_release(
                "dra",
                "dra-driver-nvidia-gpu",
                "gpuResourcesEnabledOverride: true\nnvidiaDriverRoot: /usr/local\n",
            ),
        }
    )
    assert "driver-root-mismatch" not in kit.ids(found)


def test_no_talos_no_driver_root_rule(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", kit.DRA_ON)})
    assert "driver-root-mismatch" not in kit.ids(found)


def _dra(root: str | None) -> str:
    line = f"nvidiaDriverRoot: {root}\n" if root is not None else ""
    return "gpuResourcesEnabledOverride: true\n" + line


def _line_of(text: str, needle: str) -> int:
    return next(i for i, x in enumerate(text.splitlines(), 1) if needle in x)


def test_off_talos_the_operator_install_dir_is_where_the_driver_is(check: Any, kit: Any) -> None:
    op = kit.helm_release(
        "gpu-operator",
        "gpu-operator",
        QUIET_OFF + "driver:\n  enabled: false\nhostPaths:\n  driverInstallDir: /opt/nvidia\n",
    )
    dra = kit.helm_release("dra", "dra-driver-nvidia-gpu", _dra("/"))
    found = check({"op.yaml": op, "dra.yaml": dra})
    (f,) = (f for f in found if f.rule == "driver-root-mismatch")
    assert (f.path, f.line) == ("dra.yaml", _line_of(dra, "nvidiaDriverRoot"))
    assert "/opt/nvidia" in f.message and "op.yaml" in f.message
    # The same root on both sides: nothing to say.
    dra = kit.helm_release("dra", "dra-driver-nvidia-gpu", _dra("/opt/nvidia/"))
    assert "driver-root-mismatch" not in kit.ids(check({"op.yaml": op, "dra.yaml": dra}))


def test_off_talos_chart_defaults_say_nothing(check: Any, kit: Any) -> None:
    # No install dir, no plugin root, no Talos: the tree does not say where the driver is.
    op = kit.helm_release("gpu-operator", "gpu-operator", QUIET_OFF)
    dra = kit.helm_release("dra", "dra-driver-nvidia-gpu", _dra("/opt/elsewhere"))
    assert "driver-root-mismatch" not in kit.ids(check({"op.yaml": op, "dra.yaml": dra}))


def test_off_talos_the_standalone_plugin_root_is_where_the_driver_is(check: Any, kit: Any) -> None:
    plugin = kit.helm_release(
        "nvdp", "nvidia-device-plugin", "nvidiaDriverRoot: /run/nvidia/driver\n"
    )
    dra = kit.helm_release("dra", "dra-driver-nvidia-gpu", _dra("/"))
    found = check({"nvdp.yaml": plugin, "dra.yaml": dra})
    assert kit.only(found, "driver-root-mismatch") == [
        ("dra.yaml", _line_of(dra, "nvidiaDriverRoot"))
    ]


RUNTIME_POD = """
runtimeClassName: nvidia
containers:
  - name: app
    image: example
    resources:
      limits:
        nvidia.com/gpu: 1
"""

RUNTIME_CLASS = (
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia\nhandler: nvidia\n"
)


def test_runtime_class_not_defined(check: Any, kit: Any) -> None:
    found = check(
        {
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none"),
            "app.yaml": kit.deployment("app", RUNTIME_POD),
        }
    )
    assert kit.only(found, "runtimeclass-missing") == [("app.yaml", 11)]


def test_runtime_class_defined(check: Any, kit: Any) -> None:
    found = check(
        {
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none"),
            "rc.yaml": RUNTIME_CLASS,
            "app.yaml": kit.deployment("app", RUNTIME_POD),
        }
    )
    assert "runtimeclass-missing" not in kit.ids(found)


def test_runtime_class_installed_by_gpu_operator(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator", "gpu-operator", "driver:\n  enabled: false"
            ),
            "app.yaml": kit.deployment("app", RUNTIME_POD),
        }
    )
    assert "runtimeclass-missing" not in kit.ids(found)


def flux_ks(name: str, path: str, extra: str = "") -> str:
    # line 6: spec; extra starts at line 13
    return (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n"
        f"  name: {name}\n  namespace: flux-system\nspec:\n  interval: 1h\n"
        f"  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n"
        "    name: flux-system\n" + extra
    )


def stack(kit: Any, *, dra_extra: str, op_extra: str) -> dict[str, str]:
    kustomization = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
    return {
        "apps/kustomization.yaml": kustomization
        + "resources:\n  - ./op/ks.yaml\n  - ./dra/ks.yaml\n",
        "apps/op/ks.yaml": flux_ks("gpu-operator", "./apps/op/app", op_extra),
        "apps/op/app/kustomization.yaml": kustomization + "resources:\n  - ./helmrelease.yaml\n",
        "apps/op/app/helmrelease.yaml": kit.helm_release("gpu-operator", "gpu-operator", QUIET_OFF),
        "apps/dra/ks.yaml": flux_ks("dra-driver", "./apps/dra/app", dra_extra),
        "apps/dra/app/kustomization.yaml": kustomization + "resources:\n  - ./helmrelease.yaml\n",
        "apps/dra/app/helmrelease.yaml": kit.helm_release(
            "dra", "dra-driver-nvidia-gpu", kit.DRA_ON
        ),
    }


DEPENDS = "  dependsOn:\n    - name: gpu-operator\n"
HEALTH = (
    "  healthChecks:\n    - apiVersion: helm.toolkit.fluxcd.io/v2\n      kind: HelmRelease\n"
    "      name: gpu-operator\n      namespace: gpu\n"
)


def test_dra_does_not_depend_on_the_operator(check: Any, kit: Any) -> None:
    found = check(stack(kit, dra_extra="", op_extra=HEALTH))
    assert kit.only(found, "dependency-order") == [("apps/dra/ks.yaml", 6)]


def test_operator_kustomization_without_health_check(check: Any, kit: Any) -> None:
    found = check(stack(kit, dra_extra=DEPENDS, op_extra=""))
    assert kit.only(found, "dependency-order") == [("apps/op/ks.yaml", 6)]


def test_dependency_with_health_check(check: Any, kit: Any) -> None:
    found = check(stack(kit, dra_extra=DEPENDS, op_extra=HEALTH))
    assert "dependency-order" not in kit.ids(found)


def test_wait_true_counts_as_health_check(check: Any, kit: Any) -> None:
    found = check(stack(kit, dra_extra=DEPENDS, op_extra="  wait: true\n"))
    assert "dependency-order" not in kit.ids(found)


def _plan(image: str) -> str:
    """A system-upgrade-controller Plan upgrading with ``image`` (the image on line 8)."""
    return (
        "apiVersion: upgrade.cattle.io/v1\n"
        "kind: Plan\n"
        "metadata:\n"
        "  name: server\n"
        "spec:\n"
        "  version: v1.33.1+k3s1\n"
        "  upgrade:\n"
        f"    image: {image}\n"
    )


def _rc_findings(check: Any, kit: Any, extra: dict[str, str]) -> list[Any]:
    files = {
        "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none"),
        "app.yaml": kit.deployment("app", RUNTIME_POD),
        **extra,
    }
    return [f for f in check(files) if f.rule == "runtimeclass-missing"]


def test_k3s_upgrade_plan_lowers_runtime_class_missing_to_info(check: Any, kit: Any) -> None:
    found = _rc_findings(check, kit, {"upgrade/plan.yaml": _plan("rancher/k3s-upgrade")})
    assert [(f.path, f.line, f.severity.value) for f in found] == [("app.yaml", 11, "info")]
    # The evidence is named with its file and line (the image is on line 8 of the Plan).
    assert "k3s detected" in found[0].message
    assert "rancher/k3s-upgrade, upgrade/plan.yaml:8" in found[0].message
    assert "k3s-io/k3s#8700" in found[0].message
    assert "rejected at admission" not in found[0].message


def test_rke2_upgrade_plan_with_registry_and_tag(check: Any, kit: Any) -> None:
    plan = _plan("docker.io/rancher/rke2-upgrade:v1.33.1-rke2r1")
    found = _rc_findings(check, kit, {"upgrade/plan.yaml": plan})
    assert [f.severity.value for f in found] == ["info"]
    assert "RKE2 detected" in found[0].message


def test_k3s_containerd_path_in_values_is_evidence(check: Any, kit: Any) -> None:
    # A toolkit env pointed at k3s's containerd socket, as gpu-operator's is in
    # gelato/homecluster (here in another chart, so that no gpu-operator installs the class).
    values = """
    toolkit:
      env:
        - name: CONTAINERD_SOCKET
          value: /run/k3s/containerd/containerd.sock
    """
    other = kit.helm_release("tools", "some-chart", values)
    found = _rc_findings(check, kit, {"tools.yaml": other})
    assert [f.severity.value for f in found] == ["info"]
    assert "toolkit.env.0.value to /run/k3s/containerd/containerd.sock" in found[0].message
    # values start on line 13: toolkit, env, "- name", then value on line 16.
    assert "tools.yaml:16" in found[0].message


def test_helm_controller_kind_says_k3s_or_rke2(check: Any, kit: Any) -> None:
    config = (
        "apiVersion: helm.cattle.io/v1\nkind: HelmChartConfig\nmetadata:\n"
        "  name: traefik\n  namespace: kube-system\nspec:\n  valuesContent: ''\n"
    )
    found = _rc_findings(check, kit, {"traefik.yaml": config})
    assert [f.severity.value for f in found] == ["info"]
    assert "k3s or RKE2 detected" in found[0].message


def test_other_upgrade_image_is_no_evidence(check: Any, kit: Any) -> None:
    # A Plan that upgrades something else (a Talos or OS image) says nothing about k3s.
    found = _rc_findings(check, kit, {"upgrade/plan.yaml": _plan("ghcr.io/siderolabs/installer")})
    assert [f.severity.value for f in found] == ["warning"]
    assert "rejected at admission" in found[0].message


def test_k3s_does_not_vouch_for_other_runtime_class_names(check: Any, kit: Any) -> None:
    pod = RUNTIME_POD.replace("runtimeClassName: nvidia", "runtimeClassName: nvidia-legacy")
    files = {
        "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none"),
        "app.yaml": kit.deployment("app", pod),
        "upgrade/plan.yaml": _plan("rancher/k3s-upgrade"),
    }
    found = [f for f in check(files) if f.rule == "runtimeclass-missing"]
    assert [f.severity.value for f in found] == ["warning"]


def test_inactive_plan_is_no_evidence(check: Any, kit: Any) -> None:
    # A Flux tree whose Plan file is left out of its directory's kustomization.yaml: the Plan
    # is not deployed, so it says nothing about the cluster.
    flux_root = (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n"
        "  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n"
        "  sourceRef: {kind: GitRepository, name: flux-system}\n"
    )
    kustomization = (
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"
    )
    files = {
        "cluster.yaml": flux_root,
        "apps/dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none"),
        "apps/app.yaml": kit.deployment("app", RUNTIME_POD),
        "upgrade/kustomization.yaml": kustomization,
        "upgrade/plan.yaml": _plan("rancher/k3s-upgrade"),
    }
    found = [f for f in check(files) if f.rule == "runtimeclass-missing"]
    assert [(f.path, f.severity.value) for f in found] == [("apps/app.yaml", "warning")]
