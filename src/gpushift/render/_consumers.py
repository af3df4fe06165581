"""GPU consumers and the per-namespace ResourceClaimTemplates they use under ``dra``.

Under ``dra`` pods ask through a claim (pod ``resourceClaims`` plus container
``resources.claims``); under the device-plugin allocators through ``nvidia.com/gpu``. llmkube
InferenceServices always ask for ``nvidia.com/gpu``: under ``dra`` the scheduler serves that
through the DeviceClass's extendedResourceName (bridging).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import groupby
from typing import Any

from gpushift._sharing import Allocator
from gpushift._yamlout import Note
from gpushift.render import _common as c
from gpushift.render._bodies import FluxKustomization
from gpushift.render._config import (
    BRIDGE_DEVICE_CLASS,
    GPU_DEVICE_CLASS,
    Consumer,
    ConsumerStyle,
    GpushiftConfig,
)
from gpushift.render._flux import (
    Files,
    Ref,
    api_version,
    component,
    flux_kustomization,
    helm_release,
    oci_repository,
)

#: The name of the pod's claim (and of the container's reference to it).
CLAIM_NAME = "gpu"
LLMKUBE = "llmkube"
LLMKUBE_MODELS = c.LLMKUBE_MODELS


def render(cfg: GpushiftConfig) -> Files:
    """Every consumer, plus the claim template of each consumer namespace under ``dra``."""
    files = Files()
    if cfg.allocator.is_dra:
        for ns in sorted({x.namespace for x in cfg.consumers if _uses_claim(x)}):
            _render_claim_template(cfg=cfg, files=files, ns=ns)
    for consumer in cfg.consumers:
        if consumer.style is ConsumerStyle.APP_TEMPLATE:
            _render_app_template(cfg=cfg, files=files, consumer=consumer)
        elif consumer.style is ConsumerStyle.DEPLOYMENT:
            _render_deployment(cfg=cfg, files=files, consumer=consumer)
    _render_llmkube(cfg=cfg, files=files)
    return files


def _uses_claim(consumer: Consumer) -> bool:
    return consumer.style is not ConsumerStyle.INFERENCE_SERVICE


def _stack_dependency(*, cfg: GpushiftConfig, consumer: Consumer) -> Ref:
    """The Kustomization a consumer waits for before its pods can get a GPU."""
    gpu_ns = cfg.cluster.gpu_namespace
    if cfg.allocator.is_dra:
        if _uses_claim(consumer):
            return Ref(c.CLAIM_TEMPLATES_APP)
        return Ref(_dra_stack(cfg), gpu_ns)
    if cfg.allocator is Allocator.DEVICE_PLUGIN:
        return Ref(c.DEVICE_PLUGIN, gpu_ns)
    return Ref(c.GPU_OPERATOR, gpu_ns)


def _dra_stack(cfg: GpushiftConfig) -> str:
    """The component that runs the DRA driver: its chart, or gpu-operator's GPUCluster."""
    return c.GPU_OPERATOR if cfg.allocator is Allocator.GPUCLUSTER else c.DRA_DRIVER


