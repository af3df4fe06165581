"""Planning ``--to device-plugin``: the reverse commit of ``--to dra``.

The result is what the repository was before ``--to dra``, up to the files that migration added
or deleted: the DRA driver app and the claim-template apps go; consumers ask for
``nvidia.com/gpu`` again; gpu-operator's device plugin comes back with a time-slicing config of
N replicas (the DRA driver's consumable shares), or a standalone device plugin app returns
(the one kept by ``--keep-old``, else a fresh one in render's shape).

From gpu-operator's GPUCluster the operator turns its ClusterPolicy back on instead: the two
``deployCR`` values flip, its device plugin gets the time-slicing config, and the consumable
shares it gave the GPUCluster's kubelet plugin go.
"""

from __future__ import annotations

import posixpath
from typing import Any

from gpushift._errors import InputError
from gpushift.gitops import (
    GPU_RESOURCE,
    Consumer,
    FluxKustomization,
    HelmRelease,
    Repo,
    Summary,
    Workload,
    gpu_clusters,
    summarize,
    truthy,
)
from gpushift.migrate import _shapes
from gpushift.migrate._common import (
    Builder,
    Options,
    app_dir,
    flux_apps,
    flux_prefix,
    flux_source,
    inline_only,
    kustomization_dependents,
    note_errors,
    plain_dict,
    release_dependents,
    retarget_dependents,
    runtime_classes_in,
    set_value,
    under,
)
from gpushift.migrate._plan import ABSENT, Plan

_VALUES = ("spec", "values")
_TS_NAME = "time-slicing-config"
_TS_KEY = "any"


def plan_to_device_plugin(
    repo: Repo, texts: dict[str, str], files: frozenset[str], options: Options
) -> Plan:
    """The edits that move ``repo`` back to the device plugin; empty when it is already there.

    Raises InputError, naming file and line, for what it will not edit: both
    allocators active, more than one DRA release, sharing the device plugin cannot express.
    """
    b = Builder("device-plugin", texts, files)
    summary = summarize(repo)
    if summary.allocator == "device-plugin":
        return b.plan()
    note_errors(b, repo)
    if summary.allocator == "none":
        raise InputError("no active NVIDIA GPU allocator to migrate from", path=".")
    if summary.allocator == "both":
        raise InputError(
            "both allocators are already active; finish or undo that migration by hand first",
            path=".",
        )
    if summary.dra_stack == "gpucluster":
        _from_gpucluster(b, repo, summary, options)
        return b.plan()
    dras = [
        hr
        for hr in repo.releases("dra-driver-nvidia-gpu")
        if truthy(hr.value("resources", "gpus", "enabled"), default=True)
    ]
    if len(dras) != 1:
        raise InputError(
            "gpushift moves back from exactly one dra-driver-nvidia-gpu release "
            f"(found {len(dras)})",
            path=".",
        )
    dra = dras[0]
    ks = repo.kustomization(dra.obj.kustomization)
    if ks is None:
        raise InputError(
            f"HelmRelease {dra.name} is not deployed by a Flux Kustomization in this repository",
            path=dra.source.path,
            line=dra.source.line,
        )
    replicas = _replicas(
        summary.sharing.mode,
        summary.sharing.replicas,
        options,
        dra,
        line=dra.line_of("consumableShares"),
    )
    dra_dir = app_dir(ks)
    ns_dir = posixpath.dirname(dra_dir)
    prefix = flux_prefix(ks)
    apps = flux_apps(prefix, posixpath.dirname(ns_dir))
    gpu_ns = dra.target_namespace or ks.target_namespace or ks.namespace

    moved = _runtime_class_files(b, repo, dra_dir)
    b.unlist(ks.source.path, reason="the DRA driver is taken out")
    for f in [ks.source.path, *under(files, dra_dir)]:
        b.remove_file(f, "the DRA driver app goes")

    operators = repo.releases("gpu-operator")
    if operators:
        _operator(b, repo, operators[0], replicas=replicas, gpu_ns=gpu_ns, layout_apps=apps)
        plugin_release, plugin_ks = operators[0].name, None
    else:
        plugin_release, plugin_ks = _standalone(
            b,
            repo,
            ns_dir=ns_dir,
            apps=apps,
            prefix=prefix,
            gpu_ns=gpu_ns,
            replicas=replicas,
            moved=moved,
            source=flux_source(ks),
        )
        _redirect(b, repo, dra, ks, release=plugin_release, kustomization=plugin_ks)

    _consumers_and_templates(b, repo, summary, options)
    return b.plan()


