"""MPS in the device plugin's config: summary, validity, requests and GFD; and a config with
only ``flags``.

Expectations are read off tests/rules/repos/mps (lines counted in its files) and the trees
below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpushift.rules import run_check

REPOS = Path(__file__).parent / "repos"

OPERATOR = "devicePlugin:\n  config:\n    name: dp-config\n    default: any\n"


def configmap(body: str) -> str:
    """ConfigMap dp-config in namespace gpu with key ``any`` (data key: line 7)."""
    return (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dp-config\n  namespace: gpu\ndata:\n"
        "  any: |-\n" + "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    )


def test_mps_summary_requests_and_gfd() -> None:
    report = run_check([REPOS / "mps"])
    assert report.summary.allocator == "device-plugin"
    assert report.summary.sharing.to_dict() == {"mode": "mps", "replicas": 4}
    got = {(f.rule, f.path, f.line) for f in report.findings}
    assert got == {
        # the chart's gfd.enabled defaults to false; the config key `mps: |-` is line 18.
        ("mps-without-gfd", "device-plugin.yaml", 18),
        # failRequestsGreaterThanOne defaults to true for MPS; `nvidia.com/gpu: 2` is line 33.
        ("sharing-request-rejected", "workloads.yaml", 33),
    }


def test_mps_with_gfd_and_single_requests_is_clean(check: Any, kit: Any) -> None:
    values = (
        "gfd:\n  enabled: true\nconfig:\n  map:\n    default: |-\n      version: v1\n"
        "      sharing:\n        mps:\n          resources:\n"
        "            - name: nvidia.com/gpu\n              replicas: 3\n"
    )
    found = check(
        {
            "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", values),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    assert found == []


def test_mps_on_other_resources_is_rejected(check: Any, kit: Any) -> None:
    body = (
        "version: v1\nsharing:\n  mps:\n    resources:\n"
        "      - name: nvidia.com/mig-1g.10gb\n        replicas: 2\n"
    )
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
            "cm.yaml": configmap(body),
        }
    )
    (f,) = (f for f in found if f.rule == "time-slicing-invalid")
    assert (f.path, f.line) == ("cm.yaml", 7)
    assert "only supported for nvidia.com/gpu" in f.message


def test_flags_only_config_is_valid(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
            "cm.yaml": configmap("version: v1\nflags:\n  migStrategy: none\n"),
        }
    )
    assert "time-slicing-invalid" not in kit.ids(found)
    assert "time-slicing-config-missing" not in kit.ids(found)


def test_sharing_block_without_resources_is_rejected(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
            "cm.yaml": configmap("version: v1\nsharing:\n  mps: {}\n"),
        }
    )
    (f,) = (f for f in found if f.rule == "time-slicing-invalid")
    assert "no resources specified" in f.message


def test_rename_by_default_leaves_plain_requests_unserved(check: Any, kit: Any) -> None:
    body = (
        "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
        "      - name: nvidia.com/gpu\n        replicas: 4\n"
    )
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
            "cm.yaml": configmap(body),
            "app.yaml": kit.deployment("app", kit.GPU_POD),
        }
    )
    # GPU_POD's `nvidia.com/gpu: 1` is pod-spec line 6, file line 16.
    assert kit.only(found, "sharing-request-rejected") == [("app.yaml", 16)]
    (f,) = (f for f in found if f.rule == "sharing-request-rejected")
    assert "nvidia.com/gpu.shared" in f.message


def test_time_slicing_allows_two_unless_fail_greater_than_one(check: Any, kit: Any) -> None:
    pod = kit.GPU_POD.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 2")
    base = "version: v1\nsharing:\n  timeSlicing:\n{flag}    resources:\n" + (
        "      - name: nvidia.com/gpu\n        replicas: 4\n"
    )
    files = {
        "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OPERATOR),
        "app.yaml": kit.deployment("app", pod),
    }
    found = check({**files, "cm.yaml": configmap(base.format(flag=""))})
    assert "sharing-request-rejected" not in kit.ids(found)
    found = check(
        {**files, "cm.yaml": configmap(base.format(flag="    failRequestsGreaterThanOne: true\n"))}
    )
    assert kit.only(found, "sharing-request-rejected") == [("app.yaml", 16)]


def test_parked_workload_is_not_rejected(check: Any, kit: Any) -> None:
    pod = kit.GPU_POD.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 2")
    parked = kit.deployment("app", pod).replace(
        "spec:\n  selector", "spec:\n  replicas: 0\n  selector", 1
    )
    values = (
        "gfd:\n  enabled: true\nconfig:\n  map:\n    default: |-\n      version: v1\n"
        "      sharing:\n        mps:\n          resources:\n"
        "            - name: nvidia.com/gpu\n              replicas: 3\n"
    )
    found = check(
        {"dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", values), "app.yaml": parked}
    )
    assert "sharing-request-rejected" not in kit.ids(found)