def _render_claim_template(*, cfg: GpushiftConfig, files: Files, ns: str) -> None:
    exactly: dict[str, Any] = {"deviceClassName": GPU_DEVICE_CLASS}
    if cfg.sharing == "memory" and cfg.memory_per_claim is not None:
        exactly["capacity"] = Note(
            {"requests": {"memory": cfg.memory_per_claim}},
            "Under consumableShares: memory a claim that asks for no memory takes the card.",
        )
    template = {
        "apiVersion": api_version("ResourceClaimTemplate"),
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": c.CLAIM_TEMPLATE, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [{"name": "nvidia-gpu", "exactly": exactly}]}}},
    }
    ks = flux_kustomization(
        cfg=cfg,
        name=c.CLAIM_TEMPLATES_APP,
        namespace=ns,
        path=f"{ns}/{c.CLAIM_TEMPLATES_APP}/app",
        depends_on=[
            Note(
                Ref(_dra_stack(cfg), cfg.cluster.gpu_namespace),
                f"The DeviceClass {GPU_DEVICE_CLASS} comes from gpu-operator's GPUCluster."
                if cfg.allocator is Allocator.GPUCLUSTER
                else f"The DeviceClass {GPU_DEVICE_CLASS} comes from the DRA driver's chart.",
            )
        ],
        force_note=(
            "ResourceClaimTemplate specs are immutable: a changed template must be "
            "recreated, which force does."
        ),
    )
    files.add(f"{ns}/{c.CLAIM_TEMPLATES_APP}/ks.yaml", [ks])
    base = f"{ns}/{c.CLAIM_TEMPLATES_APP}/app"
    files.add(
        f"{base}/kustomization.yaml",
        [
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": ["./resourceclaimtemplate.yaml"],
            }
        ],
    )
    files.add(
        f"{base}/resourceclaimtemplate.yaml",
        [template],
        header=(
            "Every GPU pod in this namespace gets its own ResourceClaim from this template.\n"
            "The spec is immutable; the Kustomization has force: true so a change recreates it."
        ),
    )


def _gpu_resources(*, cfg: GpushiftConfig, consumer: Consumer) -> dict[str, Any]:
    if cfg.allocator.is_dra:
        return {"claims": [{"name": CLAIM_NAME}]}
    count = consumer.gpus
    return {"requests": {c.GPU_RESOURCE: count}, "limits": {c.GPU_RESOURCE: count}}


def _pod_claims() -> list[dict[str, Any]]:
    return [{"name": CLAIM_NAME, "resourceClaimTemplateName": c.CLAIM_TEMPLATE}]


