"""GPU consumers that arrive through operator CRDs, normalised to workloads.

Each operator embeds a pod spec (or a PodTemplateSpec) at a documented place; its controller
copies it to the pods it creates. The shapes, by CRD:

- KServe ``serving.kserve.io`` InferenceService: ``spec.predictor`` (and ``transformer``,
  ``explainer``) is a PodSpec extended with one framework container (``model``, ``sklearn``,
  ``pytorch``, …) that KServe names ``kserve-container`` (kserve pkg/apis/serving/v1beta1
  predictor.go, component.go: ``minReplicas``, ``maxReplicas``);
- Ray ``ray.io`` RayCluster ``spec.headGroupSpec.template`` and
  ``spec.workerGroupSpecs[].template`` (``replicas``); RayJob under ``spec.rayClusterSpec``,
  RayService under ``spec.rayClusterConfig`` (ray-project/kuberay ray-operator/apis/ray/v1);
- Kubeflow ``kubeflow.org`` Notebook ``spec.template.spec``; PyTorchJob
  ``spec.pytorchReplicaSpecs.<Master|Worker>.template`` (``replicas``); Kubeflow Trainer
  ``trainer.kubeflow.org`` TrainJob ``spec.trainer.resourcesPerNode`` and ``env`` on
  ``numNodes`` nodes;
- Knative ``serving.knative.dev`` Service ``spec.template.spec``;
- Argo Rollouts ``argoproj.io`` Rollout ``spec.template`` (``replicas``);
- any other object embedding a PodTemplateSpec (``template: {spec: {containers: […]}}``) or a
  pod spec, counted only when it asks for ``nvidia.com/gpu*`` or a resource claim: without
  knowing the CRD, that is the only sign the object runs GPU pods.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gpushift.gitops._model import GPU_RESOURCE, Manifest, PodSpec, Source, Workload
from gpushift.gitops._pods import _POD_OPTIONS, _claims, _container

Keys = tuple[str | int, ...]

#: KServe's predictor frameworks: each is a container spec (v1beta1 PredictorSpec).
_KSERVE_FRAMEWORKS = (
    "model",
    "sklearn",
    "xgboost",
    "tensorflow",
    "pytorch",
    "triton",
    "onnx",
    "huggingface",
    "pmml",
    "lightgbm",
    "paddle",
)
_KSERVE_COMPONENTS = ("predictor", "transformer", "explainer")

#: API groups whose objects never embed a GPU pod (or are read elsewhere): skipped by the
#: generic search, which keeps it off the bulk of a repository.
_SKIP_GROUPS = (
    "v1",
    "apps/",
    "batch/",
    "helm.toolkit.fluxcd.io/",
    "kustomize.toolkit.fluxcd.io/",
    "source.toolkit.fluxcd.io/",
    "notification.toolkit.fluxcd.io/",
    "image.toolkit.fluxcd.io/",
    "rbac.authorization.k8s.io/",
    "networking.k8s.io/",
    "resource.k8s.io/",
    "node.k8s.io/",
    "storage.k8s.io/",
    "policy/",
    "apiextensions.k8s.io/",
    "admissionregistration.k8s.io/",
    "cert-manager.io/",
    "monitoring.coreos.com/",
    "gateway.networking.k8s.io/",
    "external-secrets.io/",
    "inference.llmkube.dev/",
    "argoproj.io/v1alpha1",
)
_MAX_DEPTH = 8


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _pod(spec: Mapping[str, Any], src: Source, *, extra: tuple[Any, ...] = ()) -> PodSpec:
    """A pod spec read at ``src``; ``extra`` are containers built elsewhere (KServe's)."""
    containers = tuple(
        _container(str(c.get("name", i)), c, init=False, source=src.child(("containers", i)))
        for i, c in enumerate(spec.get("containers") or [])
        if isinstance(c, dict)
    )
    inits = tuple(
        _container(str(c.get("name", i)), c, init=True, source=src.child(("initContainers", i)))
        for i, c in enumerate(spec.get("initContainers") or [])
        if isinstance(c, dict)
    )
    options = {k: spec[k] for k in _POD_OPTIONS if k in spec}
    return PodSpec(
        containers=tuple(extra) + containers,
        init_containers=inits,
        resource_claims=_claims(spec.get("resourceClaims")),
        options=options,
        option_sources={k: src.child((k,)) for k in options},
        source=src,
    )


def _workload(obj: Manifest, name: str, pod: PodSpec, replicas: int | None) -> Workload:
    return Workload(
        kind=obj.kind,
        namespace=obj.namespace,
        name=name,
        origin_kind="operator",
        origin=obj,
        pod=pod,
        replicas=replicas,
    )


def _template(obj: Manifest, keys: Keys, name: str, replicas: Any = None) -> Workload | None:
    """The workload of a PodTemplateSpec at ``keys`` (None when absent)."""
    cur: Any = obj.body
    for k in keys:
        cur = _dict(cur).get(str(k)) if isinstance(k, str) else None
    spec = _dict(_dict(cur).get("spec"))
    if not spec:
        return None
    src = obj.source.child((*keys, "spec"))
    return _workload(obj, name, _pod(spec, src), _int(replicas))


# -- by CRD -------------------------------------------------------------------------------


def _kserve(obj: Manifest) -> Iterator[Workload]:
    spec = _dict(obj.body.get("spec"))
    for comp in _KSERVE_COMPONENTS:
        block = _dict(spec.get(comp))
        if not block:
            continue
        src = obj.source.child(("spec", comp))
        extra = []
        for fw in _KSERVE_FRAMEWORKS:
            c = block.get(fw)
            if isinstance(c, dict):
                # KServe names the framework container kserve-container.
                extra.append(_container("kserve-container", c, init=False, source=src.child((fw,))))
        name = obj.name if comp == "predictor" else f"{obj.name}-{comp}"
        pod = _pod(block, src, extra=tuple(extra))
        # minReplicas: 0 is scale-to-zero, not parked: a request brings a pod back.
        yield _workload(obj, name, pod, None)


def _ray_cluster(obj: Manifest, base: Keys) -> Iterator[Workload]:
    cluster: Any = obj.body
    for k in base:
        cluster = _dict(cluster).get(str(k))
    cluster = _dict(cluster)
    head = _template(obj, (*base, "headGroupSpec", "template"), f"{obj.name}-head")
    if head is not None:
        yield head
    for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
        if not isinstance(group, dict):
            continue
        spec = _dict(_dict(group.get("template")).get("spec"))
        if not spec:
            continue
        src = obj.source.child((*base, "workerGroupSpecs", i, "template", "spec"))
        gname = str(group.get("groupName") or i)
        replicas = group.get("replicas", group.get("minReplicas"))
        if group.get("suspend") is True:
            replicas = 0
        yield _workload(obj, f"{obj.name}-{gname}", _pod(spec, src), _int(replicas))


def _pytorch_job(obj: Manifest) -> Iterator[Workload]:
    specs = _dict(_dict(obj.body.get("spec")).get("pytorchReplicaSpecs"))
    for role, rs in specs.items():
        if isinstance(rs, dict):
            keys: Keys = ("spec", "pytorchReplicaSpecs", str(role), "template")
            w = _template(obj, keys, f"{obj.name}-{str(role).lower()}", rs.get("replicas"))
            if w is not None:
                yield w


def _train_job(obj: Manifest) -> Iterator[Workload]:
    trainer = _dict(_dict(obj.body.get("spec")).get("trainer"))
    if not trainer:
        return
    src = obj.source.child(("spec", "trainer"))
    c = {"resources": trainer.get("resourcesPerNode"), "env": trainer.get("env")}
    # Lines of requests fall back to resourcesPerNode (the container has no resources key).
    node = _container("node", c, init=False, source=src.child(("resourcesPerNode",)))
    pod = PodSpec((node,), (), (), {}, {}, src)
    yield _workload(obj, obj.name, pod, _int(trainer.get("numNodes")))


def _generic(obj: Manifest) -> Iterator[Workload]:
    """Embedded PodTemplateSpecs (or pod specs) that ask for an NVIDIA GPU or a claim."""
    found: list[tuple[Keys, dict[str, Any]]] = []
    _search(obj.body, (), found, 0)
    for keys, spec in found:
        w = _workload(obj, obj.name, _pod(spec, obj.source.child(keys)), None)
        if _asks(w.pod):
            yield w


def _search(node: Any, keys: Keys, found: list[tuple[Keys, dict[str, Any]]], depth: int) -> None:
    if depth > _MAX_DEPTH or not isinstance(node, dict):
        return
    if isinstance(node.get("containers"), list):
        found.append((keys, node))
        return
    for k, v in node.items():
        if isinstance(v, dict):
            _search(v, (*keys, str(k)), found, depth + 1)


def _asks(pod: PodSpec) -> bool:
    if pod.resource_claims:
        return True
    return any(
        str(res).startswith(GPU_RESOURCE)
        for c in pod.all_containers
        for res in (*c.limits, *c.requests)
    )


def crd_workloads(objects: Sequence[Manifest]) -> Iterator[Workload]:
    """The workloads of every operator object among ``objects``."""
    for o in objects:
        api, kind = o.api_version, o.kind
        if api.startswith("serving.kserve.io/") and kind == "InferenceService":
            yield from _kserve(o)
        elif api.startswith("ray.io/") and kind == "RayCluster":
            yield from _ray_cluster(o, ("spec",))
        elif api.startswith("ray.io/") and kind == "RayJob":
            yield from _ray_cluster(o, ("spec", "rayClusterSpec"))
        elif api.startswith("ray.io/") and kind == "RayService":
            yield from _ray_cluster(o, ("spec", "rayClusterConfig"))
        elif api.startswith("kubeflow.org/") and kind == "Notebook":
            w = _template(o, ("spec", "template"), o.name)
            if w is not None:
                yield w
        elif api.startswith("kubeflow.org/") and kind == "PyTorchJob":
            yield from _pytorch_job(o)
        elif api.startswith("trainer.kubeflow.org/") and kind == "TrainJob":
            yield from _train_job(o)
        elif api.startswith("serving.knative.dev/") and kind == "Service":
            w = _template(o, ("spec", "template"), o.name)
            if w is not None:
                yield w
        elif api.startswith("argoproj.io/") and kind == "Rollout":
            w = _template(
                o, ("spec", "template"), o.name, _dict(o.body.get("spec")).get("replicas")
            )
            if w is not None:
                yield w
        elif not api.startswith(_SKIP_GROUPS) and "/" in api:
            yield from _generic(o)
