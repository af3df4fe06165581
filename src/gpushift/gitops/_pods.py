"""Normalising whatever runs pods (manifests, app-template, llmkube, dcgm-exporter) to a
``PodSpec``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpushift.gitops._charts import app_template_major
from gpushift.gitops._model import (
    GPU_RESOURCE,
    Container,
    HelmRelease,
    Manifest,
    PodClaim,
    PodSpec,
    Source,
    Workload,
)

_POD_OPTIONS = (
    "runtimeClassName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "securityContext",
    "priorityClassName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "schedulerName",
    "nodeName",
    "topologySpreadConstraints",
    "volumes",
    "serviceAccountName",
    "labels",
    "annotations",
)

#: The chart values the dcgm-exporter chart and llmkube copy to the pod spec as they are, each
#: with the pod-spec field it sets (``podSecurityContext`` is the pod's ``securityContext``).
#: The twin's chart models render from the same table.
CHART_POD_FIELDS: tuple[tuple[str, str], ...] = (
    ("runtimeClassName", "runtimeClassName"),
    ("nodeSelector", "nodeSelector"),
    ("affinity", "affinity"),
    ("tolerations", "tolerations"),
    ("podSecurityContext", "securityContext"),
    ("priorityClassName", "priorityClassName"),
)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _env(raw: Any) -> dict[str, str | None]:
    """Container env as a name→literal map, from a Kubernetes list or app-template's map."""
    out: dict[str, str | None] = {}
    if isinstance(raw, list):
        for e in raw:
            if isinstance(e, dict) and "name" in e:
                v = e.get("value")
                out[str(e["name"])] = None if v is None else str(v)
    elif isinstance(raw, dict):
        for name, v in raw.items():
            if isinstance(v, dict):
                val = v.get("value")
                out[str(name)] = None if val is None else str(val)
            else:
                out[str(name)] = None if v is None else _scalar(v)
    return out


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _claims(raw: Any) -> tuple[PodClaim, ...]:
    out: list[PodClaim] = []
    for c in raw if isinstance(raw, list) else ():
        if isinstance(c, dict) and "name" in c:
            tmpl = c.get("resourceClaimTemplateName")
            claim = c.get("resourceClaimName")
            out.append(
                PodClaim(
                    name=str(c["name"]),
                    template=str(tmpl) if tmpl else None,
                    claim=str(claim) if claim else None,
                )
            )
    return tuple(out)


def _container(name: str, spec: Mapping[str, Any], *, init: bool, source: Source) -> Container:
    return Container(
        name=name,
        init=init,
        resources=_dict(spec.get("resources")),
        env=_env(spec.get("env")),
        security_context=_dict(spec.get("securityContext")),
        source=source,
    )


# -- plain manifests ------------------------------------------------------------------------

_TEMPLATE_PATH: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


def manifest_workload(obj: Manifest) -> Workload | None:
    """The workload of a Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob."""
    path = _TEMPLATE_PATH.get(obj.kind)
    if path is None or not obj.api_version.startswith(("v1", "apps/", "batch/")):
        return None
    spec: Any = obj.body
    for k in path:
        spec = _dict(spec).get(k)
    spec = _dict(spec)
    src = obj.source.child(path)
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
    pod = PodSpec(
        containers=containers,
        init_containers=inits,
        resource_claims=_claims(spec.get("resourceClaims")),
        options=options,
        option_sources={k: src.child((k,)) for k in options},
        source=src,
    )
    replicas = _dict(obj.body.get("spec")).get("replicas")
    return Workload(
        kind=obj.kind,
        namespace=obj.namespace,
        name=obj.name,
        origin_kind="manifest",
        origin=obj,
        pod=pod,
        monitoring=_is_exporter(containers),
        replicas=replicas if isinstance(replicas, int) else None,
    )


def _is_exporter(containers: tuple[Container, ...]) -> bool:
    return any("dcgm" in c.name.lower() for c in containers)


# -- bjw-s app-template -----------------------------------------------------------------------

