"""dual-advertiser, no-advertiser, dra-override-missing, allocator-flip-diverged."""

from __future__ import annotations

from typing import Any

OPERATOR_OFF_QUIET = "devicePlugin:\n  enabled: false\ndcgmExporter:\n  enabled: false\n"

RCT = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: any-gpu
  namespace: media
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
"""

CLAIM_POD = """
resourceClaims:
  - name: gpu
    resourceClaimTemplateName: any-gpu
containers:
  - name: app
    image: example
    resources:
      claims:
        - name: gpu
"""


def test_operator_default_plugin_and_dra_is_dual(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator", "gpu-operator", "driver:\n  enabled: false"
            ),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", kit.DRA_ON),
        }
    )
    # resources.gpus.enabled is a chart default: the finding points at spec.values (line 12).
    assert kit.only(found, "dual-advertiser") == [("dra.yaml", 12)]


def test_standalone_plugin_and_dra_is_dual(check: Any, kit: Any) -> None:
    found = check(
        {
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", "migStrategy: none"),
            "dra.yaml": kit.helm_release(
                "dra",
                "dra-driver-nvidia-gpu",
                "gpuResourcesEnabledOverride: true\nresources:\n  gpus:\n    enabled: true\n",
            ),
        }
    )
    assert kit.only(found, "dual-advertiser") == [("dra.yaml", 16)]


def test_plugin_off_and_dra_on_is_clean(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR_OFF_QUIET),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", kit.DRA_ON),
        }
    )
    assert found == []


def test_gpu_request_with_nothing_advertising(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", kit.OPERATOR_OFF),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    assert kit.only(found, "no-advertiser") == [("app.yaml", 16)]


def test_gpu_request_with_the_plugin_on_is_served(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator", "gpu-operator", "driver:\n  enabled: false"
            ),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    assert "no-advertiser" not in kit.ids(found)


def test_claim_without_a_dra_driver(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator", "gpu-operator", "driver:\n  enabled: false"
            ),
            "rct.yaml": RCT,
            "app.yaml": kit.deployment("app", CLAIM_POD),
        }
    )
    assert kit.only(found, "no-advertiser") == [("app.yaml", 11)]


def test_claim_with_a_dra_driver_is_served(check: Any, kit: Any) -> None:
    found = check(
        {
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", kit.DRA_ON),
            "rct.yaml": RCT,
            "app.yaml": kit.deployment("app", CLAIM_POD),
        }
    )
    assert "no-advertiser" not in kit.ids(found)


def test_dra_without_override_fails_the_chart_validation(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR_OFF_QUIET),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", "nvidiaDriverRoot: /"),
        }
    )
    assert kit.only(found, "dra-override-missing") == [("dra.yaml", 12)]
    (finding,) = (f for f in found if f.rule == "dra-override-missing")
    assert "cannot be deployed alongside the standard GPU device plugin" in finding.message


def test_dra_with_gpus_disabled_needs_no_override(check: Any, kit: Any) -> None:
    found = check(
        {
            "dra.yaml": kit.helm_release(
                "dra", "dra-driver-nvidia-gpu", "resources:\n  gpus:\n    enabled: false\n"
            ),
        }
    )
    assert "dra-override-missing" not in kit.ids(found)


def test_override_while_gpus_disabled_diverges(check: Any, kit: Any) -> None:
    found = check(
        {
            "dra.yaml": kit.helm_release(
                "dra",
                "dra-driver-nvidia-gpu",
                "gpuResourcesEnabledOverride: true\nresources:\n  gpus:\n    enabled: false\n",
            ),
        }
    )
    assert kit.only(found, "allocator-flip-diverged") == [("dra.yaml", 13)]


def test_plugin_off_with_the_dra_release_suspended_diverges(check: Any, kit: Any) -> None:
    dra = kit.helm_release("dra", "dra-driver-nvidia-gpu", kit.DRA_ON)
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR_OFF_QUIET),
            "dra.yaml": dra.replace("  interval: 1h\n", "  interval: 1h\n  suspend: true\n"),
        }
    )
    assert kit.only(found, "allocator-flip-diverged") == [("op.yaml", 14)]


def test_consistent_flip_does_not_diverge(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR_OFF_QUIET),
            "dra.yaml": kit.helm_release(
                "dra",
                "dra-driver-nvidia-gpu",
                "gpuResourcesEnabledOverride: true\nresources:\n  gpus:\n    enabled: true\n",
            ),
        }
    )
    assert "allocator-flip-diverged" not in kit.ids(found)


RENAMED = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ts
  namespace: gpu
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        renameByDefault: true
        resources:
          - name: nvidia.com/gpu
            replicas: 4
"""

SHARED_POD = """
runtimeClassName: nvidia
containers:
  - name: app
    image: example
    resources:
      limits:
        nvidia.com/gpu.shared: 1
"""

MIG_POD = """
containers:
  - name: app
    image: example
    resources:
      limits:
        nvidia.com/mig-1g.10gb: 1
"""


def test_rename_by_default_request_is_a_gpu_request(check: Any, kit: Any) -> None:
    """renameByDefault: the plugin advertises nvidia.com/gpu.shared; asking for it counts."""
    values = "devicePlugin:\n  config:\n    name: ts\n    default: any\n"
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values),
            "ts.yaml": RENAMED,
            "app.yaml": kit.deployment("app", SHARED_POD),
        }
    )
    assert found == []


def test_rename_by_default_request_with_nothing_advertising(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", kit.OPERATOR_OFF),
            "app.yaml": kit.deployment("app", SHARED_POD),
        }
    )
    # 11 runtimeClassName … 17 nvidia.com/gpu.shared
    assert kit.only(found, "no-advertiser") == [("app.yaml", 17)]
    assert "gpu-access-without-allocation" not in kit.ids(found)


def test_mig_request_with_nothing_advertising(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", kit.OPERATOR_OFF),
            "app.yaml": kit.deployment("app", MIG_POD),
        }
    )
    assert kit.only(found, "no-advertiser") == [("app.yaml", 16)]


def test_mig_request_served_by_the_plugin(check: Any, kit: Any) -> None:
    values = "mig:\n  strategy: mixed\n"
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values),
            "app.yaml": kit.deployment("app", MIG_POD),
        }
    )
    assert found == []
