"""Planning ``--to dra``: the pull request that moves a repository from the device plugin's
time-slicing to the DRA driver with consumable shares.

Pure: it reads the GitOps model and the repository's YAML texts and returns a ``Plan``.
"""

from __future__ import annotations

import posixpath
from typing import Any

from gpushift._errors import InputError
from gpushift.gitops import (
    GPU_RESOURCE,
    NVIDIA_PREFIX,
    Consumer,
    Container,
    FluxKustomization,
    HelmRelease,
    Repo,
    Source,
    Workload,
    app_template_major,
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
    gpucluster_at,
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
from gpushift.migrate._plan import Plan
from gpushift.rules import (
    DEFAULT_KUBERNETES_VERSION,
    driver_location,
    parse_kubernetes_version,
    repo_preemption_hazards,
)

CLAIM_NAME = "gpu"
TALOS_DRIVER_ROOT = "/usr/local"
#: The operator's default hostPaths.driverInstallDir.
OPERATOR_DRIVER_DIR = "/run/nvidia/driver"
HELMRELEASE_API = "helm.toolkit.fluxcd.io/v2"
_VALUES = ("spec", "values")
_KEPT_COMMENT = (
    "Kept by gpushift migrate --keep-old: nothing reads this once devicePlugin.enabled is "
    "false. Delete it after the switch."
)


KUBERNETES_VERSION = parse_kubernetes_version(DEFAULT_KUBERNETES_VERSION)


def plan_to_dra(repo: Repo, texts: dict[str, str], files: frozenset[str], options: Options) -> Plan:
    """The edits that move ``repo`` to DRA; an empty plan when it is already there.

    Raises InputError, naming file and line, for anything it will not edit:
    two allocators at once, more than one device plugin, values that come from valuesFrom.
    """
    b = Builder("dra", texts, files)
    summary = summarize(repo)
    if summary.allocator == "dra" and summary.dra_stack == "gpucluster":
        path, line = gpucluster_at(repo)
        raise InputError(
            "gpu-operator's GPUCluster already runs DRA; NVIDIA documents no move from it to "
            "the standalone DRA chart (migrate --to device-plugin first)",
            path=path,
            line=line,
        )
    if summary.allocator == "dra":
        return b.plan()
    note_errors(b, repo)
    if summary.allocator == "none":
        raise InputError("no active NVIDIA device plugin to migrate from", path=".")
    if summary.allocator == "both" and summary.dra_stack == "gpucluster":
        path, line = gpucluster_at(repo)
        raise InputError(
            "a GPUCluster is deployed next to a ClusterPolicy (gpucluster-clusterpolicy-conflict); "
            "finish or undo that by hand first",
            path=path,
            line=line,
        )
    if summary.allocator == "both":
        dra = repo.releases("dra-driver-nvidia-gpu")
        where = dra[0].source if dra else None
        raise InputError(
            "both allocators are already active; finish or undo that migration by hand first",
            path=where.path if where else ".",
            line=where.line if where else None,
        )
    old = old_stack(repo, allow_standalone_beside=True)
    ks = repo.kustomization(old.obj.kustomization)
    if ks is None:
        raise InputError(
            f"HelmRelease {old.name} is not deployed by a Flux Kustomization in this repository",
            path=old.source.path,
            line=old.source.line,
        )
    operator = old.chart == "gpu-operator"
    app = app_dir(ks)
    ns_dir = posixpath.dirname(app)
    apps = posixpath.dirname(ns_dir)
    prefix = flux_prefix(ks)
    fapps = flux_apps(prefix, apps)
    gpu_ns = old.target_namespace or ks.target_namespace or ks.namespace
    dra_dir = f"{ns_dir}/{_shapes.DRA_APP}"
    if under(files, dra_dir):
        raise InputError("the DRA driver's folder already exists", path=dra_dir)
    for hr in repo.releases("dra-driver-nvidia-gpu", active=False):
        b.note(
            f"{hr.source.path}:{hr.source.line}: an inactive DRA driver release "
            f"{hr.name} is left as it is; delete it, {dra_dir}/ replaces it"
        )

    chart = old.obj.body.get("spec", {}).get("chart")
    if isinstance(chart, dict):
        b.note(
            f"{old.source.path}:{old.source.line}: {old.name} comes from a HelmRepository; the "
            "DRA driver's chart is published only as an OCI artifact (registry.k8s.io), so it "
            "gets an OCIRepository"
        )
    replicas = summary.sharing.replicas if summary.sharing.mode == "time-slicing" else None
    shares: Any = options.sharing
    if shares == "keep":
        shares = replicas if replicas else "exclusive"
    source = flux_source(ks)
    layout = _shapes.Layout(
        apps=fapps,
        gpu_namespace=gpu_ns,
        talos=bool(repo.talos),
        preinstalled_driver=not truthy(old.value("driver", "enabled"), default=True)
        if operator
        else True,
        source=source,
        driver_root=_driver_root(repo, old),
        # A tree that keeps its Kustomizations in flux-system (and patches them all there with
        # its substitutions) gets the new ones there too, not in the apps' namespaces.
        flux_namespace=ks.namespace if ks.namespace and ks.namespace != gpu_ns else None,
    )

    consumers = [c for c in summary.consumers if c.request == "extended"]
    converted: dict[str, list[Workload]] = {}
    for c in consumers:
        if convert_consumer(b, repo, c, old=old, template=options.template):
            assert c.namespace is not None
            converted.setdefault(c.namespace, []).append(c.workload)

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
    if shares == "memory":
        bridged_cannot_ask_for_memory(summary.consumers)
    driver, templates, rbac = _shapes.dra_files(
        layout,
        sharing=shares,
        namespaces=namespaces,
        template=options.template,
        memory_per_claim=options.memory_per_claim,
    )

    # The DRA driver app, next to the old stack, in the same namespace, with the schema lines
    # the old stack's files of the same name carry.
    schemas = schema_lines(b, [ks.source.path, *under(files, ks.directory or app + "/app")])
    moved = {} if operator else _runtime_classes(b, repo, ks)
    rendered_path = f"./{fapps}/{gpu_ns}/{_shapes.DRA_APP}/app"
    driver_ks_ns = layout.flux_namespace or gpu_ns
    for rel, text in sorted(driver.items()):
        if rel == "ks.yaml":
            text = text.replace(f"path: {rendered_path}\n", f"path: ./{prefix}{dra_dir}/app\n")
            if not operator:
                text = _shapes.without_depends_on(text)
            elif ks.name != _shapes.OPERATOR_APP or ks.namespace != driver_ks_ns:
                # It waits for the repository's own gpu-operator Kustomization, by its name.
                text = _shapes.depending_on(
                    text,
                    name=ks.name,
                    namespace=None if ks.namespace == driver_ks_ns else ks.namespace,
                )
        if rel == "app/kustomization.yaml":
            text += "".join(f"  - ./{name}\n" for name in moved)
        b.add_file(f"{dra_dir}/{rel}", _with_schema(text, rel, schemas), "the DRA driver app")
    for name, text in moved.items():
        b.add_file(
            f"{dra_dir}/app/{name}",
            text,
            "the RuntimeClass GPU pods use, moved from the device plugin app",
        )
    b.list_beside(f"{dra_dir}/ks.yaml", ks.source.path, reason="deploy the DRA driver")
    if operator:
        _operator(b, repo, old, ks, options=options, gpu_ns=gpu_ns, rbac=rbac)
    else:
        _standalone(b, repo, old, ks, options=options)
    for extra in standalone_beside(repo, old):
        # A second device plugin on the same cards (check's dual-device-plugin): it goes too,
        # or it would keep advertising nvidia.com/gpu beside the DRA driver.
        extra_ks = repo.kustomization(extra.obj.kustomization)
        if extra_ks is None:
            raise InputError(
                f"HelmRelease {extra.name} is not deployed by a Flux Kustomization in this "
                "repository",
                path=extra.source.path,
                line=extra.source.line,
            )
        _standalone(b, repo, extra, extra_ks, options=options)
        theirs = _replicas(extra, repo)
        b.note(
            f"{extra.source.path}:{extra.source.line}: a second device plugin, {extra.name}, "
            f"shared the same cards{f' {theirs} ways' if theirs else ''} beside {old.name}; "
            f"it is removed, and the DRA driver takes {old.name}'s sharing"
            f"{f' ({replicas} shares)' if replicas else ''}: give --sharing N to choose"
        )

    for ns in sorted(set(converted) - set(namespaces)):
        _wait_for_template(b, repo, ns, converted[ns], template=options.template)
    for ns in namespaces:
        claim_templates(
            b,
            repo,
            ns,
            converted[ns],
            templates[ns],
            apps=apps,
            fapps=fapps,
            prefix=prefix,
            schemas=schemas,
            layout=layout,
        )

    # Priorities do not change with the move, but what they do does (docs/rules.md).
    for hazard in repo_preemption_hazards(repo):
        b.note(f"dra-preemption-lost: {hazard.message(KUBERNETES_VERSION)}")
    b.note(
        "the switch itself needs a drain: the old device plugin must be gone from a node before "
        "the DRA kubelet plugin advertises its GPUs (gpushift cutover, docs/migrate.md)"
    )
    return b.plan()


def _driver_root(repo: Repo, old: HelmRelease) -> str:
    """The DRA driver's nvidiaDriverRoot: where the tree puts the driver (docs/migrate.md).

    Talos puts it under /usr/local (the operator's hostPaths.driverInstallDir is edited to
    agree); else the operator's driverInstallDir or the standalone plugin's nvidiaDriverRoot as
    written, /run/nvidia/driver when the operator installs the driver, / for a driver on the host.
    """
    where = driver_location(repo)
    if where is not None:
        return where.root
    if old.chart == "gpu-operator" and truthy(old.value("driver", "enabled"), default=True):
        return OPERATOR_DRIVER_DIR
    return "/"


def bridged_cannot_ask_for_memory(consumers: tuple[Consumer, ...]) -> None:
    # As render refuses it: a bridged nvidia.com/gpu request cannot ask for memory, so under
    # consumableShares: memory it would take a whole card.
    for c in consumers:
        if c.request == "extended" and c.workload.origin_kind == "llmkube":
            src = c.workload.source
            raise InputError(
                f"{c.workload.origin.kind} {c.namespace}/{c.name} stays on nvidia.com/gpu "
                "(bridged), which cannot ask for memory: under --sharing memory it would take "
                "a whole card; use N or unlimited",
                path=src.path,
                line=src.line,
            )


def old_stack(repo: Repo, *, allow_standalone_beside: bool = False) -> HelmRelease:
    """The release whose device plugin the move replaces. With ``allow_standalone_beside``,
    gpu-operator's is chosen even when a standalone chart runs a second plugin beside it
    (``standalone_beside`` names it); otherwise two plugins are refused."""
    # A plugin DaemonSet applied as a manifest would stay beside the DRA driver: both
    # allocators on one card. What it shares and where is the operator's to move.
    for plugin in repo.device_plugins:
        if plugin.release is None and plugin.active:
            obj = plugin.obj
            raise InputError(
                f"the device plugin DaemonSet {obj.namespace or 'default'}/{obj.name} is a "
                "plain manifest; gpushift migrates only a gpu-operator or nvidia-device-plugin "
                "HelmRelease: move it into one, or remove it in the same change by hand",
                path=obj.source.path,
                line=obj.source.line,
            )
    found = [
        hr
        for hr in repo.releases("gpu-operator")
        if truthy(hr.value("devicePlugin", "enabled"), default=True)
    ]
    found += [
        hr
        for hr in repo.releases("nvidia-device-plugin")
        if truthy(hr.value("devicePlugin", "enabled"), default=True)
    ]
    if not found:
        raise InputError(
            "the device plugin is not deployed by a gpu-operator or nvidia-device-plugin "
            "HelmRelease (a plain manifest?); gpushift migrates only those",
            path=".",
        )
    if len(found) > 1 and not (allow_standalone_beside and _operator_and_standalone(found)):
        raise InputError(
            f"{len(found)} releases deploy the device plugin ({', '.join(h.name for h in found)});"
            " gpushift migrates one",
            path=found[1].source.path,
            line=found[1].source.line,
        )
    return found[0]


def _operator_and_standalone(found: list[HelmRelease]) -> bool:
    """gpu-operator's device plugin and one standalone chart: the operator's stack stays and
    gets the DRA driver beside it; the standalone one is removed."""
    return len(found) == 2 and [h.chart for h in found] == ["gpu-operator", "nvidia-device-plugin"]


def standalone_beside(repo: Repo, old: HelmRelease) -> tuple[HelmRelease, ...]:
    """Standalone device plugin releases that run beside gpu-operator's ``old``."""
    if old.chart != "gpu-operator":
        return ()
    return tuple(
        hr
        for hr in repo.releases("nvidia-device-plugin")
        if truthy(hr.value("devicePlugin", "enabled"), default=True)
    )


_SCHEMA_PREFIX = "# yaml-language-server:"


def schema_lines(b: Builder, paths: list[str]) -> dict[str, str]:
    """File name → the ``# yaml-language-server`` line the repository gives such files."""
    out: dict[str, str] = {}
    for path in paths:
        head = b.texts.get(path, "").splitlines()[:6]
        line = next((x for x in head if x.startswith(_SCHEMA_PREFIX)), None)
        if line is not None:
            out.setdefault(posixpath.basename(path), line)
    return out


def _with_schema(text: str, rel: str, schemas: dict[str, str]) -> str:
    line = schemas.get(posixpath.basename(rel))
    if line is None or not text.startswith("---\n"):
        return text
    return f"---\n{line}\n{text[4:]}"


def _runtime_classes(b: Builder, repo: Repo, ks: FluxKustomization) -> dict[str, str]:
    """Files of the device plugin app that hold only RuntimeClasses (name → text): consumers
    still need them, so they move to the DRA driver app."""
    directory = ks.directory or app_dir(ks) + "/app"
    out: dict[str, str] = {}
    for rc in runtime_classes_in(repo, directory):
        path = rc.source.path
        docs = [d for d in b.docs(path) if d is not None]
        if all(isinstance(d, dict) and d.get("kind") == "RuntimeClass" for d in docs):
            out[posixpath.basename(path)] = b.texts[path]
        else:
            b.note(
                f"{path}:{rc.source.line}: RuntimeClass {rc.name} shares its file with the "
                "device plugin; move it out before that file is deleted"
            )
    return out


# -- the old stack -------------------------------------------------------------------------------


def _operator(
    b: Builder,
    repo: Repo,
    hr: HelmRelease,
    ks: FluxKustomization,
    *,
    options: Options,
    gpu_ns: str,
    rbac: str,
) -> None:
    file, doc = hr.source.path, hr.source.doc
    set_value(
        b,
        hr,
        ("devicePlugin", "enabled"),
        False,
        reason="the DRA driver hands out the GPUs; one allocator per card",
        after=None,
    )
    if not options.keep_old and hr.is_set("devicePlugin", "config"):
        inline_only(hr, ("devicePlugin", "config"))
        b.edit(
            file,
            doc,
            (*_VALUES, "devicePlugin", "config"),
            "delete",
            old=plain_dict(hr.user_value("devicePlugin", "config")),
            reason="the time-slicing config goes with the device plugin",
        )
        time_slicing(b, repo, hr)
    elif options.keep_old:
        time_slicing(b, repo, hr, keep=True)
    if repo.talos:
        current = str(hr.value("hostPaths", "driverInstallDir", default=OPERATOR_DRIVER_DIR))
        if current.rstrip("/") != TALOS_DRIVER_ROOT:
            set_value(
                b,
                hr,
                ("hostPaths", "driverInstallDir"),
                TALOS_DRIVER_ROOT,
                reason="Talos installs the driver under /usr/local; the operator and the DRA "
                "driver's nvidiaDriverRoot must agree",
            )
    if truthy(hr.value("dcgmExporter", "enabled"), default=True):
        _operator_dcgm(b, hr, ks, rbac=rbac)
    health_check(
        b,
        hr,
        ks,
        gpu_ns=gpu_ns,
        reason="the DRA driver's dependsOn then waits for the operator's release to be "
        "Ready with the device plugin off, not only for its manifests to apply",
    )


def health_check(
    b: Builder, hr: HelmRelease, ks: FluxKustomization, *, gpu_ns: str, reason: str
) -> None:
    """A HelmRelease health check for ``hr`` on its Kustomization, unless it has one (or
    ``wait: true``), so that what dependsOn the Kustomization waits for the release."""
    checked = any(h.kind == "HelmRelease" and h.name == hr.name for h in ks.health_checks)
    if not checked and not ks.wait:
        b.edit(
            ks.source.path,
            ks.source.doc,
            ("spec", "healthChecks"),
            "append",
            new={
                "apiVersion": HELMRELEASE_API,
                "kind": "HelmRelease",
                "name": hr.name,
                "namespace": hr.namespace or gpu_ns,
            },
            reason=reason,
        )


def _operator_dcgm(b: Builder, hr: HelmRelease, ks: FluxKustomization, *, rbac: str) -> None:
    env = hr.value("dcgmExporter", "env")
    if isinstance(env, list) and any(
        isinstance(e, dict) and e.get("name") == "KUBERNETES_ENABLE_DRA" for e in env
    ):
        return
    if env is not None and not isinstance(env, list):
        raise InputError(
            "dcgmExporter.env is not a list", path=hr.source.path, line=hr.line_of("dcgmExporter")
        )
    inline_only(hr, ("dcgmExporter", "env"))
    b.edit(
        hr.source.path,
        hr.source.doc,
        (*_VALUES, "dcgmExporter", "env"),
        "append",
        new={"name": "KUBERNETES_ENABLE_DRA", "value": "true"},
        reason="dcgm-exporter attributes GPU metrics to pods through their claims",
    )
    if ks.directory is None or not rbac:
        return
    target = f"{ks.directory}/{_shapes.DCGM_RBAC_FILE}"
    if target in b.files:
        return
    b.add_file(target, rbac, "dcgm-exporter reads ResourceSlices under DRA")
    kfile = f"{ks.directory}/kustomization.yaml"
    if b.docs(kfile):
        b.edit(
            kfile,
            0,
            ("resources",),
            "append",
            new=f"./{_shapes.DCGM_RBAC_FILE}",
            reason="apply the dcgm-exporter RBAC",
        )
    else:
        b.note(f"{target}: list it in the kustomization of {ks.directory}/")


def time_slicing(
    b: Builder, repo: Repo, hr: HelmRelease, *, keep: bool = False, kept: str = _KEPT_COMMENT
) -> None:
    ptrs = [p for p in repo.device_plugin_configs if p.owner is hr]
    seen: set[str] = set()
    for ptr in ptrs:
        for cfg in ptr.configs:
            src = cfg.source
            if src.path in seen:
                continue
            seen.add(src.path)
            if cfg.form == "configmap":
                docs = b.docs(src.path)
                if keep:
                    b.edit(
                        src.path,
                        src.doc,
                        ("data",),
                        "comment",
                        new=kept,
                        reason="--keep-old keeps the time-slicing config",
                    )
                elif len([d for d in docs if d is not None]) == 1:
                    b.remove_file(src.path, "the time-slicing config goes with the device plugin")
                    if not b.unlist(src.path, reason="the time-slicing config is deleted"):
                        b.note(f"{src.path}: remove it from the kustomization that lists it")
                else:
                    b.note(
                        f"{src.path}:{src.line}: the time-slicing ConfigMap shares its file with "
                        "other documents; delete it by hand"
                    )
            elif cfg.form == "generator" and not keep:
                _drop_generator(b, src.path, src.keys)
            elif cfg.form == "generator":
                b.note(f"{src.path}:{src.line}: time-slicing configMapGenerator kept (--keep-old)")


def _drop_generator(b: Builder, kfile: str, keys: tuple[Any, ...]) -> None:
    body = b.docs(kfile)[0]
    entry = body[keys[0]][keys[1]]
    b.edit(
        kfile,
        0,
        (keys[0],),
        "remove",
        old=plain_dict(entry),
        reason="the time-slicing config goes with the device plugin",
    )
    directory = posixpath.dirname(kfile)
    for f in entry.get("files") or []:
        path = str(f).partition("=")[2] if "=" in str(f) else str(f)
        b.remove_file(
            posixpath.normpath(posixpath.join(directory, path)),
            "the time-slicing config goes with the device plugin",
        )


def _standalone(
    b: Builder, repo: Repo, hr: HelmRelease, ks: FluxKustomization, *, options: Options
) -> None:
    if not b.unlist(ks.source.path, reason="the standalone device plugin is taken out"):
        raise InputError(
            "no kustomization.yaml lists the device plugin's Kustomization; gpushift takes it "
            "out of that list",
            path=ks.source.path,
            line=ks.source.line,
        )
    app = app_dir(ks)
    if options.keep_old:
        b.note(f"{app}/: kept but no longer deployed (--keep-old); delete it after the switch")
    else:
        for f in [ks.source.path, *under(b.files, ks.directory or app + "/app")]:
            b.remove_file(f, "the standalone device plugin is removed")
    # Whatever waited for the device plugin waits for the DRA driver instead.
    retarget_dependents(
        b,
        release_dependents(repo, hr),
        old=hr.name,
        new=_shapes.DRA_APP,
        reason="the device plugin release it waited for is gone",
    )
    retarget_dependents(
        b,
        kustomization_dependents(repo, ks),
        old=ks.name,
        new=_shapes.DRA_APP,
        reason="the device plugin Kustomization it waited for is gone",
    )


# -- consumers -----------------------------------------------------------------------------------


def _asks(ct: Container) -> list[str]:
    return sorted({str(r) for r in (*ct.limits, *ct.requests) if str(r).startswith(NVIDIA_PREFIX)})


def convert_consumer(
    b: Builder, repo: Repo, c: Consumer, *, old: HelmRelease, template: str
) -> bool:
    """Plan a consumer's claim; False when it stays on ``nvidia.com/gpu`` (noted)."""
    w = c.workload
    src = w.source
    kind = w.origin.kind if w.origin_kind == "llmkube" else w.kind
    where = f"{src.path}:{src.line}: {kind} {c.namespace}/{c.name}"
    if w.origin_kind == "llmkube":
        b.note(
            f"{where}: an llmkube InferenceService cannot carry a claim; it stays on "
            "nvidia.com/gpu, which the DRA DeviceClass serves through extended-resource "
            "bridging"
        )
        return False
    if w.origin_kind == "dcgm-exporter":
        return False  # every dcgm-exporter release is handled on its own, below
    gpu = [ct for ct in w.pod.all_containers if _asks(ct)]
    for ct in gpu:
        other = [r for r in _asks(ct) if r != GPU_RESOURCE]
        amount = ct.extended(GPU_RESOURCE)
        if other or str(amount) != "1":
            b.note(
                f"{where}: container {ct.name} asks for "
                f"{', '.join(_asks(ct))} = {amount}; not converted, convert it by hand"
            )
            return False
    if w.pod.resource_claims:
        b.note(f"{where}: already has resourceClaims; not converted")
        return False
    if c.namespace is None:
        b.note(f"{where}: its namespace is not known in this tree; not converted")
        return False
    if w.origin_kind == "app-template":
        hr = next(h for h in repo.helm_releases if h.obj is w.origin)
        major = app_template_major(hr)
        if major is not None and major < 5:
            # The chart's schema before 5.x rejects pod.resourceClaims: the release would
            # fail to install. Like an llmkube workload, it keeps its nvidia.com/gpu request,
            # which the DRA DeviceClass serves through extended-resource bridging.
            b.note(
                f"{where}: app-template {hr.chart_version} has no pod.resourceClaims, so it "
                "stays on nvidia.com/gpu, served through extended-resource bridging; upgrade "
                "the chart to 5 or later and migrate again for a claim"
            )
            return False
        for ct in gpu:
            inline_only(hr, (*(str(k) for k in ct.source.keys[2:]), "resources"))
        _app_template_pod(b, hr, w, template=template)
    elif w.origin_kind == "manifest":
        b.edit(
            src.path,
            src.doc,
            (*src.keys, "resourceClaims"),
            "append",
            new={"name": CLAIM_NAME, "resourceClaimTemplateName": template},
            reason=f"the pod's GPU claim, from the namespace's {template} template",
        )
    else:
        b.note(f"{where}: gpushift does not know how to edit this consumer")
        return False
    for ct in gpu:
        _container_claim(b, ct)
    if len(gpu) > 1:
        b.note(
            f"{where}: {len(gpu)} containers now share one claim (one share) where they took "
            f"{len(gpu)} replicas"
        )
    return True


def _app_template_pod(b: Builder, hr: HelmRelease, w: Workload, *, template: str) -> None:
    controllers = hr.user_value("controllers", default={})
    enabled = [k for k, v in controllers.items() if isinstance(v, dict) and v.get("enabled", True)]
    defaults = hr.user_value("defaultPodOptions")
    claim = [{"name": CLAIM_NAME, "resourceClaimTemplateName": template}]
    reason = f"the pod's GPU claim, from the namespace's {template} template"
    if len(enabled) == 1 and isinstance(defaults, dict) and "pod" not in controllers[enabled[0]]:
        b.edit(
            hr.source.path,
            hr.source.doc,
            (*_VALUES, "defaultPodOptions", "resourceClaims"),
            "set",
            new=claim,
            reason=reason,
            after="runtimeClassName" if "runtimeClassName" in defaults else None,
        )
        return
    cid = w.pod.source.keys[-1]
    b.edit(
        hr.source.path,
        hr.source.doc,
        (*_VALUES, "controllers", cid, "pod", "resourceClaims"),
        "set",
        new=claim,
        reason=reason,
    )


def _drop_gpu_resource(b: Builder, ct: Container, *, src: Source, reason: str) -> None:
    """Delete ``nvidia.com/gpu`` from ``ct``'s requests and limits, written at ``src``'s
    ``resources`` (the container's own source, or the chart values that render it)."""
    for part in ("requests", "limits"):
        got = ct.resources.get(part)
        if isinstance(got, dict) and GPU_RESOURCE in got:
            b.edit(
                src.path,
                src.doc,
                (*src.keys, "resources", part, GPU_RESOURCE),
                "delete",
                old=got[GPU_RESOURCE],
                reason=reason,
                prune=1,
            )


def _container_claim(b: Builder, ct: Container) -> None:
    src = ct.source
    _drop_gpu_resource(
        b,
        ct,
        src=src,
        reason="the claim replaces the extended resource",
    )
    b.edit(
        src.path,
        src.doc,
        (*src.keys, "resources", "claims"),
        "append",
        new={"name": CLAIM_NAME},
        reason="the container uses the pod's GPU claim",
    )


def dcgm_chart(b: Builder, w: Workload) -> None:
    src = w.source
    ct = w.pod.containers[0]
    _drop_gpu_resource(
        b,
        ct,
        src=src,
        reason="an exporter reads every GPU; under DRA a request would take a share",
    )
    if ct.env.get("KUBERNETES_ENABLE_DRA") != "true":
        b.edit(
            src.path,
            src.doc,
            (*src.keys, "kubernetesDRA", "enabled"),
            "set",
            new=True,
            reason="dcgm-exporter attributes metrics to claims (KUBERNETES_ENABLE_DRA) and its "
            "ClusterRole reads ResourceSlices",
        )


# -- claim templates -------------------------------------------------------------------------------


def _wait_for_template(
    b: Builder, repo: Repo, ns: str, workloads: list[Workload], *, template: str
) -> None:
    """The namespace already has the claim template: its consumers' Kustomizations wait for the
    one that applies it, as they would for a new one."""
    home = next(
        (
            cl.obj.kustomization
            for cl in repo.claims
            if cl.template and cl.name == template and cl.namespace == ns
        ),
        None,
    )
    if home is None:
        return
    seen: set[str] = set()
    for w in workloads:
        cks = repo.kustomization(w.origin.kustomization)
        if cks is None or cks.ref == home or cks.source.path in seen:
            continue
        seen.add(cks.source.path)
        if any(d.name == home.name and d.namespace == home.namespace for d in cks.depends_on):
            continue
        entry = {"name": home.name}
        if cks.namespace != home.namespace:
            entry["namespace"] = home.namespace
        b.edit(
            cks.source.path,
            cks.source.doc,
            ("spec", "dependsOn"),
            "append",
            new=entry,
            reason=f"its pods' claim template {template} must exist before they are created",
        )


def claim_templates(
    b: Builder,
    repo: Repo,
    ns: str,
    workloads: list[Workload],
    files: dict[str, str],
    *,
    apps: str,
    fapps: str,
    prefix: str,
    schemas: dict[str, str],
    layout: _shapes.Layout,
) -> None:
    ns_dir = posixpath.join(apps, ns)
    beside: str | None = None
    for w in workloads:
        ks = repo.kustomization(w.origin.kustomization)
        if ks is not None:
            ns_dir = posixpath.dirname(app_dir(ks))
            beside = ks.source.path
            break
    target = f"{ns_dir}/{_shapes.CLAIM_TEMPLATES_APP}"
    if under(b.files, target):
        raise InputError("the claim templates' folder already exists", path=target)
    rendered = f"./{fapps}/{ns}/{_shapes.CLAIM_TEMPLATES_APP}/app"
    for rel, text in sorted(files.items()):
        if rel == "ks.yaml":
            text = text.replace(f"path: {rendered}\n", f"path: ./{prefix}{target}/app\n")
        b.add_file(
            f"{target}/{rel}",
            _with_schema(text, rel, schemas),
            f"the GPU claim template of namespace {ns}",
        )
    reason = f"deploy the claim template of {ns}"
    if beside is None:
        b.list_in_parent(f"{target}/ks.yaml", reason=reason)
    else:
        b.list_beside(f"{target}/ks.yaml", beside, reason=reason)
    ct_name, ct_ns = _shapes.claim_templates_ref(layout, ns)
    # The consumers' pods reference the template: their Kustomizations wait for it.
    seen: set[str] = set()
    for w in workloads:
        cks = repo.kustomization(w.origin.kustomization)
        if cks is None or cks.source.path in seen:
            continue
        seen.add(cks.source.path)
        if any(d.name == ct_name and d.namespace == ct_ns for d in cks.depends_on):
            continue
        entry = {"name": ct_name}
        if cks.namespace != ct_ns:
            entry["namespace"] = ct_ns
        b.edit(
            cks.source.path,
            cks.source.doc,
            ("spec", "dependsOn"),
            "append",
            new=entry,
            reason="its pods' claim template must exist before they are created",
        )


def _replicas(hr: HelmRelease, repo: Repo) -> int | None:
    """How many ways ``hr``'s device plugin time-slices a card, when the tree says."""
    for plugin in repo.device_plugins:
        if plugin.release is hr and plugin.selected is not None:
            return plugin.selected.replicas
    return None