def _consumers_and_templates(b: Builder, repo: Repo, summary: Summary, options: Options) -> None:
    """Consumers ask for nvidia.com/gpu again; the claim-template apps go."""
    for c in summary.consumers:
        _consumer(b, repo, c, template=options.template)
    for claim in repo.claims:
        if not (claim.template and claim.active and claim.name == options.template):
            continue
        cks = repo.kustomization(claim.obj.kustomization)
        folder = app_dir(cks) if cks is not None else ""
        if cks is None or posixpath.basename(folder) != _shapes.CLAIM_TEMPLATES_APP:
            b.note(
                f"{claim.obj.source.path}:{claim.obj.source.line}: ResourceClaimTemplate "
                f"{claim.name} is not in a {_shapes.CLAIM_TEMPLATES_APP} app; left as it is"
            )
            continue
        b.unlist(cks.source.path, reason="the claim template goes")
        _drop_dependents(b, repo, cks)
        for f in [cks.source.path, *under(b.files, folder)]:
            b.remove_file(f, "the claim template goes with DRA")


def _from_gpucluster(b: Builder, repo: Repo, summary: Summary, options: Options) -> None:
    """gpu-operator's GPUCluster back to its ClusterPolicy and device plugin."""
    found = gpu_clusters(repo)
    releases = [x for x in found if isinstance(x, HelmRelease)]
    if len(releases) != 1:
        where = found[0].source
        raise InputError(
            "gpushift moves back from one gpu-operator release with gpuCluster.deployCR "
            f"(found {len(releases)}); a GPUCluster applied as an object is edited by hand",
            path=where.path,
            line=where.line,
        )
    hr = releases[0]
    ks = repo.kustomization(hr.obj.kustomization)
    if ks is None:
        raise InputError(
            f"HelmRelease {hr.name} is not deployed by a Flux Kustomization in this repository",
            path=hr.source.path,
            line=hr.source.line,
        )
    env_line = hr.line_of("draDriver", "gpus", "kubeletPlugin", "env")
    replicas = _replicas(summary.sharing.mode, summary.sharing.replicas, options, hr, line=env_line)
    gpu_ns = hr.target_namespace or ks.target_namespace or ks.namespace
    apps = flux_apps(flux_prefix(ks), posixpath.dirname(posixpath.dirname(app_dir(ks))))
    file = hr.source.path
    set_value(
        b,
        hr,
        ("gpuCluster", "deployCR"),
        False,
        reason="the GPUCluster and the ClusterPolicy exclude each other",
    )
    set_value(
        b,
        hr,
        ("clusterPolicy", "deployCR"),
        True,
        reason="the ClusterPolicy runs the device plugin",
    )
    if not options.keep_old:
        _drop_operator_shares(b, hr)
    _operator(b, repo, hr, replicas=replicas, gpu_ns=gpu_ns, layout_apps=apps)
    if ks.directory is not None:
        bridge = f"{ks.directory}/{_shapes.BRIDGE_CLASS_FILE}"
        if bridge in b.files:
            b.remove_file(bridge, "the device plugin advertises nvidia.com/gpu itself")
            b.unlist(bridge, reason="the bridging DeviceClass goes")
    if truthy(hr.value("driver", "nvidiaDriverCRD", "enabled"), default=False):
        b.note(
            f"{file}:{hr.line_of('driver', 'nvidiaDriverCRD', 'enabled')}: "
            "driver.nvidiaDriverCRD stays on; decide whether the driver stays with its "
            "NVIDIADriver CR under the ClusterPolicy"
        )
    for obj in found:
        if not isinstance(obj, HelmRelease):
            b.note(
                f"{obj.source.path}:{obj.source.line}: a GPUCluster object is still applied; "
                "delete it, it excludes the ClusterPolicy"
            )
    b.note(
        "the switch tears the GPUCluster's DRA stack down before the ClusterPolicy's device "
        "plugin comes up: drain GPU pods first"
    )
    _consumers_and_templates(b, repo, summary, options)


