"""Rules about how workloads reach the GPU: requests, runtime, env, selectors, monitoring."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpushift.gitops import Container, HelmRelease, PodSpec, Workload, truthy
from gpushift.reports import Finding
from gpushift.rules._context import (
    Context,
    body_at,
    nvidia_requests,
    option_line,
    request_keys,
)

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
#: dcgm-exporter's switch for attributing metrics to DRA claims (NVIDIA/dcgm-exporter).
DCGM_DRA_ENV = "KUBERNETES_ENABLE_DRA"
#: GFD labels that describe device-plugin time-slicing and outlive the plugin (nvidia.md §11).
_STALE_KEYS = ("nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy")
_PRODUCT_KEY = "nvidia.com/gpu.product"
_SHARED_SUFFIX = "-SHARED"


def check(*, ctx: Context) -> Iterator[Finding]:
    """gpu-access-without-allocation, visible-devices-override, monitoring-consumes-gpu,
    stale-sharing-labels and dcgm-dra-attribution."""
    for w in ctx.workloads:
        if id(w) in ctx.plugin_workloads:
            # A device plugin reaches every card by design: it is the allocator.
            continue
        asks = _asks_for_gpu(ctx, w)
        if asks:
            yield from _visible_devices(ctx, w)
            if w.monitoring:
                yield from _monitoring(ctx, w)
        elif not w.monitoring:
            access = _gpu_access(w)
            if access is not None:
                src, line, how = access
                yield ctx.in_workload(
                    "gpu-access-without-allocation",
                    w,
                    source=src,
                    line=line,
                    msg=(
                        f"{w.kind} {w.name} reaches the GPU ({how}) without requesting one: the "
                        "scheduler does not count it, so it shares a card that is promised to "
                        "others"
                    ),
                )
        yield from _stale_labels(ctx, w)
    if ctx.dra_on:
        yield from _dcgm_attribution(ctx)


def _asks_for_gpu(ctx: Context, w: Workload) -> bool:
    if any(nvidia_requests(c) for c in w.pod.all_containers):
        return True
    return bool(w.pod.resource_claims)


def _gpu_access(w: Workload) -> tuple[Any, int, str] | None:
    pod = w.pod
    name = pod.runtime_class_name
    if name is not None and name.startswith("nvidia"):
        src, line = option_line(pod, "runtimeClassName")
        return src, line, f"runtimeClassName: {name}"
    for c in pod.all_containers:
        if c.env.get(VISIBLE_DEVICES) == "all":
            return c.source, _env_line(w, c), f"container {c.name} sets {VISIBLE_DEVICES}=all"
    if _on_gpu_nodes(pod):
        for c in pod.all_containers:
            if c.privileged:
                line = c.source.line_of(("securityContext", "privileged"))
                return c.source, line, f"container {c.name} is privileged on GPU nodes"
    return None


def _env_line(w: Workload, c: Container) -> int:
    """The line of NVIDIA_VISIBLE_DEVICES: maps in app-template, lists in manifests, and the
    dcgm-exporter chart's ``extraEnv``; the container's line when it cannot be found."""
    src = c.source
    same_doc = src.path == w.origin.source.path and src.doc == w.origin.source.doc
    data = body_at(w.origin, src.keys) if same_doc else None
    for field in ("env", "extraEnv"):
        env = data.get(field) if isinstance(data, Mapping) else None
        if isinstance(env, Mapping) and VISIBLE_DEVICES in env:
            return src.line_of((field, VISIBLE_DEVICES))
        if isinstance(env, list):
            for i, item in enumerate(env):
                if isinstance(item, Mapping) and item.get("name") == VISIBLE_DEVICES:
                    return src.line_of((field, i))
    return src.line_of(("env",))


def _visible_devices(ctx: Context, w: Workload) -> Iterator[Finding]:
    for c in w.pod.all_containers:
        if c.env.get(VISIBLE_DEVICES) != "all":
            continue
        yield ctx.in_workload(
            "visible-devices-override",
            w,
            source=c.source,
            line=_env_line(w, c),
            msg=(
                f"container {c.name} requests a GPU but sets {VISIBLE_DEVICES}=all, which "
                "exposes every GPU on the node instead of the one it was allocated"
            ),
        )


def _monitoring(ctx: Context, w: Workload) -> Iterator[Finding]:
    for c in w.pod.all_containers:
        for res, amount in nvidia_requests(c).items():
            yield ctx.in_workload(
                "monitoring-consumes-gpu",
                w,
                source=c.source,
                line=c.source.line_of(request_keys(c, res)),
                msg=(
                    f"the GPU metrics exporter {w.name} requests {res}: {amount}, taking a share "
                    "that a workload could use; exporters read every GPU without a request"
                ),
            )


def _node_terms(pod: PodSpec) -> Iterator[tuple[str, tuple[str, ...], str]]:
    """(label key, values, pod option) for nodeSelector and node-affinity expressions."""
    for key, value in pod.node_selector.items():
        yield str(key), (str(value),), "nodeSelector"
    node = pod.affinity.get("nodeAffinity")
    if not isinstance(node, Mapping):
        return
    terms: list[Any] = []
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, Mapping):
        terms.extend(required.get("nodeSelectorTerms") or [])
    for pref in node.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        if isinstance(pref, Mapping):
            terms.append(pref.get("preference"))
    for term in terms:
        if not isinstance(term, Mapping):
            continue
        for expr in term.get("matchExpressions") or []:
            if isinstance(expr, Mapping) and "key" in expr:
                values = tuple(str(v) for v in expr.get("values") or [])
                yield str(expr["key"]), values, "affinity"


def _on_gpu_nodes(pod: PodSpec) -> bool:
    """Whether the pod is steered to GPU nodes: GPU or NVIDIA PCI (10de) labels, or a
    toleration for the ``nvidia.com/gpu`` taint."""
    if any(key.startswith("nvidia.com/gpu") or "10de" in key for key, _, _ in _node_terms(pod)):
        return True
    tolerations = pod.options.get("tolerations")
    return isinstance(tolerations, list) and any(
        isinstance(t, Mapping) and str(t.get("key", "")).startswith("nvidia.com/gpu")
        for t in tolerations
    )


def _stale_labels(ctx: Context, w: Workload) -> Iterator[Finding]:
    for key, values, option in _node_terms(w.pod):
        stale = key in _STALE_KEYS or (
            key == _PRODUCT_KEY and any(v.endswith(_SHARED_SUFFIX) for v in values)
        )
        if not stale:
            continue
        src, line = option_line(w.pod, option)
        shown = f"{key}={values[0]}" if len(values) == 1 else key
        yield ctx.in_workload(
            "stale-sharing-labels",
            w,
            source=src,
            line=line,
            msg=(
                f"{w.kind} {w.name} selects nodes on {shown}, a GPU feature discovery label "
                "that describes device-plugin time-slicing; it goes stale (or disappears) once "
                "the device plugin leaves, and the pod then schedules wrongly or not at all"
            ),
        )


def _dcgm_attribution(ctx: Context) -> Iterator[Finding]:
    rbac = _grants_resourceslices(ctx)
    for op in ctx.operators:
        if not truthy(op.value("dcgmExporter", "enabled"), default=True):
            continue
        if truthy(op.value("gpuCluster", "deployCR"), default=False):
            continue  # the GPUCluster stack's exporter has the env and the RBAC
        if not truthy(op.value("clusterPolicy", "deployCR"), default=True):
            continue  # no ClusterPolicy, so no exporter of its own

        env = _env_list(op.value("dcgmExporter", "env"))
        yield from _attribution(
            ctx,
            op,
            has_env=truthy(env.get(DCGM_DRA_ENV), default=False),
            rbac=rbac,
            where=("dcgmExporter", "env"),
        )
    for w in ctx.workloads:
        if not w.monitoring or w.origin.kind != "HelmRelease":
            continue
        release = next((h for h in ctx.repo.helm_releases if h.obj is w.origin), None)
        if release is None or release.chart == "gpu-operator":
            continue
        if truthy(release.value("kubernetesDRA", "enabled"), default=False):
            continue  # the chart sets the env and widens its ClusterRole
        has_env = any(truthy(c.env.get(DCGM_DRA_ENV), default=False) for c in w.pod.containers)
        yield from _attribution(ctx, release, has_env=has_env, rbac=rbac, where=("extraEnv",))


def _attribution(
    ctx: Context, release: HelmRelease, *, has_env: bool, rbac: bool, where: tuple[str, ...]
) -> Iterator[Finding]:
    if has_env and rbac:
        return
    missing = []
    if not has_env:
        missing.append(f"{DCGM_DRA_ENV}=true")
    if not rbac:
        missing.append("RBAC get/list/watch on resource.k8s.io resourceslices")
    yield ctx.about(
        "dcgm-dra-attribution",
        release,
        line=release.line_of(*where),
        msg=(
            f"DRA allocates the GPUs but dcgm-exporter lacks {' and '.join(missing)}, so GPU "
            "metrics are not attributed to the pods and claims using them"
        ),
    )


def _env_list(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    out: dict[str, Any] = {}
    if isinstance(raw, list):
        for item in raw:
            if isinstance(item, Mapping) and "name" in item:
                out[str(item["name"])] = item.get("value")
    return out


def _grants_resourceslices(ctx: Context) -> bool:
    for o in ctx.repo.objects:
        if not o.active or o.kind not in ("ClusterRole", "Role"):
            continue
        for r in o.body.get("rules") or []:
            if not isinstance(r, Mapping):
                continue
            groups = r.get("apiGroups") or []
            resources = r.get("resources") or []
            if ("resource.k8s.io" in groups or "*" in groups) and (
                "resourceslices" in resources or "*" in resources
            ):
                return True
    return False
