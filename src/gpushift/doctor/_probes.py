"""The probes: each reproduces an operator's troubleshooting and says what to change.

Log wording matched here is the agents' own (NVIDIA/k8s-device-plugin's NVML failure block,
dra-driver-nvidia-gpu's kubelet-plugin-prestart.sh, client-go's reflector); see nvidia.md.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from gpushift._obj import Obj
from gpushift.doctor._context import Context
from gpushift.doctor._registry import Problem, probe
from gpushift.verdict import ledgers

GPU = "nvidia.com/gpu"
TALOS_ROOT = "/usr/local"
_GFD_LABELS = ("nvidia.com/gpu.count", "nvidia.com/gpu.product", "nvidia.com/gpu.replicas")


def _pod_line(component: str, pod: Obj) -> str:
    state = pod.get("reason") or pod.get("phase")
    ready = sum(1 for c in pod.get("containers") or [] if c.get("ready"))
    total = len(pod.get("containers") or [])
    line = (
        f"{component} pod {pod['namespace']}/{pod['name']} on {pod.get('node')}: "
        f"{pod.get('phase')}, {ready}/{total} ready, {pod.get('restarts', 0)} restarts ({state})"
    )
    for c in pod.get("containers") or []:
        last = c.get("lastTermination")
        if last and c.get("name") == pod.get("mainContainer"):
            message = f": {last['message']}" if last.get("message") else ""
            line += f"; last exit {last.get('reason')} (code {last.get('exitCode')}){message}"
    return line


def _node(ctx: Context, name: str) -> Obj:
    return next((n for n in ctx.snapshot.get("nodes") or [] if n.get("name") == name), {})


def _slices_on(ctx: Context, name: str) -> list[Obj]:
    return [s for s in ctx.snapshot.get("resourceSlices") or [] if s.get("node") == name]


def _waiting_for_driver(pod: Obj) -> bool:
    return any(c.get("state") == "running" for c in pod.get("initContainers") or []) and not any(
        c.get("state") == "running" for c in pod.get("containers") or []
    )


@probe("node-not-advertising")
def node_not_advertising(ctx: Context) -> Iterator[Problem]:
    """A GPU node with neither allocatable GPUs nor a slice: the plugin pod, allocatable, GFD
    labels and the plugin's log."""
    for node in ctx.snapshot.get("nodes") or []:
        name = str(node["name"])
        if not node.get("gpuNode") or not ctx.wanted(name):
            continue
        alloc = node.get("allocatable") or {}
        if any(str(alloc.get(r, "0")) not in ("0", "") for r in (GPU, GPU + ".shared")):
            continue
        if _slices_on(ctx, name):
            continue
        plugins = [
            (comp, p)
            for comp in ("device-plugin", "dra-kubelet-plugin")
            for p in ctx.agent_pods(comp)
            if p.get("node") == name
        ]
        if any(comp == "dra-kubelet-plugin" and _waiting_for_driver(p) for comp, p in plugins):
            continue  # the DRA plugin waits for its driver: dra-driver-root says why
        evidence = [_pod_line(comp, p) for comp, p in plugins] or [
            f"no device-plugin or DRA kubelet-plugin pod is scheduled on {name}"
        ]
        shown = alloc.get(GPU)
        evidence.append(f"allocatable nvidia.com/gpu: {'absent' if shown is None else shown}")
        labels = node.get("labels") or {}
        present = [f"{k}={labels[k]}" for k in _GFD_LABELS if k in labels]
        evidence.append(
            "GFD labels: " + (", ".join(present) if present else "none (GFD has not labelled it)")
        )
        nvml: list[str] = []
        for _, p in plugins:
            lines = ctx.log(p) or ctx.log(p, previous=True)
            hits = [ln for ln in lines if "initialize NVML" in ln or "nvml init failed" in ln]
            nvml += hits
            if hits:
                evidence.append(f"log of {p['namespace']}/{p['name']}:")
                shown = hits[:1] + hits[-1:] if len(hits) > 1 else hits
                evidence += [f"  {ln}" for ln in shown]
        obj = f"Node/{name}"
        if nvml:
            yield Problem(
                "node-not-advertising",
                obj,
                "the GPU plugin cannot initialise NVML: the NVIDIA kernel modules are not loaded",
                tuple(evidence),
                f"Load the NVIDIA kernel modules on {name}. On Talos this means the node booted "
                "the base image instead of the GPU schematic (with the nonfree-kmod-nvidia and "
                "nvidia-container-toolkit extensions): upgrade it to the GPU schematic's "
                f"installer image, then check `talosctl -n {name} dmesg | grep -i nvidia` and "
                f"`talosctl -n {name} read /proc/modules`.",
            )
            continue
        crashing = [p for _, p in plugins if int(p.get("restarts") or 0) > 0]
        if crashing:
            p = crashing[0]
            last = next(
                (
                    c.get("lastTermination") or {}
                    for c in p.get("containers") or []
                    if c.get("name") == p.get("mainContainer")
                ),
                {},
            )
            tail = ctx.log(p, previous=True)[-3:]
            if tail:
                evidence.append(f"last lines before the previous exit of {p['name']}:")
                evidence += [f"  {ln}" for ln in tail]
            if last.get("reason") == "OOMKilled":
                fix = (
                    f"The plugin container is killed for memory on every start (exit "
                    f"{last.get('exitCode')}): raise its memory limit in the chart values "
                    "(resources.limits.memory) or remove the limit."
                )
            else:
                fix = (
                    "The plugin exits on start; its last message says why. Read "
                    f"`kubectl logs -n {p['namespace']} {p['name']} -c {p.get('mainContainer')} "
                    "--previous` and correct the chart values it names."
                )
            yield Problem(
                "node-not-advertising",
                obj,
                f"the GPU plugin crash-loops ({p.get('restarts')} restarts)",
                tuple(evidence),
                fix,
            )
            continue
        if not plugins:
            fix = (
                f"Nothing serves GPUs on {name}: check the plugin DaemonSet's nodeSelector "
                "(gpu-operator: nvidia.com/gpu.deploy.device-plugin; the DRA chart: "
                "kubeletPlugin.nodeSelector) against the node's labels, and its tolerations."
            )
            summary = "no GPU plugin runs on the node"
        else:
            fix = (
                "The plugin runs but has not registered: read its log "
                f"(`kubectl logs -n {plugins[0][1]['namespace']} {plugins[0][1]['name']}`)."
            )
            summary = "the GPU plugin runs but advertises nothing"
        yield Problem("node-not-advertising", obj, summary, tuple(evidence), fix)


