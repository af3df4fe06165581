"""consumable-shares-gate-missing, consumable-shares-invalid, shares-capacity-changed,
memory-mode-whole-device, unlimited-no-ceiling."""

from __future__ import annotations

from typing import Any

OPERATOR_OFF_QUIET = "devicePlugin:\n  enabled: false\ndcgmExporter:\n  enabled: false\n"


def dra(kit: Any, extra: str) -> str:
    # line 13: override, 14: featureGates or consumableShares …
    return kit.helm_release(
        "dra", "dra-driver-nvidia-gpu", "gpuResourcesEnabledOverride: true\n" + extra
    )


GATE = "featureGates:\n  ConsumableShares: true\n"


def test_shares_without_gate(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, "consumableShares: 5\n")})
    assert kit.only(found, "consumable-shares-gate-missing") == [("dra.yaml", 14)]
    (f,) = (f for f in found if f.rule == "consumable-shares-gate-missing")
    assert "--consumable-shares requires feature gate ConsumableShares to be enabled" in f.message


def test_shares_with_gate(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, GATE + "consumableShares: 5\n")})
    assert kit.ids(found) == set()


def test_disabled_needs_no_gate(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, "consumableShares: disabled\n")})
    assert kit.ids(found) == set()


def test_invalid_value(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, GATE + "consumableShares: shared\n")})
    assert kit.only(found, "consumable-shares-invalid") == [("dra.yaml", 16)]
    (f,) = (f for f in found if f.rule == "consumable-shares-invalid")
    assert (
        "'invalid value for --consumable-shares: \"shared\" (must be 'disabled', 'memory', "
        "'unlimited', or a positive integer)'" in f.message
    )


def test_negative_integer_is_invalid(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, GATE + "consumableShares: -2\n")})
    assert kit.only(found, "consumable-shares-invalid") == [("dra.yaml", 16)]


def test_valid_modes_are_not_invalid(check: Any, kit: Any) -> None:
    for value in ("memory", "unlimited", "3", '"12"'):
        found = check({"dra.yaml": dra(kit, GATE + f"consumableShares: {value}\n")})
        assert "consumable-shares-invalid" not in kit.ids(found), value


CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: time-slicing-config
  namespace: gpu
data:
  any: |-
    version: v1
    sharing:
      timeSlicing:
        resources:
          - name: nvidia.com/gpu
            replicas: 8
"""


def test_shares_differ_from_replicas_still_in_the_repo(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, GATE + "consumableShares: 5\n"), "ts.yaml": CONFIGMAP})
    assert kit.only(found, "shares-capacity-changed") == [("dra.yaml", 16)]
    (f,) = (f for f in found if f.rule == "shares-capacity-changed")
    assert "replicas: 8" in f.message


def test_shares_equal_to_replicas(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, GATE + "consumableShares: 8\n"), "ts.yaml": CONFIGMAP})
    assert "shares-capacity-changed" not in kit.ids(found)


RCT_NO_MEMORY = """\
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

RCT_MEMORY = (
    RCT_NO_MEMORY + "            capacity:\n              requests:\n                memory: 4Gi\n"
)


def test_memory_mode_claim_without_memory_request(check: Any, kit: Any) -> None:
    found = check(
        {"dra.yaml": dra(kit, GATE + "consumableShares: memory\n"), "rct.yaml": RCT_NO_MEMORY}
    )
    assert kit.only(found, "memory-mode-whole-device") == [("rct.yaml", 7)]


def test_memory_mode_claim_with_memory_request(check: Any, kit: Any) -> None:
    found = check(
        {"dra.yaml": dra(kit, GATE + "consumableShares: memory\n"), "rct.yaml": RCT_MEMORY}
    )
    assert "memory-mode-whole-device" not in kit.ids(found)


def test_memory_mode_bridged_request_takes_the_whole_card(check: Any, kit: Any) -> None:
    device_class = (
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu-bridge\n"
        "spec:\n  extendedResourceName: nvidia.com/gpu\n"
        "  selectors:\n    - cel:\n        expression: device.driver == 'gpu.nvidia.com'\n"
    )
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR_OFF_QUIET),
            "dra.yaml": dra(kit, GATE + "consumableShares: memory\nresourceApiVersion: v1beta1\n"),
            "class.yaml": device_class,
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    assert kit.only(found, "memory-mode-whole-device") == [("app.yaml", 16)]


def test_unlimited_has_no_ceiling(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, GATE + "consumableShares: unlimited\n")})
    assert kit.only(found, "unlimited-no-ceiling") == [("dra.yaml", 16)]


def test_integer_shares_have_a_ceiling(check: Any, kit: Any) -> None:
    found = check({"dra.yaml": dra(kit, GATE + "consumableShares: 4\n")})
    assert "unlimited-no-ceiling" not in kit.ids(found)