def _drop_operator_shares(b: Builder, hr: HelmRelease) -> None:
    """The consumable shares given to the GPUCluster's kubelet plugin (gate and env)."""
    file, doc = hr.source.path, hr.source.doc
    if hr.is_set("draDriver", "featureGates", "ConsumableShares"):
        inline_only(hr, ("draDriver", "featureGates", "ConsumableShares"))
        b.edit(
            file,
            doc,
            (*_VALUES, "draDriver", "featureGates", "ConsumableShares"),
            "delete",
            old=hr.user_value("draDriver", "featureGates", "ConsumableShares"),
            reason="no GPUCluster kubelet plugin reads it",
            prune=2,
        )
    env = hr.user_value("draDriver", "gpus", "kubeletPlugin", "env")
    if not isinstance(env, list):
        return
    ours = [e for e in env if isinstance(e, dict) and e.get("name") == "CONSUMABLE_SHARES"]
    for entry in ours:
        inline_only(hr, ("draDriver", "gpus", "kubeletPlugin", "env"))
        keys = (*_VALUES, "draDriver", "gpus", "kubeletPlugin", "env")
        if len(env) == 1:
            b.edit(file, doc, keys, "delete", old=plain_dict(env), reason=_NO_SHARES, prune=3)
        else:
            b.edit(file, doc, keys, "remove", old=plain_dict(entry), reason=_NO_SHARES)


_NO_SHARES = "no GPUCluster kubelet plugin reads CONSUMABLE_SHARES"


def _replicas(
    mode: str, replicas: int | None, options: Options, dra: HelmRelease, *, line: int
) -> int | None:
    if isinstance(options.sharing, int):
        return options.sharing
    if options.sharing != "keep":
        raise InputError(f"--sharing {options.sharing}: the device plugin shares only by N")
    if mode == "consumable-shares":
        if replicas is not None and replicas < 2:
            return None
        return replicas
    if mode in ("memory", "unlimited"):
        raise InputError(
            f"consumableShares is {mode}; time-slicing needs a replica count: pass --sharing N",
            path=dra.source.path,
            line=line,
        )
    return None


def _runtime_class_files(b: Builder, repo: Repo, directory: str) -> dict[str, str]:
    return {
        posixpath.basename(rc.source.path): b.texts[rc.source.path]
        for rc in runtime_classes_in(repo, directory)
    }


def _operator(
    b: Builder, repo: Repo, hr: HelmRelease, *, replicas: int | None, gpu_ns: str, layout_apps: str
) -> None:
    file, doc = hr.source.path, hr.source.doc
    inline_only(hr, ("devicePlugin", "enabled"))
    if hr.user_value("devicePlugin", "enabled", default=ABSENT) is not True:
        b.edit(
            file,
            doc,
            (*_VALUES, "devicePlugin", "enabled"),
            "set",
            old=hr.user_value("devicePlugin", "enabled", default=ABSENT),
            new=True,
            reason="the device plugin hands out the GPUs again",
        )
    ks = repo.kustomization(hr.obj.kustomization)
    directory = ks.directory if ks is not None else None
    has_config = any(p.owner is hr and p.selected is not None for p in repo.device_plugin_configs)
    if replicas is not None and not has_config:
        if directory is None:
            raise InputError(
                "the operator's app folder is not in this repository; cannot add its "
                "time-slicing config",
                path=file,
            )
        target = f"{directory}/{_shapes.TIME_SLICING_FILE}"
        layout = _shapes.Layout(
            apps=layout_apps,
            gpu_namespace=gpu_ns,
            talos=bool(repo.talos),
            preinstalled_driver=True,
            source=("GitRepository", "flux-system", "flux-system"),
        )
        _, config = _shapes.device_plugin_files(layout, replicas=replicas)
        b.add_file(target, config, f"time-slicing: {replicas} replicas per GPU")
        kfile = f"{directory}/kustomization.yaml"
        if b.docs(kfile):
            b.edit(
                kfile,
                0,
                ("resources",),
                "append",
                new=f"./{_shapes.TIME_SLICING_FILE}",
                reason="apply the time-slicing config",
            )
        else:
            b.note(f"{target}: list it in the kustomization of {directory}/")
        inline_only(hr, ("devicePlugin", "config"))
        b.edit(
            file,
            doc,
            (*_VALUES, "devicePlugin", "config"),
            "set",
            old=plain_dict(hr.user_value("devicePlugin", "config", default=ABSENT))
            if hr.is_set("devicePlugin", "config")
            else ABSENT,
            new={"name": _TS_NAME, "default": _TS_KEY},
            reason=f"the device plugin shares each GPU {replicas} ways",
        )
    env = hr.user_value("dcgmExporter", "env")
    if isinstance(env, list):
        ours = [e for e in env if isinstance(e, dict) and e.get("name") == "KUBERNETES_ENABLE_DRA"]
        for entry in ours:
            if len(env) == 1:
                b.edit(
                    file,
                    doc,
                    (*_VALUES, "dcgmExporter", "env"),
                    "delete",
                    old=plain_dict(env),
                    reason="no claims to attribute metrics to",
                )
            else:
                b.edit(
                    file,
                    doc,
                    (*_VALUES, "dcgmExporter", "env"),
                    "remove",
                    old=plain_dict(entry),
                    reason="no claims to attribute metrics to",
                )
    if directory is not None:
        rbac = f"{directory}/{_shapes.DCGM_RBAC_FILE}"
        if rbac in b.files:
            b.remove_file(rbac, "dcgm-exporter needs no ResourceSlice access without DRA")
            b.unlist(rbac, reason="the dcgm-exporter DRA RBAC goes")