@probe("dra-driver-root")
def dra_driver_root(ctx: Context) -> Iterator[Problem]:
    """The DRA kubelet plugin's prestart script does not find the driver under its root."""
    for p in ctx.agent_pods("dra-kubelet-plugin"):
        if not ctx.wanted(p.get("node")) or not p.get("initContainers"):
            continue
        init = str(p["initContainers"][0]["name"])
        lines = ctx.log(p, init)
        missing = [ln for ln in lines if ": not found" in ln and "/driver-root" in ln]
        if not missing or not _waiting_for_driver(p):
            continue
        root = (p.get("env") or {}).get("NVIDIA_DRIVER_ROOT") or "/"
        evidence = [
            _pod_line("dra-kubelet-plugin", p),
            f"NVIDIA_DRIVER_ROOT (nvidiaDriverRoot): {root}",
            f"log of {p['namespace']}/{p['name']} -c {init}:",
            f"  {missing[-1]}",
        ]
        check = [ln for ln in lines if ln.startswith("Check failed")]
        if check:
            evidence.append(f"  {check[-1]}")
        if root != TALOS_ROOT:
            fix = (
                f"nvidiaDriverRoot is '{root}', and the driver is not there. On Talos the "
                f"driver lives under {TALOS_ROOT}: set nvidiaDriverRoot: {TALOS_ROOT} in the "
                "dra-driver-nvidia-gpu HelmRelease values ('/' is for a driver installed on "
                "the host root, /run/nvidia/driver for the GPU Operator's driver container)."
            )
        else:
            fix = (
                f"nvidiaDriverRoot is {TALOS_ROOT}, the value Talos needs, but no driver is "
                f"there: the node runs without the NVIDIA system extensions. Boot the GPU "
                f"schematic and check `talosctl -n {p.get('node')} get extensions`."
            )
        yield Problem(
            "dra-driver-root",
            f"Pod/{p['namespace']}/{p['name']}",
            f"the DRA kubelet plugin on {p.get('node')} waits for the driver: nvidia-smi and "
            f"libnvidia-ml.so.1 not found under {root}",
            tuple(evidence),
            fix,
        )