def _pod_placement(cfg: GpushiftConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if cfg.runtime_class:
        out["runtimeClassName"] = cfg.runtime_class
    out["affinity"] = c.gpu_node_affinity(cfg)
    if cfg.cluster.gpu_nodes.tolerations:
        out["tolerations"] = c.tolerations(cfg)
    return out


def _consumer_ks(*, cfg: GpushiftConfig, consumer: Consumer) -> FluxKustomization:
    return flux_kustomization(
        cfg=cfg,
        name=consumer.name,
        namespace=consumer.namespace,
        path=f"{consumer.namespace}/{consumer.name}/app",
        depends_on=[_stack_dependency(cfg=cfg, consumer=consumer)],
    )


def _render_app_template(*, cfg: GpushiftConfig, files: Files, consumer: Consumer) -> None:
    repository, tag = c.split_image(consumer.image)
    controller: dict[str, Any] = {
        "containers": {
            "app": {
                "image": {"repository": repository, "tag": tag},
                "resources": _gpu_resources(cfg=cfg, consumer=consumer),
            }
        }
    }
    if cfg.allocator.is_dra:
        controller["pod"] = {
            "resourceClaims": Note(
                _pod_claims(), "Needs app-template 5 or later (pod.resourceClaims)."
            )
        }
    values = {
        "controllers": {consumer.name: controller},
        "defaultPodOptions": _pod_placement(cfg),
    }
    app: dict[str, list[Mapping[str, Any]]] = {
        "ocirepository.yaml": [oci_repository(name=consumer.name, chart=cfg.charts.app_template)],
        "helmrelease.yaml": [helm_release(name=consumer.name, values=values)],
    }
    component(
        files,
        namespace=consumer.namespace,
        name=consumer.name,
        app=app,
        ks=[_consumer_ks(cfg=cfg, consumer=consumer)],
    )


def _render_deployment(*, cfg: GpushiftConfig, files: Files, consumer: Consumer) -> None:
    labels = {"app.kubernetes.io/name": consumer.name}
    pod_spec: dict[str, Any] = dict(_pod_placement(cfg))
    if cfg.allocator.is_dra:
        pod_spec["resourceClaims"] = _pod_claims()
    pod_spec["containers"] = [
        {
            "name": "app",
            "image": consumer.image,
            "resources": _gpu_resources(cfg=cfg, consumer=consumer),
        }
    ]
    deployment = {
        "apiVersion": api_version("Deployment"),
        "kind": "Deployment",
        "metadata": {"name": consumer.name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }
    component(
        files,
        namespace=consumer.namespace,
        name=consumer.name,
        app={"deployment.yaml": [deployment]},
        ks=[_consumer_ks(cfg=cfg, consumer=consumer)],
    )


def _render_llmkube(*, cfg: GpushiftConfig, files: Files) -> None:
    services = [x for x in cfg.consumers if x.style is ConsumerStyle.INFERENCE_SERVICE]
    if not services:
        return
    services.sort(key=lambda x: x.namespace)
    operator_ns = services[0].namespace
    operator_ks = flux_kustomization(
        cfg=cfg, name=LLMKUBE, namespace=operator_ns, path=f"{operator_ns}/{LLMKUBE}/app"
    )
    component(
        files,
        namespace=operator_ns,
        name=LLMKUBE,
        app={
            "ocirepository.yaml": [oci_repository(name=LLMKUBE, chart=cfg.charts.llmkube)],
            "helmrelease.yaml": [helm_release(name=LLMKUBE, values={})],
        },
        ks=[],
    )
    for ns, group in groupby(services, key=lambda x: x.namespace):
        members = list(group)
        folder = LLMKUBE if ns == operator_ns else LLMKUBE_MODELS
        models_ks = flux_kustomization(
            cfg=cfg,
            name=LLMKUBE_MODELS,
            namespace=ns,
            path=f"{ns}/{folder}/models",
            depends_on=[
                Ref(LLMKUBE, None if ns == operator_ns else operator_ns),
                _stack_dependency(cfg=cfg, consumer=members[0]),
            ],
        )
        app = {f"{x.name}.yaml": _llmkube_docs(cfg=cfg, consumer=x) for x in members}
        ks = [operator_ks, models_ks] if ns == operator_ns else [models_ks]
        component(files, namespace=ns, name=folder, app=app, ks=ks, app_dir="models")


def _llmkube_docs(*, cfg: GpushiftConfig, consumer: Consumer) -> list[dict[str, Any]]:
    model = {
        "apiVersion": api_version("Model"),
        "kind": "Model",
        "metadata": {"name": consumer.name},
        "spec": {
            "source": consumer.model,
            "format": "gguf",
            "hardware": {
                "accelerator": "cuda",
                "gpu": {"enabled": True, "vendor": "nvidia", "count": consumer.gpus},
            },
        },
    }
    spec: dict[str, Any] = {
        "modelRef": consumer.name,
        "runtime": "llamacpp",
        "image": consumer.image,
        "replicas": 1,
    }
    if cfg.runtime_class:
        spec["runtimeClassName"] = cfg.runtime_class
    gpu: Any = consumer.gpus
    if cfg.allocator is Allocator.DRA:
        gpu = Note(
            consumer.gpus,
            "Stays on nvidia.com/gpu: the scheduler serves it from the gpu.nvidia.com "
            "DeviceClass (extendedResourceName), taking one share per GPU.",
        )
    elif cfg.allocator is Allocator.GPUCLUSTER:
        gpu = Note(
            consumer.gpus,
            f"Stays on nvidia.com/gpu: the scheduler serves it from the {BRIDGE_DEVICE_CLASS} "
            "DeviceClass (extendedResourceName), taking one share per GPU.",
        )
    spec["resources"] = {"gpu": gpu}
    spec["nodeSelector"] = {cfg.gpu_label: "true"}
    if cfg.cluster.gpu_nodes.tolerations:
        spec["tolerations"] = c.tolerations(cfg)
    service = {
        "apiVersion": api_version("InferenceService"),
        "kind": "InferenceService",
        "metadata": {"name": consumer.name},
        "spec": spec,
    }
    return [model, service]