_CONTROLLER_KINDS = {
    "deployment": "Deployment",
    "statefulset": "StatefulSet",
    "daemonset": "DaemonSet",
    "cronjob": "CronJob",
    "job": "Job",
}


#: The container options ``controllers.<id>.defaultContainerOptions`` gives every container of
#: the controller (common 3.x schemas/controllers.json).
_CONTAINER_DEFAULTS = ("args", "command", "env", "envFrom", "image", "resources", "securityContext")
#: app-template 1.x's top-level pod fields, each with the pod-spec field it sets.
_V1_POD_FIELDS: tuple[tuple[str, str], ...] = (
    ("nodeSelector", "nodeSelector"),
    ("affinity", "affinity"),
    ("tolerations", "tolerations"),
    ("topologySpreadConstraints", "topologySpreadConstraints"),
    ("runtimeClassName", "runtimeClassName"),
    ("priorityClassName", "priorityClassName"),
    ("schedulerName", "schedulerName"),
    ("hostNetwork", "hostNetwork"),
    ("hostPID", "hostPID"),
    ("hostIPC", "hostIPC"),
    ("podSecurityContext", "securityContext"),
    ("podLabels", "labels"),
    ("podAnnotations", "annotations"),
)


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        cur = out.get(k)
        out[k] = _merged(cur, v) if isinstance(cur, dict) and isinstance(v, dict) else v
    return out


def _with_defaults(
    spec: Mapping[str, Any], defaults: Mapping[str, Any], *, merge: bool
) -> Mapping[str, Any]:
    """A container spec with the controller's ``defaultContainerOptions`` under it: key by key
    (``overwrite``, the default strategy), or maps merged (``merge``)."""
    if not defaults:
        return spec
    out = dict(spec)
    for k in _CONTAINER_DEFAULTS:
        if k not in defaults:
            continue
        if k not in out:
            out[k] = defaults[k]
        elif merge and isinstance(out[k], dict) and isinstance(defaults[k], dict):
            out[k] = _merged(defaults[k], out[k])
    return out


def app_template_workloads(hr: HelmRelease) -> Iterator[Workload]:
    """One workload per enabled app-template controller, read in the layout of the chart
    version the release uses (``app_template_major``).

    1.x: one controller (``controller``) whose main container and pod fields sit at the top
    level. 2.x and later: ``controllers``, pod options ``defaultPodOptions`` overlaid by the
    controller's ``pod`` key by key (4.x's ``defaultPodOptionsStrategy: merge`` merges maps;
    earlier majors have no such key); from 3.x each controller's ``defaultContainerOptions``
    fill its containers (init containers too unless
    ``applyDefaultContainerOptionsToInitContainers: false``); pod ``resourceClaims`` are
    rendered from 5.x only (the earlier schemas reject the key). An unknown version reads the
    newest layout.
    """
    major = app_template_major(hr)
    if major == 1:
        yield from _app_template_v1(hr)
        return
    values = hr.values
    controllers = _dict(values.get("controllers"))
    defaults = _dict(values.get("defaultPodOptions"))
    strategy = values.get("defaultPodOptionsStrategy", "overwrite")
    if major is not None and major < 4:
        strategy = "overwrite"
    base = hr.values_source
    enabled = [
        (cid, c)
        for cid, c in controllers.items()
        if isinstance(c, dict) and c.get("enabled", True) is not False
    ]
    for cid, ctrl in enabled:
        csrc = base.child(("controllers", cid))
        pod_opts = _dict(ctrl.get("pod"))
        options: dict[str, Any] = {}
        sources: dict[str, Source] = {}
        for k, v in defaults.items():
            options[k] = v
            sources[k] = base.child(("defaultPodOptions", k))
        for k, v in pod_opts.items():
            if strategy == "merge" and isinstance(v, dict) and isinstance(options.get(k), dict):
                options[k] = {**options[k], **v}
            else:
                options[k] = v
            sources[k] = csrc.child(("pod", k))
        if major is not None and major < 5:
            options.pop("resourceClaims", None)
            sources.pop("resourceClaims", None)
        cdefaults: Mapping[str, Any] = {}
        if major is None or major >= 3:
            cdefaults = _dict(ctrl.get("defaultContainerOptions"))
        merge = ctrl.get("defaultContainerOptionsStrategy") == "merge"
        init_defaults = (
            cdefaults
            if ctrl.get("applyDefaultContainerOptionsToInitContainers", True) is not False
            else {}
        )
        containers = tuple(
            _container(
                str(n),
                _with_defaults(c, cdefaults, merge=merge),
                init=False,
                source=csrc.child(("containers", n)),
            )
            for n, c in _dict(ctrl.get("containers")).items()
            if isinstance(c, dict) and c.get("enabled", True) is not False
        )
        inits = tuple(
            _container(
                str(n),
                _with_defaults(c, init_defaults, merge=merge),
                init=True,
                source=csrc.child(("initContainers", n)),
            )
            for n, c in _dict(ctrl.get("initContainers")).items()
            if isinstance(c, dict) and c.get("enabled", True) is not False
        )
        kind = _CONTROLLER_KINDS.get(str(ctrl.get("type", "deployment")).lower(), "Deployment")
        # bjw-s common: the only (or same-named) controller takes the release name.
        name = hr.release_name
        if len(enabled) > 1 and cid != hr.release_name:
            name = f"{hr.release_name}-{cid}"
        replicas = ctrl.get("replicas")
        yield Workload(
            kind=kind,
            namespace=hr.target_namespace,
            name=name,
            origin_kind="app-template",
            origin=hr.obj,
            pod=PodSpec(
                containers=containers,
                init_containers=inits,
                resource_claims=_claims(options.get("resourceClaims")),
                options=options,
                option_sources=sources,
                source=csrc,
            ),
            monitoring=False,
            replicas=replicas if isinstance(replicas, int) else None,
        )


