"""time-slicing-invalid and time-slicing-config-missing."""

from __future__ import annotations

from typing import Any


def configmap(key: str, replicas: int) -> str:
    # line 7: the data key
    return (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: time-slicing-config\n"
        "  namespace: gpu\ndata:\n"
        f"  {key}: |-\n"
        "    version: v1\n    sharing:\n      timeSlicing:\n        resources:\n"
        f"          - name: nvidia.com/gpu\n            replicas: {replicas}\n"
    )


OPERATOR = "devicePlugin:\n  config:\n    name: time-slicing-config\n    default: any\n"


def test_one_replica_is_rejected(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
            "ts.yaml": configmap("any", 1),
        }
    )
    assert kit.only(found, "time-slicing-invalid") == [("ts.yaml", 7)]
    (f,) = (f for f in found if f.rule == "time-slicing-invalid")
    assert "number of replicas must be >= 2" in f.message


def test_empty_resources_are_rejected(check: Any, kit: Any) -> None:
    inline = (
        "config:\n  map:\n    default: |-\n      version: v1\n      sharing:\n"
        "        timeSlicing:\n          resources: []\n"
    )
    found = check({"dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", inline)})
    assert [p for p, _ in kit.only(found, "time-slicing-invalid")] == ["dp.yaml"]


def test_two_replicas_are_fine(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
            "ts.yaml": configmap("any", 2),
        }
    )
    assert "time-slicing-invalid" not in kit.ids(found)
    assert "time-slicing-config-missing" not in kit.ids(found)


def test_named_configmap_missing(check: Any, kit: Any) -> None:
    found = check({"op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR)})
    assert kit.only(found, "time-slicing-config-missing") == [("op.yaml", 15)]


def test_default_key_missing(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
            "ts.yaml": configmap("timeslicing.yaml", 4),
        }
    )
    assert kit.only(found, "time-slicing-config-missing") == [("op.yaml", 16)]


def test_dead_config_is_not_reported(check: Any, kit: Any) -> None:
    """Device plugin and GFD off: nothing reads the config (jhart99's gpu-operator)."""
    values = "devicePlugin:\n  enabled: false\n  config:\n    name: time-slicing-config\n"
    values += "    default: any\ngfd:\n  enabled: false\n"
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values),
            "ts.yaml": configmap("timeslicing.yaml", 4),
        }
    )
    assert "time-slicing-config-missing" not in kit.ids(found)
