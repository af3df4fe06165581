"""Planning ``--to gpucluster``: gpu-operator's ClusterPolicy (device plugin) stack becomes its
GPUCluster (DRA) stack, gpu-operator 26.7's technology preview.

NVIDIA supports the GPUCluster only on new installs ("Migrating an existing ClusterPolicy
deployment to GPUCluster in place is not supported"), so the pull request flips the two
``deployCR`` values and converts the consumers, and the notes say the switch is a full
teardown of the old stack, not a rolling change. A standalone device plugin has no operator to
turn; it is refused, as are trees whose driver root is not ``/``.

Consumers are converted exactly as ``--to dra`` converts them (the same functions).
"""

from __future__ import annotations

import posixpath
from typing import Any

from gpushift._errors import InputError
from gpushift.gitops import HelmRelease, Repo, Workload, summarize, truthy
from gpushift.migrate import _shapes
from gpushift.migrate._common import (
    Builder,
    Options,
    app_dir,
    flux_apps,
    flux_prefix,
    flux_source,
    gpucluster_at,
    inline_only,
    note_errors,
    plain_dict,
    set_value,
    under,
)
from gpushift.migrate._plan import Plan
from gpushift.migrate._to_dra import (
    KUBERNETES_VERSION,
    bridged_cannot_ask_for_memory,
    claim_templates,
    convert_consumer,
    dcgm_chart,
    health_check,
    old_stack,
    schema_lines,
    time_slicing,
)
from gpushift.rules import repo_preemption_hazards

_VALUES = ("spec", "values")
#: nicolerenee/infra#2394: the GPUCluster's DRA driver got no driverInstallDir.
DRIVER_ROOT_REASON = "the GPUCluster derives the driver root from the validator, which assumes /"
_KEPT_COMMENT = (
    "Kept by gpushift migrate --keep-old: nothing reads this once clusterPolicy.deployCR is "
    "false. Delete it after the switch."
)
_GREENFIELD = (
    'NVIDIA supports the GPUCluster only on new installs ("Migrating an existing ClusterPolicy '
    'deployment to GPUCluster in place is not supported"): plan the switch as a teardown of '
    "the ClusterPolicy stack, with GPU pods drained, before the GPUCluster comes up"
)


def refuse_non_root_driver(repo: Repo) -> None:
    """Raise InputError (file and line) when the driver is not at ``/``: a Talos tree, or a
    pre-installed driver gpu-operator or the device plugin is told lives elsewhere."""
    if repo.talos:
        ev = repo.talos[0]
        raise InputError(
            f"{ev.reason}: Talos installs the NVIDIA driver under /usr/local, and "
            f"{DRIVER_ROOT_REASON}; use --to dra, whose nvidiaDriverRoot can say where it is",
            path=ev.source.path,
            line=ev.source.line,
        )
    for hr in repo.releases("gpu-operator"):
        if truthy(hr.value("driver", "enabled"), default=True):
            continue  # the operator's driver container (NVIDIADriver) is not pre-installed
        root = hr.user_value("hostPaths", "driverInstallDir", default=None)
        if root is not None and str(root).rstrip("/") != "":
            raise InputError(
                f"the driver is pre-installed (driver.enabled: false) under {root} "
                f"(hostPaths.driverInstallDir), and {DRIVER_ROOT_REASON}; use --to dra",
                path=hr.source.path,
                line=hr.line_of("hostPaths", "driverInstallDir"),
            )
    for hr in repo.releases("nvidia-device-plugin"):
        root = hr.user_value("nvidiaDriverRoot", default=None)
        if root is not None and str(root).rstrip("/") != "":
            raise InputError(
                f"the driver is pre-installed under {root} (nvidiaDriverRoot), and "
                f"{DRIVER_ROOT_REASON}; use --to dra",
                path=hr.source.path,
                line=hr.line_of("nvidiaDriverRoot"),
            )