def _app_template_v1(hr: HelmRelease) -> Iterator[Workload]:
    """app-template 1.x: the controller (``controller``), its main container from the top
    level (named after the release, as app-template sets the name override to it), extra
    containers from ``additionalContainers`` and ``sidecars``, ``initContainers``, and the
    pod fields from the top level."""
    values = hr.values
    base = hr.values_source
    ctrl = _dict(values.get("controller"))
    if ctrl.get("enabled", True) is False:
        return
    main = _container(hr.release_name, values, init=False, source=base)
    extra = tuple(
        _container(str(n), c, init=False, source=base.child((field, n)))
        for field in ("additionalContainers", "sidecars")
        for n, c in _dict(values.get(field)).items()
        if isinstance(c, dict)
    )
    inits = tuple(
        _container(str(n), c, init=True, source=base.child(("initContainers", n)))
        for n, c in _dict(values.get("initContainers")).items()
        if isinstance(c, dict)
    )
    options: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for key, opt in _V1_POD_FIELDS:
        if values.get(key) not in (None, "", {}, []):
            options[opt] = values[key]
            sources[opt] = base.child((key,))
    replicas = ctrl.get("replicas")
    yield Workload(
        kind=_CONTROLLER_KINDS.get(str(ctrl.get("type", "deployment")).lower(), "Deployment"),
        namespace=hr.target_namespace,
        name=hr.release_name,
        origin_kind="app-template",
        origin=hr.obj,
        pod=PodSpec(
            containers=(main, *extra),
            init_containers=inits,
            resource_claims=(),
            options=options,
            option_sources=sources,
            source=base,
        ),
        monitoring=False,
        replicas=replicas if isinstance(replicas, int) else None,
    )


# -- dcgm-exporter chart ----------------------------------------------------------------------


