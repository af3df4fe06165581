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
