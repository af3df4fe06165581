"""Rules about the platform around the GPU stack: Talos paths, RuntimeClass, Flux ordering."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpushift.gitops import FluxKustomization, HelmRelease, Repo, truthy
from gpushift.reports import Finding, Severity
from gpushift.rules._context import (
    DRA_DRIVER_ROOT_DEFAULT,
    OPERATOR_DRIVER_DIR_DEFAULT,
    Context,
    option_line,
)

#: Where Talos 1.13+ system extensions put the NVIDIA driver (siderolabs/docs, Talos v1.15
#: "nvidia-gpu": hostPaths.driverInstallDir=/usr/local).
TALOS_DRIVER_ROOT = "/usr/local"
#: gpu-operator's ``operator.runtimeClass`` default: the RuntimeClass it installs.
OPERATOR_RUNTIME_CLASS = "nvidia"
#: The NVIDIA RuntimeClass k3s and RKE2 create when they find the NVIDIA container runtime
#: (k3s-io/k3s#8700; they also create ``nvidia-experimental`` and ``nvidia-cdi``, but
#: only ``nvidia`` is taken as known here).
K3S_RUNTIME_CLASS = "nvidia"


def _norm(path: object) -> str:
    text = str(path).strip()
    return text.rstrip("/") or "/"


@dataclass(frozen=True, slots=True)
class DriverLocation:
    """Where the tree says the NVIDIA driver is on the nodes, and what says so."""

    root: str
    why: str
    talos: bool = False


def driver_location(repo: Repo) -> DriverLocation | None:
    """Where the NVIDIA driver is, read from the tree; None when the tree does not say.

    In order: Talos (its extension puts the driver under /usr/local), a deployed gpu-operator's
    ``hostPaths.driverInstallDir`` (or a top-level ``driverInstallDir``) as written, then a
    standalone device plugin's ``nvidiaDriverRoot`` as written. Chart defaults are not evidence.
    """
    if repo.talos:
        evidence = repo.talos[0]
        return DriverLocation(
            TALOS_DRIVER_ROOT,
            f"Talos detected ({evidence.reason}, {evidence.source.path})",
            talos=True,
        )
    operators = repo.releases("gpu-operator")
    for op in operators:
        for keys in (("hostPaths", "driverInstallDir"), ("driverInstallDir",)):
            if op.is_set(*keys):
                return DriverLocation(
                    _norm(op.user_value(*keys)),
                    f"gpu-operator's {'.'.join(keys)} "
                    f"({op.values_source.path}:{op.line_of(*keys)})",
                )
    plugins = sorted(
        repo.releases("nvidia-device-plugin", active=False), key=lambda h: not h.active
    )
    for hr in plugins:
        if hr.is_set("nvidiaDriverRoot"):
            return DriverLocation(
                _norm(hr.user_value("nvidiaDriverRoot")),
                f"the device plugin's nvidiaDriverRoot "
                f"({hr.values_source.path}:{hr.line_of('nvidiaDriverRoot')})",
            )
    return None


def check(*, ctx: Context) -> Iterator[Finding]:
    """driver-root-mismatch, runtimeclass-missing and dependency-order."""
    yield from _driver_root(ctx)
    yield from _runtime_class(ctx)
    yield from _dependency_order(ctx)


def _driver_root(ctx: Context) -> Iterator[Finding]:
    if not ctx.repo.talos:
        yield from _driver_root_elsewhere(ctx)
        return
    evidence = ctx.repo.talos[0]
    why = f"Talos detected ({evidence.reason}, {evidence.source.path})"
    for driver in ctx.drivers:
        root = _norm(driver.value("nvidiaDriverRoot", default=DRA_DRIVER_ROOT_DEFAULT))
        if root != TALOS_DRIVER_ROOT:
            yield ctx.about(
                "driver-root-mismatch",
                driver,
                line=driver.line_of("nvidiaDriverRoot"),
                msg=(
                    f"{why}: nvidiaDriverRoot is {root}, but Talos installs the NVIDIA driver "
                    f"under {TALOS_DRIVER_ROOT}; the kubelet plugin's prestart waits forever for "
                    "nvidia-smi and libnvidia-ml.so.1"
                ),
            )
    for op in ctx.operators:
        path = _norm(op.value("hostPaths", "driverInstallDir", default=OPERATOR_DRIVER_DIR_DEFAULT))
        if path != TALOS_DRIVER_ROOT:
            # With a pre-installed driver (driver.enabled=false) the ClusterPolicy stack reaches
            # the driver through the host's runtime and the device plugin works: the path is a
            # recommendation. It breaks pods when the operator installs the driver itself or
            # runs its GPUCluster DRA driver, whose CDI specs use the path (nvidia.md §9).
            breaks = truthy(op.value("driver", "enabled"), default=True) or truthy(
                op.value("gpuCluster", "deployCR"), default=False
            )
            yield ctx.about(
                "driver-root-mismatch",
                op,
                severity=None if breaks else Severity.WARNING,
                line=op.line_of("hostPaths", "driverInstallDir"),
                msg=(
                    f"{why}: hostPaths.driverInstallDir is {path}, but Talos installs the NVIDIA "
                    f"driver under {TALOS_DRIVER_ROOT} (Talos docs: driver.enabled=false, "
                    f"toolkit.enabled=false, hostPaths.driverInstallDir={TALOS_DRIVER_ROOT})"
                ),
            )


def _driver_root_elsewhere(ctx: Context) -> Iterator[Finding]:
    # Off Talos the tree can still say where the driver is: the DRA driver must look there.
    where = driver_location(ctx.repo)
    if where is None:
        return
    for driver in ctx.drivers:
        root = _norm(driver.value("nvidiaDriverRoot", default=DRA_DRIVER_ROOT_DEFAULT))
        if root != where.root:
            yield ctx.about(
                "driver-root-mismatch",
                driver,
                line=driver.line_of("nvidiaDriverRoot"),
                msg=(
                    f"nvidiaDriverRoot is {root}, but the driver is under {where.root} by "
                    f"{where.why}; the kubelet plugin's prestart waits forever for nvidia-smi "
                    "and libnvidia-ml.so.1"
                ),
            )


def _runtime_class(ctx: Context) -> Iterator[Finding]:
    defined = {rc.name for rc in ctx.repo.runtime_classes if rc.active}
    for op in ctx.operators:
        # gpu-operator creates the RuntimeClass named by operator.runtimeClass.
        defined.add(str(op.value("operator", "runtimeClass", default=OPERATOR_RUNTIME_CLASS)))
    evidence = ctx.repo.distribution[0] if ctx.repo.distribution else None
    for w in ctx.workloads:
        name = w.pod.runtime_class_name
        if name is None or not name.startswith("nvidia") or name in defined:
            continue
        src, line = option_line(w.pod, "runtimeClassName")
        head = (
            f"{w.kind} {w.name} uses runtimeClassName: {name}, but no RuntimeClass {name} is "
            "defined and no gpu-operator installs one"
        )
        if evidence is not None and name == K3S_RUNTIME_CLASS:
            # k3s and RKE2 create it on their own once a node has the NVIDIA container
            # runtime: whether it exists depends on the nodes, which the tree does not show.
            yield ctx.in_workload(
                "runtimeclass-missing",
                w,
                source=src,
                line=line,
                severity=Severity.INFO,
                msg=(
                    f"{head}; {evidence.name} detected ({evidence.reason}, "
                    f"{evidence.source.path}:{evidence.source.line_of()}), which creates "
                    f"RuntimeClass {name} itself when it finds the NVIDIA container runtime on "
                    "a node (k3s-io/k3s#8700): the pod is admitted only if that runtime is "
                    f"installed on the node when {evidence.name} starts"
                ),
            )
            continue
        yield ctx.in_workload(
            "runtimeclass-missing",
            w,
            source=src,
            line=line,
            msg=f"{head}; the pod is rejected at admission",
        )


def _dependency_order(ctx: Context) -> Iterator[Finding]:
    operators = [(op, ctx.repo.kustomization(op.obj.kustomization)) for op in ctx.operators]
    operators_ks = [(op, ks) for op, ks in operators if ks is not None]
    if not operators_ks:
        return
    for driver in ctx.drivers:
        ks = ctx.repo.kustomization(driver.obj.kustomization)
        if ks is None or any(ks.ref == op_ks.ref for _, op_ks in operators_ks):
            continue
        deps = {(d.namespace, d.name) for d in ks.depends_on}
        waited = [(op, k) for op, k in operators_ks if (k.namespace, k.name) in deps]
        if not waited:
            op_ks = operators_ks[0][1]
            yield ctx.about(
                "dependency-order",
                ks,
                line=ks.source.line_of(("spec", "dependsOn")),
                msg=(
                    f"the DRA driver's Kustomization does not dependsOn {op_ks.namespace}/"
                    f"{op_ks.name}, which deploys gpu-operator: the kubelet plugin can start "
                    "publishing GPUs before the operator has turned the device plugin off"
                ),
            )
            continue
        for op, op_ks in waited:
            if not _checks_release(op_ks, op):
                yield ctx.about(
                    "dependency-order",
                    op_ks,
                    line=op_ks.source.line_of(("spec", "healthChecks")),
                    msg=(
                        f"{ks.name} dependsOn this Kustomization, but it has no HelmRelease "
                        f"health check for {op.name} (and no wait: true): it is Ready once the "
                        "manifests apply, before the operator has reconciled devicePlugin off"
                    ),
                )


def _checks_release(ks: FluxKustomization, op: HelmRelease) -> bool:
    if ks.wait:
        return True
    return any(hc.kind == "HelmRelease" and hc.name == op.name for hc in ks.health_checks)