def dcgm_exporter_workload(hr: HelmRelease) -> Workload:
    """The DaemonSet the dcgm-exporter chart renders (container ``exporter``)."""
    values = hr.values
    base = hr.values_source
    env: dict[str, str | None] = _env(values.get("extraEnv"))
    args = values.get("arguments")
    if isinstance(args, list) and any("kubernetes-enable-dra" in str(a) for a in args):
        env.setdefault("KUBERNETES_ENABLE_DRA", "true")
    if _dict(values.get("kubernetesDRA")).get("enabled"):
        env["KUBERNETES_ENABLE_DRA"] = "true"
    container = Container(
        name="exporter",
        init=False,
        resources=_dict(values.get("resources")),
        env=env,
        security_context=_dict(values.get("securityContext")),
        source=base,
    )
    options: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for key, opt in (*CHART_POD_FIELDS, ("hostNetwork", "hostNetwork")):
        if values.get(key) not in (None, "", {}, []):
            options[opt] = values[key]
            sources[opt] = base.child((key,))
    return Workload(
        kind="DaemonSet",
        namespace=hr.target_namespace,
        name=hr.release_name,
        origin_kind="dcgm-exporter",
        origin=hr.obj,
        pod=PodSpec(
            containers=(container,),
            init_containers=(),
            resource_claims=(),
            options=options,
            option_sources=sources,
            source=base,
        ),
        monitoring=True,
    )


# -- llmkube ----------------------------------------------------------------------------------

#: llmkube's extended resource per ``hardware.gpu.vendor``
#: (internal/controller/gpu_resources.go); unknown vendors get ``GPU_RESOURCE``.
LLMKUBE_VENDOR_RESOURCES: Mapping[str, str] = {
    "nvidia": GPU_RESOURCE,
    "amd": "amd.com/gpu",
    "intel": "gpu.intel.com/i915",
}


def _gpu_count(value: Any) -> int:
    # pkg/apiutil/gpu.go GPUCount: only a count above zero means GPUs were asked for.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def llmkube_workload(isvc: Manifest, model: Manifest | None) -> Workload:
    """The Deployment llmkube renders for an InferenceService (and its Model).

    As defilantech/LLMKube's deployment_builder.go does: ``limits[<resource>] = count`` with
    count from ``Model.spec.hardware.gpu.count`` (> 0) else ``spec.resources.gpu``; with
    ``hardware.gpu.resourceClaims`` the claims go to the pod and every claim to the container
    instead.
    """
    spec = _dict(isvc.body.get("spec"))
    mspec = _dict(model.body.get("spec")) if model is not None else {}
    gpu = _dict(_dict(mspec.get("hardware")).get("gpu"))
    count = _gpu_count(gpu.get("count"))
    if count == 0:
        count = _gpu_count(_dict(spec.get("resources")).get("gpu"))
    claims = _claims(gpu.get("resourceClaims"))
    resources: dict[str, Any] = {}
    if claims:
        resources["claims"] = [{"name": c.name} for c in claims]
    elif count > 0 and gpu.get("enabled", True) is not False:
        name = gpu.get("resourceName") or LLMKUBE_VENDOR_RESOURCES.get(
            str(gpu.get("vendor", "nvidia")).lower(), GPU_RESOURCE
        )
        resources["limits"] = {str(name): count}
    src = isvc.source
    if claims and model is not None:
        csrc = model.source.child(("spec", "hardware", "gpu", "resourceClaims"))
    elif "resources" in spec:
        csrc = src.child(("spec", "resources"))
    else:
        csrc = src.child(("spec",))
    container = Container(
        name="llama-server",
        init=False,
        resources=resources,
        env=_env(spec.get("env")),
        security_context=_dict(spec.get("securityContext")),
        source=csrc,
    )
    options: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for key, opt in CHART_POD_FIELDS:
        if key in spec:
            options[opt] = spec[key]
            sources[opt] = src.child(("spec", key))
    replicas = spec.get("replicas")
    return Workload(
        kind="Deployment",
        namespace=isvc.namespace,
        name=isvc.name,
        origin_kind="llmkube",
        origin=isvc,
        pod=PodSpec(
            containers=(container,),
            init_containers=(),
            resource_claims=claims,
            options=options,
            option_sources=sources,
            source=src.child(("spec",)),
        ),
        monitoring=False,
        replicas=replicas if isinstance(replicas, int) else None,
    )
