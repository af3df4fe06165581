"""gpu-access-without-allocation, visible-devices-override, monitoring-consumes-gpu,
stale-sharing-labels, dcgm-dra-attribution."""

from __future__ import annotations

from typing import Any

PLUGIN = "migStrategy: none\n"
RUNTIME_CLASS = (
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: nvidia\nhandler: nvidia\n"
)


def plugin(kit: Any) -> dict[str, str]:
    return {
        "dp.yaml": kit.helm_release("ndp", "nvidia-device-plugin", PLUGIN),
        "rc.yaml": RUNTIME_CLASS,
    }


def test_runtime_class_without_request(check: Any, kit: Any) -> None:
    pod = "runtimeClassName: nvidia\ncontainers:\n  - name: app\n    image: example\n"
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert kit.only(found, "gpu-access-without-allocation") == [("app.yaml", 11)]


def test_visible_devices_all_without_request(check: Any, kit: Any) -> None:
    # 11 containers, 12 - name, 13 image, 14 env, 15 - name: NVIDIA_VISIBLE_DEVICES
    pod = (
        "containers:\n  - name: app\n    image: example\n    env:\n"
        "      - name: NVIDIA_VISIBLE_DEVICES\n        value: all\n"
    )
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert kit.only(found, "gpu-access-without-allocation") == [("app.yaml", 15)]


def test_privileged_on_gpu_nodes_without_request(check: Any, kit: Any) -> None:
    pod = (
        'nodeSelector:\n  nvidia.com/gpu.present: "true"\ncontainers:\n  - name: app\n'
        "    image: example\n    securityContext:\n      privileged: true\n"
    )
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert kit.only(found, "gpu-access-without-allocation") == [("app.yaml", 17)]


def test_privileged_elsewhere_is_not_gpu_access(check: Any, kit: Any) -> None:
    pod = (
        "containers:\n  - name: app\n    image: example\n"
        "    securityContext:\n      privileged: true\n"
    )
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert "gpu-access-without-allocation" not in kit.ids(found)


def test_runtime_class_with_request(check: Any, kit: Any) -> None:
    pod = "runtimeClassName: nvidia\n" + kit.GPU_POD.lstrip("\n")
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert found == []


VISIBLE_POD = """
containers:
  - name: app
    image: example
    env:
      - name: NVIDIA_VISIBLE_DEVICES
        value: all
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def test_visible_devices_all_with_request(check: Any, kit: Any) -> None:
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", VISIBLE_POD)})
    assert kit.only(found, "visible-devices-override") == [("app.yaml", 15)]


def test_visible_devices_void_with_request(check: Any, kit: Any) -> None:
    pod = VISIBLE_POD.replace("value: all", "value: void")
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert "visible-devices-override" not in kit.ids(found)


EXPORTER = """\
image:
  repository: nvcr.io/nvidia/k8s/dcgm-exporter
resources:
  limits:
    nvidia.com/gpu: 1
"""


def test_exporter_takes_a_gpu(check: Any, kit: Any) -> None:
    found = check(
        {
            **plugin(kit),
            "dcgm.yaml": kit.helm_release(
                "dcgm-exporter", "dcgm-exporter", EXPORTER, namespace="mon"
            ),
        }
    )
    assert kit.only(found, "monitoring-consumes-gpu") == [("dcgm.yaml", 17)]


def test_exporter_without_request(check: Any, kit: Any) -> None:
    values = EXPORTER.replace("nvidia.com/gpu: 1", "memory: 1Gi")
    found = check(
        {
            **plugin(kit),
            "dcgm.yaml": kit.helm_release(
                "dcgm-exporter", "dcgm-exporter", values, namespace="mon"
            ),
        }
    )
    assert found == []


def test_selector_on_shared_product(check: Any, kit: Any) -> None:
    pod = "nodeSelector:\n  nvidia.com/gpu.product: NVIDIA-L4-SHARED\n" + kit.GPU_POD.lstrip("\n")
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert kit.only(found, "stale-sharing-labels") == [("app.yaml", 11)]


def test_affinity_on_replicas_label(check: Any, kit: Any) -> None:
    pod = (
        "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n"
        "      nodeSelectorTerms:\n        - matchExpressions:\n"
        '            - {key: nvidia.com/gpu.replicas, operator: Gt, values: ["1"]}\n'
    ) + kit.GPU_POD.lstrip("\n")
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert kit.only(found, "stale-sharing-labels") == [("app.yaml", 11)]


def test_selector_on_plain_product_and_present(check: Any, kit: Any) -> None:
    pod = (
        'nodeSelector:\n  nvidia.com/gpu.product: NVIDIA-L4\n  nvidia.com/gpu.present: "true"\n'
    ) + kit.GPU_POD.lstrip("\n")
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert "stale-sharing-labels" not in kit.ids(found)


DRA = "gpuResourcesEnabledOverride: true\n"
CLUSTER_ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: dcgm-resourceslices
rules:
  - apiGroups: [resource.k8s.io]
    resources: [resourceslices]
    verbs: [get, list, watch]
"""
OP_ENV = (
    "devicePlugin:\n  enabled: false\ndcgmExporter:\n  env:\n"
    '    - name: KUBERNETES_ENABLE_DRA\n      value: "true"\n'
)