def plan_to_gpucluster(
    repo: Repo, texts: dict[str, str], files: frozenset[str], options: Options
) -> Plan:
    """The edits that move ``repo`` to gpu-operator's GPUCluster; empty when it is there.

    Raises InputError, naming file and line, for what it will not do: a driver root other
    than ``/`` (Talos included), a standalone device plugin or DRA chart (no operator to turn,
    or no documented move), two allocators at once, values from valuesFrom.
    """
    b = Builder("gpucluster", texts, files)
    summary = summarize(repo)
    if summary.allocator == "dra" and summary.dra_stack == "gpucluster":
        return b.plan()
    note_errors(b, repo)
    refuse_non_root_driver(repo)
    if summary.allocator == "none":
        raise InputError("no active NVIDIA device plugin to migrate from", path=".")
    if summary.dra_stack == "gpucluster":
        path, line = gpucluster_at(repo)
        raise InputError(
            "a GPUCluster is deployed next to a ClusterPolicy (gpucluster-clusterpolicy-conflict); "
            "finish or undo that by hand first",
            path=path,
            line=line,
        )
    if summary.allocator != "device-plugin":
        dra = repo.releases("dra-driver-nvidia-gpu")
        where = dra[0].source if dra else None
        raise InputError(
            "the DRA driver chart is already deployed; NVIDIA documents no move from it to the "
            "GPUCluster (only new installs), so gpushift does not make one",
            path=where.path if where else ".",
            line=where.line if where else None,
        )
    old = old_stack(repo)
    if old.chart != "gpu-operator":
        raise InputError(
            f"HelmRelease {old.name} is a standalone device plugin: the GPUCluster is "
            "gpu-operator's, and NVIDIA supports it only on a new install; use --to dra (the "
            "standalone DRA chart), or install gpu-operator 26.7 with a GPUCluster yourself",
            path=old.source.path,
            line=old.source.line,
        )
    ks = repo.kustomization(old.obj.kustomization)
    if ks is None:
        raise InputError(
            f"HelmRelease {old.name} is not deployed by a Flux Kustomization in this repository",
            path=old.source.path,
            line=old.source.line,
        )
    gpu_ns = old.target_namespace or ks.target_namespace or ks.namespace
    app = app_dir(ks)
    apps = posixpath.dirname(posixpath.dirname(app))
    prefix = flux_prefix(ks)
    fapps = flux_apps(prefix, apps)

    replicas = summary.sharing.replicas if summary.sharing.mode == "time-slicing" else None
    shares: Any = options.sharing
    if shares == "keep":
        shares = replicas if replicas else "exclusive"
    if shares == "memory":
        bridged_cannot_ask_for_memory(summary.consumers)

    _operator(b, repo, old, options=options, shares=shares, replicas=replicas)
    health_check(
        b,
        old,
        ks,
        gpu_ns=gpu_ns,
        reason="the claim templates' dependsOn then waits for the operator's release to be "
        "Ready with its GPUCluster, not only for its manifests to apply",
    )

    stays: list[str] = []
    converted: dict[str, list[Workload]] = {}
    for c in summary.consumers:
        if c.request != "extended":
            continue
        if convert_consumer(b, repo, c, old=old, template=options.template):
            assert c.namespace is not None
            converted.setdefault(c.namespace, []).append(c.workload)
        elif c.workload.origin_kind != "dcgm-exporter":
            stays.append(f"{c.namespace}/{c.name}")
    for w in repo.workloads:
        if w.active and w.origin_kind == "dcgm-exporter":
            dcgm_chart(b, w)

    namespaces = tuple(
        ns
        for ns in sorted(converted)
        if not any(
            cl.template and cl.name == options.template and cl.namespace == ns for cl in repo.claims
        )
    )
    layout = _shapes.Layout(
        apps=fapps,
        gpu_namespace=gpu_ns,
        talos=False,
        preinstalled_driver=not truthy(old.value("driver", "enabled"), default=True),
        source=flux_source(ks),
        flux_namespace=ks.namespace if ks.namespace and ks.namespace != gpu_ns else None,
    )
    templates, bridge = _shapes.gpucluster_files(
        layout,
        sharing=shares,
        namespaces=namespaces,
        template=options.template,
        memory_per_claim=options.memory_per_claim,
    )
    schemas = schema_lines(b, [ks.source.path, *under(files, ks.directory or app + "/app")])
    for ns in namespaces:
        rendered = dict(templates[ns])
        # The templates wait for the repository's own gpu-operator Kustomization.
        own_ns = _shapes.claim_templates_ref(layout, ns)[1]
        rendered["ks.yaml"] = _shapes.depending_on(
            rendered["ks.yaml"],
            name=ks.name,
            namespace=None if ks.namespace == own_ns else ks.namespace,
        )
        claim_templates(
            b,
            repo,
            ns,
            converted[ns],
            rendered,
            apps=apps,
            fapps=fapps,
            prefix=prefix,
            schemas=schemas,
            layout=layout,
        )
    if stays:
        _bridge(b, repo, ks.directory, bridge, stays)

    for hazard in repo_preemption_hazards(repo):
        b.note(f"dra-preemption-lost: {hazard.message(KUBERNETES_VERSION)}")
    _notes(b, repo, old)
    return b.plan()


