"""The standalone dcgm-exporter chart (NVIDIA/dcgm-exporter deployment/templates)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift.common import Obj
from gpushift.common import as_dict as d
from gpushift.gitops import CHART_POD_FIELDS
from gpushift_twin.charts._common import Rendered, daemonset, extra_env, helm_labels

IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.6.0-ubuntu22.04"


def render(*, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """Its DaemonSet (container ``exporter``); ``kubernetesDRA.enabled`` sets
    ``KUBERNETES_ENABLE_DRA`` and widens the ClusterRole to ResourceSlices."""
    name = release if "dcgm-exporter" in release else f"{release}-dcgm-exporter"
    labels = helm_labels(
        name="dcgm-exporter", release=release, chart="dcgm-exporter", version="4.4.1"
    )
    selector = {"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/instance": release}
    env = extra_env(values.get("extraEnv"))
    dra = bool(d(values.get("kubernetesDRA")).get("enabled"))
    if dra:
        env.append({"name": "KUBERNETES_ENABLE_DRA", "value": "true"})
    container: Obj = {
        "name": "exporter",
        "image": IMAGE,
        "args": [
            str(a)
            for a in values.get("arguments")
            or ["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv"]
        ],
        "env": [
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
            {"name": "DCGM_EXPORTER_LISTEN", "value": ":9400"},
            *env,
        ],
        "ports": [{"name": "metrics", "containerPort": 9400}],
    }
    if values.get("resources"):
        container["resources"] = values["resources"]
    pod: Obj = {"serviceAccountName": name, "containers": [container]}
    for key, opt in CHART_POD_FIELDS:
        if values.get(key):
            pod[opt] = values[key]
    resources = ["pods", "resourceslices"] if dra else ["pods"]
    return Rendered(
        [
            daemonset(
                name=name, namespace=namespace, labels=labels, selector=selector, pod_spec=pod
            ),
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name, "labels": labels},
                "rules": [
                    {
                        "apiGroups": ["", "resource.k8s.io"] if dra else [""],
                        "resources": resources,
                        "verbs": ["get", "list", "watch"],
                    }
                ],
            },
        ]
    )