def _normal(params: Any) -> str:
    # The plugin normalises configs before comparing; an absent config is the default one.
    return json.dumps(params or {}, sort_keys=True)


@probe("claim-config-conflict")
def claim_config_conflict(ctx: Context) -> Iterator[Problem]:
    """Claims on one shared device whose opaque ``gpu.nvidia.com`` configs differ."""
    by_device: dict[tuple[str, str], list[tuple[Obj, str]]] = defaultdict(list)
    for claim in ctx.snapshot.get("resourceClaims") or []:
        for r in claim.get("devices") or []:
            if r.get("driver") != "gpu.nvidia.com":
                continue
            config = [
                c.get("parameters")
                for c in claim.get("config") or []
                if c.get("driver") == "gpu.nvidia.com"
                and (not c.get("requests") or r.get("request") in c["requests"])
            ]
            by_device[(str(r.get("pool")), str(r.get("device")))].append(
                (claim, _normal(config[-1] if config else None))
            )
    for (pool, device), entries in sorted(by_device.items()):
        if not ctx.wanted(pool) or len({cfg for _, cfg in entries}) < 2:
            continue
        first = entries[0]
        for claim, cfg in entries[1:]:
            if cfg == first[1]:
                continue
            a = f"{first[0]['namespace']}/{first[0]['name']}"
            b = f"{claim['namespace']}/{claim['name']}"
            yield Problem(
                "claim-config-conflict",
                f"ResourceClaim/{b}",
                f"claims {a} and {b} share {device} on {pool} with different GpuConfig",
                (f"{a}: {first[1]}", f"{b}: {cfg}"),
                "With consumable shares the kubelet plugin prepares a shared device only for "
                "claims whose opaque configs are equal ('requested device has conflicting "
                "configuration with already prepared claim'): give every claim that may land on "
                "the card the same GpuConfig, or none.",
            )


@probe("bridged-insufficient")
def bridged_insufficient(ctx: Context) -> Iterator[Problem]:
    """A pod Pending on ``Insufficient nvidia.com/gpu``."""
    classes = [
        d["name"]
        for d in ctx.snapshot.get("deviceClasses") or []
        if d.get("extendedResourceName") == GPU
    ]
    advertising = [
        f"{n['name']}={n['allocatable'][GPU]}"
        for n in ctx.snapshot.get("nodes") or []
        if GPU in (n.get("allocatable") or {})
    ]
    plugin = any(not a.endswith("=0") for a in advertising)
    if ctx.node is not None or (plugin and not classes):
        # Not about one node; and while the device plugin alone serves nvidia.com/gpu a
        # shortage is a capacity question, not a bridged request.
        return
    for pod in ctx.snapshot.get("pods") or []:
        message = str(pod.get("pendingMessage") or "")
        if f"Insufficient {GPU}" not in message or pod.get("node"):
            continue
        evidence = (
            f"scheduler: {message}",
            f"nvidia.com/gpu requested: {(pod.get('requests') or {}).get(GPU, 0)}",
            "nodes with allocatable nvidia.com/gpu: " + (", ".join(advertising) or "none"),
            "DeviceClasses with extendedResourceName nvidia.com/gpu: "
            + (", ".join(classes) or "none"),
        )
        yield Problem(
            "bridged-insufficient",
            f"Pod/{pod['namespace']}/{pod['name']}",
            "Pending on Insufficient nvidia.com/gpu",
            evidence,
            "Either let DRA serve the request: a DeviceClass with extendedResourceName: "
            "nvidia.com/gpu (the DRA chart's gpu.nvidia.com class on resource.k8s.io/v1) and "
            "the DRAExtendedResource feature gate on kube-apiserver, kube-scheduler, "
            "kube-controller-manager and kubelet; or give the workload a ResourceClaim (pod "
            "resourceClaims from a ResourceClaimTemplate of class gpu.nvidia.com) instead of "
            "limits: nvidia.com/gpu.",
        )