def test_operator_exporter_without_dra_env(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator", "gpu-operator", "devicePlugin:\n  enabled: false\n"
            ),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA),
            "rbac.yaml": CLUSTER_ROLE,
        }
    )
    # dcgmExporter is a chart default (enabled): the finding points at spec.values.
    assert kit.only(found, "dcgm-dra-attribution") == [("op.yaml", 12)]


def test_operator_exporter_env_without_rbac(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OP_ENV),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA),
        }
    )
    assert kit.only(found, "dcgm-dra-attribution") == [("op.yaml", 16)]
    (f,) = (f for f in found if f.rule == "dcgm-dra-attribution")
    assert "resourceslices" in f.message and "KUBERNETES_ENABLE_DRA" not in f.message


def test_operator_exporter_env_and_rbac(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", OP_ENV),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA),
            "rbac.yaml": CLUSTER_ROLE,
        }
    )
    assert found == []


def test_standalone_exporter_with_chart_dra_switch(check: Any, kit: Any) -> None:
    values = "kubernetesDRA:\n  enabled: true\n"
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator",
                "gpu-operator",
                "devicePlugin:\n  enabled: false\ndcgmExporter:\n  enabled: false\n",
            ),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA),
            "dcgm.yaml": kit.helm_release(
                "dcgm-exporter", "dcgm-exporter", values, namespace="mon"
            ),
        }
    )
    assert "dcgm-dra-attribution" not in kit.ids(found)


def test_standalone_exporter_without_dra_switch(check: Any, kit: Any) -> None:
    found = check(
        {
            "op.yaml": kit.helm_release(
                "gpu-operator",
                "gpu-operator",
                "devicePlugin:\n  enabled: false\ndcgmExporter:\n  enabled: false\n",
            ),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA),
            "dcgm.yaml": kit.helm_release(
                "dcgm-exporter",
                "dcgm-exporter",
                "serviceMonitor:\n  enabled: true\n",
                namespace="mon",
            ),
        }
    )
    assert kit.only(found, "dcgm-dra-attribution") == [("dcgm.yaml", 12)]


def test_gpu_cluster_exporter_is_attributed(check: Any, kit: Any) -> None:
    """gpu-operator's GPUCluster stack grants its exporter resourceslices and sets the env."""
    values = "devicePlugin:\n  enabled: false\ngpuCluster:\n  deployCR: true\n"
    found = check(
        {
            "op.yaml": kit.helm_release("gpu-operator", "gpu-operator", values),
            "dra.yaml": kit.helm_release("dra", "dra-driver-nvidia-gpu", DRA),
        }
    )
    assert "dcgm-dra-attribution" not in kit.ids(found)


def test_privileged_tolerating_the_gpu_taint(check: Any, kit: Any) -> None:
    pod = (
        "tolerations:\n  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n"
        "containers:\n  - name: app\n    image: example\n"
        "    securityContext:\n      privileged: true\n"
    )
    found = check({**plugin(kit), "app.yaml": kit.deployment("app", pod)})
    assert kit.only(found, "gpu-access-without-allocation") == [("app.yaml", 17)]