def _standalone(
    b: Builder,
    repo: Repo,
    *,
    ns_dir: str,
    apps: str,
    prefix: str,
    gpu_ns: str,
    replicas: int | None,
    moved: dict[str, str],
    source: tuple[str, str, str],
) -> tuple[str, str]:
    """Bring back the standalone device plugin; returns its release and Kustomization names."""
    kept = [hr for hr in repo.releases("nvidia-device-plugin", active=False) if not hr.obj.active]
    for hr in kept:
        kks = repo.kustomization(hr.obj.kustomization)
        if kks is not None and b.listing(kks.source.path) is None:
            b.list_in_parent(kks.source.path, reason="the device plugin kept by --keep-old returns")
            return hr.name, kks.name
    # Kept but not found through a Kustomization: look for its ks.yaml by folder.
    for ks in repo.kustomizations:
        if ks.active:
            continue
        hrs = [h for h in repo.helm_releases if h.obj.kustomization == ks.ref]
        if any(h.chart == "nvidia-device-plugin" for h in hrs):
            b.list_in_parent(ks.source.path, reason="the device plugin kept by --keep-old returns")
            return next(h.name for h in hrs if h.chart == "nvidia-device-plugin"), ks.name
    layout = _shapes.Layout(
        apps=apps,
        gpu_namespace=gpu_ns,
        talos=bool(repo.talos),
        preinstalled_driver=True,
        source=source,
    )
    plugin, _ = _shapes.device_plugin_files(layout, replicas=replicas or 1)
    target = f"{ns_dir}/{_shapes.DEVICE_PLUGIN_APP}"
    rendered = f"./{apps}/{gpu_ns}/{_shapes.DEVICE_PLUGIN_APP}/app"
    for rel, text in sorted(plugin.items()):
        if rel == "ks.yaml":
            text = text.replace(f"path: {rendered}\n", f"path: ./{prefix}{target}/app\n")
        if moved and rel == "app/runtimeclass.yaml":
            continue
        if moved and rel == "app/kustomization.yaml":
            text = text.replace("  - ./runtimeclass.yaml\n", "")
            text += "".join(f"  - ./{name}\n" for name in moved)
        b.add_file(f"{target}/{rel}", text, "the standalone device plugin app")
    for name, text in moved.items():
        b.add_file(f"{target}/app/{name}", text, "the RuntimeClass GPU pods use")
    b.list_in_parent(f"{target}/ks.yaml", reason="deploy the device plugin")
    return _shapes.DEVICE_PLUGIN_APP, _shapes.DEVICE_PLUGIN_APP


def _drop_dependents(b: Builder, repo: Repo, gone: FluxKustomization) -> None:
    """Kustomizations that wait for a deleted claim-template app stop waiting for it."""
    for other in repo.kustomizations:
        spec = other.obj.body.get("spec")
        deps = spec.get("dependsOn") if isinstance(spec, dict) else None
        if not isinstance(deps, list):
            continue
        for i, kdep in enumerate(other.depends_on):
            if (kdep.name, kdep.namespace) != (gone.name, gone.namespace):
                continue
            if len(deps) == 1:
                b.edit(
                    other.source.path,
                    other.source.doc,
                    ("spec", "dependsOn"),
                    "delete",
                    old=plain_dict(deps),
                    reason="the claim template it waited for is gone",
                )
            else:
                b.edit(
                    other.source.path,
                    other.source.doc,
                    ("spec", "dependsOn"),
                    "remove",
                    old=plain_dict(deps[i]),
                    reason="the claim template it waited for is gone",
                )