def _operator(
    b: Builder,
    repo: Repo,
    hr: HelmRelease,
    *,
    options: Options,
    shares: Any,
    replicas: int | None,
) -> None:
    file, doc = hr.source.path, hr.source.doc
    set_value(
        b,
        hr,
        ("clusterPolicy", "deployCR"),
        False,
        reason="the ClusterPolicy and the GPUCluster exclude each other; the chart refuses both",
    )
    set_value(
        b,
        hr,
        ("gpuCluster", "deployCR"),
        True,
        reason="the operator's GPUCluster runs the DRA driver and hands out the GPUs",
    )
    if not options.keep_old and hr.is_set("devicePlugin", "config"):
        inline_only(hr, ("devicePlugin", "config"))
        b.edit(
            file,
            doc,
            (*_VALUES, "devicePlugin", "config"),
            "delete",
            old=plain_dict(hr.user_value("devicePlugin", "config")),
            reason="the time-slicing config goes with the ClusterPolicy's device plugin",
        )
        time_slicing(b, repo, hr)
    elif options.keep_old:
        time_slicing(b, repo, hr, keep=True, kept=_KEPT_COMMENT)
    if truthy(hr.value("driver", "enabled"), default=True) and not truthy(
        hr.value("driver", "nvidiaDriverCRD", "enabled"), default=False
    ):
        set_value(
            b,
            hr,
            ("driver", "nvidiaDriverCRD", "enabled"),
            True,
            reason="the chart's validation fails a GPUCluster with driver.enabled but without "
            "the NVIDIADriver CRD, which then manages the driver",
        )
        b.note(
            f"{file}:{hr.line_of('driver')}: the operator-installed driver moves from the "
            "ClusterPolicy to an NVIDIADriver CR (driver.nvidiaDriverCRD); check its driver "
            "version and node selector before merging"
        )
    if shares == "exclusive":
        return
    # gpu-operator v26.7.0: no consumableShares value; the gate and the plugin's env instead.
    set_value(
        b,
        hr,
        ("draDriver", "featureGates", "ConsumableShares"),
        True,
        reason="CONSUMABLE_SHARES needs the gate; without it the kubelet plugin exits at start",
    )
    env = hr.value("draDriver", "gpus", "kubeletPlugin", "env")
    if env is not None and not isinstance(env, list):
        raise InputError(
            "draDriver.gpus.kubeletPlugin.env is not a list",
            path=file,
            line=hr.line_of("draDriver", "gpus", "kubeletPlugin", "env"),
        )
    if any(isinstance(e, dict) and e.get("name") == "CONSUMABLE_SHARES" for e in env or []):
        raise InputError(
            "CONSUMABLE_SHARES is already set; gpushift does not replace it",
            path=file,
            line=hr.line_of("draDriver", "gpus", "kubeletPlugin", "env"),
        )
    inline_only(hr, ("draDriver", "gpus", "kubeletPlugin", "env"))
    if isinstance(shares, int):
        why = f"each GPU takes {shares} claims"
        if shares == replicas:
            why += f", as time-slicing replicas: {shares} did"
    else:
        why = f"consumable shares: {shares}"
    b.edit(
        file,
        doc,
        (*_VALUES, "draDriver", "gpus", "kubeletPlugin", "env"),
        "append",
        new={"name": "CONSUMABLE_SHARES", "value": str(shares)},
        reason=why,
    )


def _bridge(b: Builder, repo: Repo, directory: str | None, text: str, stays: list[str]) -> None:
    """A DeviceClass that maps nvidia.com/gpu, for the consumers that keep asking for it."""
    names = ", ".join(stays)
    if any(c.active and c.extended_resource_name == "nvidia.com/gpu" for c in repo.device_classes):
        return
    if directory is None:
        b.note(
            f"{names} stay on nvidia.com/gpu, which the GPUCluster's gpu.nvidia.com class does "
            "not map: add a DeviceClass with extendedResourceName: nvidia.com/gpu"
        )
        return
    target = f"{directory}/{_shapes.BRIDGE_CLASS_FILE}"
    b.add_file(
        target,
        text,
        f"the GPUCluster's gpu.nvidia.com class maps no extended resource, and nvidia.com/gpu "
        f"is still asked for by {names}",
    )
    kfile = f"{directory}/kustomization.yaml"
    if b.docs(kfile):
        b.edit(
            kfile,
            0,
            ("resources",),
            "append",
            new=f"./{_shapes.BRIDGE_CLASS_FILE}",
            reason="apply the DeviceClass that bridges nvidia.com/gpu",
        )
    else:
        b.note(f"{target}: list it in the kustomization of {directory}/")


def _notes(b: Builder, repo: Repo, hr: HelmRelease) -> None:
    version = hr.chart_version or ""
    nums = [int(n) for n in version.lstrip("v").split("-")[0].split(".")[:2] if n.isdigit()]
    if len(nums) == 2 and tuple(nums) < (26, 7):
        b.note(
            f"{hr.source.path}:{hr.source.line}: gpu-operator {version} has no GPUCluster; "
            "bump the chart (and its source's tag) to 26.7.0 or later"
        )
    named = sorted(
        f"{c.namespace}/{c.name}"
        for c in summarize(repo).consumers
        if c.request == "extended" and c.workload.pod.runtime_class_name
    )
    if named:
        b.note(
            f"{', '.join(named)} name a runtimeClassName; the GPUCluster runs no container "
            "toolkit, so that runtime handler must come from the host, or drop it (the DRA "
            "driver injects the GPU through CDI)"
        )
    b.note(_GREENFIELD)