def _grants_slices(ctx: Context, namespace: str, service_account: str) -> list[str]:
    roles = {r["metadata"]["name"]: r for r in ctx.objects("ClusterRole")}
    granted = []
    for b in ctx.objects("ClusterRoleBinding"):
        if not any(
            s.get("kind") == "ServiceAccount"
            and s.get("name") == service_account
            and s.get("namespace") == namespace
            for s in b.get("subjects") or []
        ):
            continue
        role = roles.get(str((b.get("roleRef") or {}).get("name")))
        for rule in (role or {}).get("rules") or []:
            groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
            verbs = set(rule.get("verbs") or [])
            if (
                ("resource.k8s.io" in groups or "*" in groups)
                and ("resourceslices" in resources or "*" in resources)
                and ({"get", "list", "watch"} <= verbs or "*" in verbs)
            ):
                granted.append(f"ClusterRoleBinding {b['metadata']['name']} -> {role_name(b)}")
    return granted


def role_name(binding: Obj) -> str:
    """The ClusterRole a binding grants."""
    return f"ClusterRole {(binding.get('roleRef') or {}).get('name')}"


@probe("dcgm-attribution")
def dcgm_attribution(ctx: Context) -> Iterator[Problem]:
    """dcgm-exporter cannot attribute DRA devices to pods: env switch, RBAC, its log."""
    slices = ctx.snapshot.get("resourceSlices") or []
    if not slices:
        return  # without DRA the exporter attributes through the kubelet's pod-resources
    books = ledgers(ctx.snapshot)
    series = ctx.snapshot.get("dcgmSeries")
    for p in ctx.agent_pods("dcgm-exporter"):
        node = p.get("node")
        if not ctx.wanted(node) or p.get("phase") != "Running":
            continue
        env = (p.get("env") or {}).get("KUBERNETES_ENABLE_DRA")
        sa = str(p.get("serviceAccount") or "default")
        granted = _grants_slices(ctx, str(p["namespace"]), sa)
        forbidden = [ln for ln in ctx.log(p) if "forbidden" in ln and "resourceslices" in ln]
        unlabelled: list[str] = []
        if series is not None:
            held = {c.card for c in books.cards.get(str(node), []) if c.holders}
            unlabelled = sorted(
                {
                    f"gpu={lbl.get('gpu')}"
                    for lbl in series
                    if lbl.get("Hostname") == node and not lbl.get("pod") and lbl.get("gpu") in held
                }
            )
        if (env or "").lower() == "true" and granted and not forbidden and not unlabelled:
            continue
        evidence = [
            f"dcgm-exporter pod {p['namespace']}/{p['name']} on {node}, service account {sa}",
            f"KUBERNETES_ENABLE_DRA: {env if env is not None else 'not set'}",
            "ResourceSlice get/list/watch granted by: " + (", ".join(granted) or "nothing"),
        ]
        if unlabelled:
            evidence.append("series of held cards without pod labels: " + ", ".join(unlabelled))
        if forbidden:
            evidence.append(f"log of {p['namespace']}/{p['name']}:")
            evidence.append(f"  {forbidden[-1]}")
        yield Problem(
            "dcgm-attribution",
            f"Pod/{p['namespace']}/{p['name']}",
            f"dcgm-exporter on {node} cannot attribute DRA-allocated GPUs to pods",
            tuple(evidence),
            f"Bind service account {p['namespace']}/{sa} to a ClusterRole allowing get, list "
            "and watch on resourceslices in API group resource.k8s.io (a ClusterRoleBinding; "
            "the dcgm-exporter chart does this with kubernetesDRA.enabled: true), and set "
            "KUBERNETES_ENABLE_DRA=true on the exporter (gpu-operator: dcgmExporter.env).",
        )