def _redirect(
    b: Builder,
    repo: Repo,
    dra: HelmRelease,
    ks: FluxKustomization,
    *,
    release: str,
    kustomization: str | None,
) -> None:
    """What waited for the DRA driver waits for the device plugin again."""
    retarget_dependents(
        b,
        release_dependents(repo, dra),
        old=dra.name,
        new=release,
        reason="the DRA driver release it waited for is gone",
    )
    if kustomization is None:
        return
    retarget_dependents(
        b,
        (
            (other_ks, i)
            for other_ks, i in kustomization_dependents(repo, ks)
            if other_ks is not ks
            and posixpath.basename(app_dir(other_ks)) != _shapes.CLAIM_TEMPLATES_APP
        ),
        old=ks.name,
        new=kustomization,
        reason="the DRA driver Kustomization it waited for is gone",
    )


def _consumer(b: Builder, repo: Repo, c: Consumer, *, template: str) -> None:
    w = c.workload
    if w.origin_kind == "dcgm-exporter":
        hr = next(h for h in repo.helm_releases if h.obj is w.origin)
        if hr.is_set("kubernetesDRA", "enabled"):
            b.edit(
                hr.source.path,
                hr.source.doc,
                (*_VALUES, "kubernetesDRA", "enabled"),
                "delete",
                old=hr.user_value("kubernetesDRA", "enabled"),
                reason="no claims to attribute metrics to",
                prune=1,
            )
        return
    if c.request != "claim":
        return
    ours = [pc for pc in w.pod.resource_claims if pc.template == template]
    if len(ours) != 1 or len(w.pod.resource_claims) != 1:
        b.note(
            f"{w.source.path}:{w.source.line}: {w.kind} {c.namespace}/{c.name} uses other "
            "claims; convert it by hand"
        )
        return
    claim = ours[0].name
    users = [ct for ct in w.pod.all_containers if claim in ct.claims]
    if any(ct.claims != (claim,) for ct in users):
        b.note(
            f"{w.source.path}:{w.source.line}: {w.kind} {c.namespace}/{c.name}: a container "
            "uses several claims; convert it by hand"
        )
        return
    if w.origin_kind == "app-template":
        src = w.pod.option_source("resourceClaims")
        hr = next(h for h in repo.helm_releases if h.obj is w.origin)
        inline_only(hr, tuple(str(k) for k in src.keys[2:]))
        written: list[Any] = list(w.pod.options.get("resourceClaims") or [])
    elif w.origin_kind == "manifest":
        src = w.pod.source.child(("resourceClaims",))
        spec: Any = w.origin.body
        for k in w.pod.source.keys:
            spec = spec[k]
        written = list(spec.get("resourceClaims") or [])
    else:
        b.note(f"{w.source.path}:{w.source.line}: gpushift does not know how to edit this consumer")
        return
    if len(written) == 1:
        b.edit(
            src.path,
            src.doc,
            src.keys,
            "delete",
            old=plain_dict(written),
            reason="the device plugin's nvidia.com/gpu replaces the claim",
            prune=1 if src.keys[-2:-1] == ("pod",) else 0,
        )
    else:
        index = next(i for i, e in enumerate(written) if e.get("name") == claim)
        b.edit(
            src.path,
            src.doc,
            src.keys,
            "remove",
            old=plain_dict(written[index]),
            reason="the device plugin's nvidia.com/gpu replaces the claim",
        )
    for ct in users:
        _container(b, ct, w)


def _container(b: Builder, ct: Any, w: Workload) -> None:
    src = ct.source
    for part in ("requests", "limits"):
        got = ct.resources.get(part)
        if part == "requests" and not isinstance(got, dict):
            continue
        b.edit(
            src.path,
            src.doc,
            (*src.keys, "resources", part, GPU_RESOURCE),
            "set",
            new=1,
            reason="one time-sliced replica, as the claim took one share",
        )
    claims = ct.resources.get("claims")
    b.edit(
        src.path,
        src.doc,
        (*src.keys, "resources", "claims"),
        "delete",
        old=plain_dict(claims),
        reason="the container no longer uses a claim",
    )
