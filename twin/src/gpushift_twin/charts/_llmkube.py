"""llmkube: the chart installs the operator; the operator turns an InferenceService (and its
Model) into a Deployment (defilantech/LLMKube internal/controller/deployment_builder.go)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpushift.common import Obj
from gpushift.common import as_dict as d
from gpushift.gitops import CHART_POD_FIELDS, GPU_RESOURCE, LLMKUBE_VENDOR_RESOURCES
from gpushift_twin.charts._common import Rendered, helm_labels

OPERATOR_IMAGE = "ghcr.io/defilantech/llmkube-controller:0.9.19"


def render(*, release: str, namespace: str, values: Mapping[str, Any]) -> Rendered:
    """The operator's Deployment (the CRDs are served by the twin from the start)."""
    labels = helm_labels(name="llmkube", release=release, chart="llmkube", version="0.9.19")
    selector = {"control-plane": "controller-manager", "app.kubernetes.io/name": "llmkube"}
    return Rendered(
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {
                    "name": f"{release}-controller-manager",
                    "namespace": namespace,
                    "labels": labels,
                },
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": selector},
                    "template": {
                        "metadata": {"labels": {**labels, **selector}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "manager",
                                    "image": OPERATOR_IMAGE,
                                    "args": ["--leader-elect"],
                                }
                            ]
                        },
                    },
                },
            }
        ]
    )


def inference_deployment(isvc: Obj, model: Obj | None) -> Obj:
    """The Deployment for an InferenceService: strategy Recreate, ``limits[<resource>] =
    count`` (Model ``hardware.gpu.count`` > 0, else ``resources.gpu``), or the Model's
    ``hardware.gpu.resourceClaims`` as pod claims used by the container."""
    meta = isvc["metadata"]
    spec = d(isvc.get("spec"))
    gpu = d(d(d(model.get("spec")).get("hardware")).get("gpu")) if model else {}
    count = gpu.get("count") if isinstance(gpu.get("count"), int) and gpu["count"] > 0 else 0
    if not count:
        rgpu = d(spec.get("resources")).get("gpu")
        count = rgpu if isinstance(rgpu, int) else 0
    claims = [dict(c) for c in gpu.get("resourceClaims") or [] if isinstance(c, Mapping)]
    resources: Obj = {}
    res = d(spec.get("resources"))
    requests: Obj = {}
    if res.get("cpu"):
        requests["cpu"] = res["cpu"]
    if res.get("hostMemory") or res.get("memory"):
        requests["memory"] = res.get("hostMemory") or res.get("memory")
    if requests:
        resources["requests"] = requests
    pod: Obj = {}
    tolerations = list(spec.get("tolerations") or [])
    if claims:
        resources["claims"] = [{"name": c["name"]} for c in claims if c.get("name")]
        pod["resourceClaims"] = claims
    elif count and gpu.get("enabled", True) is not False:
        name = str(
            gpu.get("resourceName")
            or LLMKUBE_VENDOR_RESOURCES.get(str(gpu.get("vendor", "nvidia")).lower(), GPU_RESOURCE)
        )
        resources["limits"] = {name: count}
        tolerations.append(
            {"key": name, "operator": "Equal", "value": "present", "effect": "NoSchedule"}
        )
    container: Obj = {
        "name": "llama-server",
        "image": str(spec.get("image") or "ghcr.io/ggml-org/llama.cpp:server-cuda"),
        "ports": [{"name": "http", "containerPort": 8080}],
    }
    if resources:
        container["resources"] = resources
    if spec.get("env"):
        container["env"] = spec["env"]
    pod["containers"] = [container]
    if tolerations:
        pod["tolerations"] = tolerations
    for key, opt in CHART_POD_FIELDS:
        # The tolerations are set above: the user's plus the one for the GPU resource.
        if key != "tolerations" and spec.get(key):
            pod[opt] = spec[key]
    selector = {"app": str(meta["name"]), "inference.llmkube.dev/service": str(meta["name"])}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": str(meta["name"]),
            "namespace": str(meta.get("namespace") or "default"),
            "labels": selector,
            "ownerReferences": [
                {
                    "apiVersion": "inference.llmkube.dev/v1alpha1",
                    "kind": "InferenceService",
                    "name": str(meta["name"]),
                    "uid": str(meta.get("uid", "")),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": spec.get("replicas", 1),
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": {**d(spec.get("podLabels")), **selector}},
                "spec": pod,
            },
        },
    }
