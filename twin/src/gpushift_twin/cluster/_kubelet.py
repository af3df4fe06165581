"""The kubelet of every node: pod admission and lifecycle, the device manager, the DRA plugin.

Device manager (k8s.io/kubernetes pkg/kubelet/cm/devicemanager, see k8s-dra-flux.md §5): a
Running NVIDIA device-plugin pod registers ``nvidia.com/gpu`` = cards × replicas. When it goes,
its devices turn unhealthy (allocatable 0 at once, capacity kept); after
``endpointStopGracePeriod`` capacity is 0 too. The key is never removed, not even by a kubelet
restart, which re-creates registered resources at 0 until the plugin registers again.

DRA: a Running ``dra-driver-nvidia-gpu`` kubelet-plugin pod publishes the node's
``gpu.nvidia.com`` ResourceSlice (``gpushift.engine.nvidia_resource_slice``) in the mode its
``CONSUMABLE_SHARES`` and ``FEATURE_GATES`` select, and withdraws it when it goes.

Containers that exit at once crash-loop: ``restartCount`` grows with the kubelet's back-off
(10 s doubling to 5 min), each run printing its log again. Scenario faults on a node
(``NODE_FAULTS``) make its agents behave as they do in that state, logs included.
"""

from __future__ import annotations

import contextlib
import functools
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpushift import common
from gpushift.common import InputError, Obj, by_kind
from gpushift.engine import (
    ConsumableShares,
    ConsumableSharesError,
    GpuLedger,
    nvidia_resource_slice,
    parse_consumable_shares,
)
from gpushift_twin.apiserver import ApiError
from gpushift_twin.cluster import _gfd, _pods, _volumes
from gpushift_twin.cluster import _logs as logs
from gpushift_twin.cluster._context import Context
from gpushift_twin.cluster._generic import generic_resources, is_generic_plugin
from gpushift_twin.cluster._inventory import Gpu
from gpushift_twin.cluster._nodes import pod_ip
from gpushift_twin.cluster._pods import Crash
from gpushift_twin.cluster._reuse import (
    CardLedger,
    Source,
    TimeSlicingConfig,
    parse_device_plugin_config,
)
from gpushift_twin.cluster._scheduler import KUBELET_FINALIZER
from gpushift_twin.cluster._workloads import TERMINAL

GPU = "nvidia.com/gpu"
DRIVER = "gpu.nvidia.com"
#: NVIDIA/k8s-device-plugin: per-node config selection label.
CONFIG_LABEL = "nvidia.com/device-plugin.config"
_DEVICE_PLUGIN_IMAGES = ("k8s-device-plugin",)
#: Scenario faults a node can carry (``twin serve --node-fault NODE=FAULT``):
#: NVML cannot initialise (kernel modules not loaded); the driver is not under the DRA
#: plugin's driver root; dcgm-exporter may not list ResourceSlices; the GPU plugin
#: crash-loops (OOMKilled).
NODE_FAULTS = ("nvml-init-failure", "driver-root-missing", "dcgm-rbac-missing", "plugin-crashloop")
#: The GPU Operator's validation init containers (image ``…/gpu-operator-validator``) and the
#: operand each waits for on its node (assets/state-*: ``driver-validation`` for the driver,
#: ``toolkit-validation`` for ``toolkit-ready``, which needs the toolkit, and the validator's
#: ``plugin-validation`` for the device plugin). An operand whose DaemonSet does not select the
#: node is on the host there (``driver.enabled=false``, ``pre-installed``), so nothing waits.
_VALIDATIONS = {
    "driver-validation": "nvidia-driver-daemonset",
    "toolkit-validation": "nvidia-container-toolkit-daemonset",
    "plugin-validation": "nvidia-device-plugin-daemonset",
}
_VALIDATOR_IMAGE = "gpu-operator-validator"
#: The kubelet's crash-loop back-off: first delay and ceiling (pkg/kubelet/kubelet.go).
_BACKOFF, _MAX_BACKOFF = 10, 300
#: The prestart script's retry interval (kubelet-plugin-prestart.sh ``_WAIT_S``).
_PRESTART_WAIT = 10.0
_DRA_IMAGES = ("dra-driver-nvidia-gpu", "k8s-dra-driver-gpu")


#: The kinds a kubelet reads besides its node and pods (claims and slices for DRA, ConfigMaps
#: for the device plugin's config, volumes' sources, dcgm-exporter's RBAC).
_READS = tuple(
    by_kind(k)
    for k in (
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "ResourceClaim",
        "ResourceSlice",
        "ClusterRole",
        "ClusterRoleBinding",
    )
)


def _repo(image: str) -> str:
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last


def _command(c: Obj) -> str:
    return " ".join(str(x) for x in [*(c.get("command") or []), *(c.get("args") or [])])


def _env(c: Obj) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value", "")) for e in c.get("env") or [] if "value" in e}


def role(pod: Obj) -> tuple[str, Obj] | None:
    """What an NVIDIA agent pod is, from what the charts deploy, and its main container.

    Returns ``("device-plugin" | "gfd" | "dra" | "dcgm", container)`` or None for other pods.
    """
    for c in (pod.get("spec") or {}).get("containers") or []:
        repo = _repo(str(c.get("image", "")))
        cmd = _command(c)
        name = str(c.get("name", ""))
        if "gpu-kubelet-plugin" in cmd or (name == "gpus" and repo.endswith(_DRA_IMAGES)):
            return "dra", c
        if repo.endswith("dcgm-exporter"):
            return "dcgm", c
        if (
            "gpu-feature-discovery" in cmd
            or name == "gpu-feature-discovery"
            or repo.endswith("gpu-feature-discovery")
        ):
            return "gfd", c
        if "config-manager" in cmd or "config-manager" in name or "mps-control" in cmd:
            continue
        if repo.endswith(_DEVICE_PLUGIN_IMAGES) or "nvidia-device-plugin" in cmd:
            return "device-plugin", c
    return None


def _runs_to_completion(pod: Obj) -> bool:
    # A Job's containers do their work and exit; a restartPolicy Always container never does.
    owners = pod["metadata"].get("ownerReferences") or []
    return (pod.get("spec") or {}).get("restartPolicy") in ("Never", "OnFailure") and any(
        o.get("kind") == "Job" for o in owners
    )


@dataclass(frozen=True, slots=True)
class PluginConfig:
    """What a device-plugin (or GFD) pod advertises: resource, replicas, strategy."""

    resource: str
    replicas: int
    strategy: str
    renamed: bool
    #: False when no sharing config is loaded (GFD then labels ``gpu.replicas: 0``).
    sharing: bool = True


def device_plugin_config(
    pod: Obj, *, main: Obj, node_labels: dict[str, str], configmaps: dict[tuple[str, str], Obj]
) -> tuple[PluginConfig | None, str | None]:
    """The config a device-plugin pod runs with, or why it has none yet.

    Returns ``(config, None)``; ``(None, error)`` when the plugin would exit on its config;
    ``(None, None)`` while the ConfigMap it mounts does not exist (the pod cannot start).
    The config-manager picks the key named by the node label ``nvidia.com/device-plugin.config``,
    else ``DEFAULT_CONFIG``, else the only key.
    """
    spec = pod.get("spec") or {}
    all_env: dict[str, str] = {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        all_env.update(_env(c))
    uses_config = (
        "CONFIG_FILE" in all_env
        or "CONFIG_FILE_SRCDIR" in all_env
        or "--config-file" in _command(main)
    )
    if not uses_config:
        return PluginConfig(GPU, 1, "none", False, sharing=False), None
    ns = pod["metadata"]["namespace"]
    for vol in spec.get("volumes") or []:
        ref = vol.get("configMap")
        if not ref:
            continue
        cm = configmaps.get((ns, str(ref.get("name"))))
        if cm is None:
            return None, None
        data = cm.get("data") or {}
        keys = [str(i.get("key")) for i in ref.get("items") or []] or sorted(data)
        key = None
        for candidate in (node_labels.get(CONFIG_LABEL), all_env.get("DEFAULT_CONFIG")):
            if candidate and candidate in data:
                key = candidate
                break
        if key is None and len(keys) == 1 and keys[0] in data:
            key = keys[0]
        if key is None:
            # NVIDIA/k8s-device-plugin cmd/config-manager: no label and no default.
            return None, "unable to select a config: no default config and no node label"
        parsed = _parse_config(str(data[key]), ns, str(ref.get("name")), key)
        if parsed.error:
            return None, f"unable to load config: {parsed.error}"
        replicas = 1
        for r in parsed.resources:
            if r.name == GPU and r.replicas:
                replicas = r.replicas
        renamed = parsed.rename_by_default and replicas > 1
        return PluginConfig(
            GPU + ".shared" if renamed else GPU, replicas, parsed.strategy, renamed
        ), None
    return PluginConfig(GPU, 1, "none", False, sharing=False), None


@functools.lru_cache(maxsize=256)
def _parse_config(text: str, namespace: str, name: str, key: str) -> TimeSlicingConfig:
    # Every kubelet reads the same few configs on every pass; parse each text once.
    return parse_device_plugin_config(
        text,
        config_map=name,
        key=key,
        namespace=namespace,
        form="configmap",
        active=True,
        source=Source(f"ConfigMap/{namespace}/{name}", 0, 0, Path(".")),
    )


def dra_mode(main: Obj) -> tuple[ConsumableShares, str | None]:
    """The kubelet plugin's sharing mode from its env, or the error it exits with.

    ``CONSUMABLE_SHARES`` needs the ``ConsumableShares`` gate in ``FEATURE_GATES``
    (cmd/gpu-kubelet-plugin main.go validateCLIFlags; nvidia.md §2.2).
    """
    env = _env(main)
    gates: dict[str, bool] = {}
    for item in env.get("FEATURE_GATES", "").split(","):
        name, _, value = item.strip().partition("=")
        if name:
            gates[name] = value.strip().lower() == "true"
    raw = env.get("CONSUMABLE_SHARES")
    gate = gates.get("ConsumableShares", False)
    if raw not in (None, "", "disabled") and not gate:
        return (
            "disabled",
            "--consumable-shares requires feature gate ConsumableShares to be enabled",
        )
    try:
        mode = parse_consumable_shares(raw)
    except ConsumableSharesError as err:
        return "disabled", err.message
    return (mode if gate else "disabled"), None


@dataclass(slots=True)
class Endpoint:
    """A device-plugin resource registered with the device manager."""

    units: int
    replicas: int
    stopped_at: float | None = None
    zeroed: bool = False


@dataclass(slots=True)
class PodState:
    """What the kubelet remembers about one of its pods."""

    start_at: float
    started: bool = False
    rejected: bool = False
    kill_at: float | None = None
    running_since: float = 0.0
    #: Crash-looping containers: how they end, restarts so far, back-off, next restart.
    crash: dict[str, CrashLoop] = field(default_factory=dict)
    #: Attempts of an init container that does not finish (the DRA prestart script).
    init_attempts: int = 0

    #: The volume manager's retry of a volume that cannot be mounted yet (its backoff).
    mount_retry_at: float = 0.0
    mount_backoff: float = 0.0
    #: When a Job's pod exits 0 (containers of other pods run until deleted).
    done_at: float | None = None
    #: The validation init container the pod waits in (an operand not ready on the node).
    gated: str | None = None


@dataclass(slots=True)
class CrashLoop:
    """One crash-looping container."""

    crash: Crash
    lines: list[str]
    restarts: int = 1
    backoff: int = _BACKOFF
    next_at: float = 0.0


@dataclass(slots=True)
class NodeAgent:
    """One node's kubelet state."""

    name: str
    index: int
    gpus: tuple[Gpu, ...]
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    #: Resources other device plugins registered (squat/generic-device-plugin).
    generic: dict[str, Endpoint] = field(default_factory=dict)
    ledger: GpuLedger = field(default_factory=lambda: GpuLedger([]))
    pods: dict[str, PodState] = field(default_factory=dict)
    registered: str | None = None  # the device-plugin pod uid that registered
    slice_mode: Any = None
    dra_ready: bool = False
    ips: int = 0
    #: The Running dcgm-exporter pod and its container, if any.
    dcgm: tuple[Obj, Obj] | None = None

    def release(self, key: str) -> None:
        """Free the device-plugin units a pod (``namespace/name``) held."""
        for card in self.ledger.cards:
            card.tenants[:] = [t for t in card.tenants if t.pod != key]

    def relayout(self, replicas: int) -> None:
        """Cards carry ``replicas`` units each from now on; tenants stay where they are."""
        old = {c.index: c.tenants for c in self.ledger.cards}
        self.ledger = GpuLedger(
            [CardLedger(g.minor, replicas, list(old.get(g.minor, []))) for g in self.gpus]
        )


def _gpu_requests(pod: Obj, resource: str) -> dict[str, int]:
    mapped = {
        m.get("containerName")
        for m in ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get(
            "requestMappings"
        )
        or []
        if m.get("resourceName") == resource
    }
    out: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        raw = (res.get("limits") or {}).get(resource, (res.get("requests") or {}).get(resource))
        amount = _units(raw) if raw is not None else 0
        if amount > 0 and c.get("name") not in mapped:
            out[str(c["name"])] = amount
    return out


@functools.lru_cache(maxsize=256)
def _units(raw: Any) -> int:
    # Every visit reads the same few request strings; parsing one is exact arithmetic.
    try:
        return int(common.quantity_value(raw))
    except (InputError, ValueError, TypeError):
        return 0  # the scheduler never binds such a pod


class Kubelet:
    """Every node's kubelet. Call :meth:`sync` once per pass."""

    def __init__(
        self,
        ctx: Context,
        gpus: dict[str, tuple[Gpu, ...]],
        *,
        faults: dict[str, str] | None = None,
        logbook: logs.LogBook | None = None,
    ) -> None:
        self.ctx = ctx
        self.gpus = gpus
        #: Scenario faults by node name (values from ``NODE_FAULTS``).
        self.faults = dict(faults or {})
        #: Every container's log, served as ``pods/log``.
        self.logs = logbook or logs.LogBook(ctx.clock.now)
        self.agents: dict[str, NodeAgent] = {}
        #: The config each started plugin or GFD pod loaded, by pod uid.
        self._loaded: dict[str, PluginConfig] = {}
        #: Per node, what its last pass saw (the node's and its pods' resourceVersions) and
        #: the earliest timer it set; a node whose inputs are the same and whose timer is not
        #: due is not visited again.
        self._seen: dict[str, tuple[tuple[str, ...], float | None]] = {}
        #: The newest change to the other kinds a kubelet reads, as of the last pass.
        self._inputs: tuple[int, ...] = ()
        #: False visits every node on every pass (the reference the skipping is tested against).
        self.incremental = True

    def agent(self, name: str, index: int) -> NodeAgent:
        """The kubelet state of node ``name`` (created on first use)."""
        agent = self.agents.get(name)
        if agent is None:
            agent = NodeAgent(name, index, self.gpus.get(name, ()))
            agent.relayout(1)
            self.agents[name] = agent
        return agent

    def restart(self, node: str) -> None:
        """Restart a node's kubelet: registered resources come back at 0 (from the
        checkpoint) until the device plugin registers again."""
        agent = self.agents.get(node)
        if agent is None:
            return
        now = self.ctx.now()
        for ep in [*agent.endpoints.values(), *agent.generic.values()]:
            ep.stopped_at = now
            ep.zeroed = True
        agent.registered = None
        for st in agent.pods.values():
            st.running_since = now
        self._seen.pop(node, None)

    def sync(self, *, pods: list[Obj], nodes: list[Obj]) -> None:
        """One pass over every node: pods, device plugin, DRA plugin, GFD, node status."""
        ctx = self.ctx
        by_node: dict[str, list[Obj]] = defaultdict(list)
        for p in pods:
            node = (p.get("spec") or {}).get("nodeName")
            if node:
                by_node[str(node)].append(p)
        configmaps: dict[tuple[str, str], Obj] | None = None
        slices = {}
        for s in ctx.list(ctx.kinds.slice):
            spec = s.get("spec") or {}
            if spec.get("driver") == DRIVER and spec.get("nodeName"):
                slices[str(spec["nodeName"])] = s
        inputs = tuple(ctx.store.changed_at(k) for k in _READS)
        if inputs != self._inputs:
            self._inputs = inputs
            self._seen.clear()
        now = ctx.now()
        for index, node in enumerate(nodes):
            name = node["metadata"]["name"]
            agent = self.agent(name, index)
            mine = by_node.get(name, [])
            seen = (
                str(node["metadata"].get("resourceVersion")),
                *(str(p["metadata"].get("resourceVersion")) for p in mine),
            )
            last = self._seen.get(name)
            if (
                self.incremental
                and last is not None
                and last[0] == seen
                and (last[1] is None or now < last[1])
            ):
                # Nothing this node's kubelet reads changed and no timer of it is due: a
                # visit would change nothing. Its timer still wakes the loop.
                if last[1] is not None:
                    ctx.wake_at(last[1])
                continue
            first_timer = len(ctx.wakeups)
            self._pods(agent, node, mine)
            roles: dict[str, tuple[Obj, Obj, PodState]] = {}
            generic: list[tuple[Obj, Obj, PodState]] = []
            for p in mine:
                st = agent.pods.get(p["metadata"]["uid"])
                if st is None or not st.started or p["metadata"].get("deletionTimestamp"):
                    continue
                r = role(p)
                if r is not None and str(r[1].get("name")) not in st.crash:
                    roles.setdefault(r[0], (p, r[1], st))
                for c in (p.get("spec") or {}).get("containers") or []:
                    if is_generic_plugin(c) and str(c.get("name")) not in st.crash:
                        generic.append((p, c, st))
            dcgm = roles.get("dcgm")
            agent.dcgm = (dcgm[0], dcgm[1]) if dcgm is not None else None
            needs_cm = "device-plugin" in roles or "gfd" in roles or bool(generic)
            if needs_cm and configmaps is None:
                configmaps = {
                    (c["metadata"]["namespace"], c["metadata"]["name"]): c
                    for c in ctx.list(ctx.kinds.configmap)
                }
            labels = dict(node["metadata"].get("labels") or {})
            self._device_plugin(agent, roles.get("device-plugin"), labels, configmaps or {})
            self._gfd(
                agent,
                node,
                roles.get("gfd") or roles.get("device-plugin"),
                labels,
                configmaps or {},
            )
            self._dra(agent, node, roles.get("dra"), slices.get(name))
            self._generic(agent, generic, configmaps or {})
            self._status(agent, node)
            timers = ctx.wakeups[first_timer:]
            self._seen[name] = (seen, min(timers) if timers else None)
        self.logs.forget({p["metadata"]["uid"] for p in pods})

    # -- pods --

    def _pods(self, agent: NodeAgent, node: Obj, pods: list[Obj]) -> None:
        ctx = self.ctx
        now = ctx.now()
        seen = set()
        for pod in pods:
            meta = pod["metadata"]
            uid = meta["uid"]
            seen.add(uid)
            key = f"{meta['namespace']}/{meta['name']}"
            st = agent.pods.get(uid)
            if meta.get("deletionTimestamp"):
                if st is None or not st.started:
                    agent.release(key)
                    _pods.release(ctx, pod, finalizer=KUBELET_FINALIZER)
                    agent.pods.pop(uid, None)
                elif st.kill_at is None:
                    grace = pod["spec"].get("terminationGracePeriodSeconds")
                    st.kill_at = now + (
                        ctx.delays.termination_grace if grace is None else float(grace)
                    )
                    _pods.killing(ctx, pod, node=agent.name)
                    ctx.wake_at(st.kill_at)
                elif now >= st.kill_at:
                    agent.release(key)
                    _pods.release(ctx, pod, finalizer=KUBELET_FINALIZER)
                    agent.pods.pop(uid, None)
                else:
                    ctx.wake_at(st.kill_at)
                continue
            phase = (pod.get("status") or {}).get("phase")
            if phase in TERMINAL:
                agent.release(key)
                continue
            if st is None:
                if phase == "Running":  # adopted after a restart of the twin
                    agent.pods[uid] = PodState(start_at=now, started=True, running_since=now)
                    self._assign(agent, pod, key)
                    continue
                failure = self._admit(agent, node, pod)
                if failure is not None:
                    agent.pods[uid] = PodState(start_at=now, rejected=True)
                    _pods.reject(ctx, pod, reason=failure[0], message=failure[1], node=agent.name)
                    continue
                self._assign(agent, pod, key)
                st = PodState(start_at=now + ctx.delays.pod_start)
                agent.pods[uid] = st
                agent.ips += 1
                host = next(
                    (
                        a["address"]
                        for a in (node.get("status") or {}).get("addresses") or []
                        if a.get("type") == "InternalIP"
                    ),
                    "10.0.0.2",
                )
                _pods.creating(ctx, pod, host_ip=host, pod_ip=pod_ip(agent.index, agent.ips))
                ctx.wake_at(st.start_at)
            elif st.started and st.done_at is not None:
                if now >= st.done_at:
                    st.done_at = None
                    _pods.completed(ctx, pod)
                else:
                    ctx.wake_at(st.done_at)
            elif not st.started and not st.rejected:
                if now < st.start_at:
                    ctx.wake_at(st.start_at)
                    continue
                blocked = _volumes.unmountable(ctx, pod)
                if blocked is not None:
                    # Retried with the operation executor's backoff (500 ms doubling to
                    # 2m2s); the pass that follows the missing object's creation mounts it.
                    if now >= st.mount_retry_at:
                        ctx.event(
                            pod,
                            reason="FailedMount",
                            warning=True,
                            component=_pods.KUBELET,
                            host=agent.name,
                            message=blocked,
                        )
                        st.mount_backoff = min(max(st.mount_backoff * 2, 0.5), 122.0)
                        st.mount_retry_at = now + st.mount_backoff
                    ctx.wake_at(st.mount_retry_at)
                    continue
                if not self._prepared(agent, pod):
                    st.start_at = now + 5
                    ctx.wake_at(st.start_at)
                    continue
                waiting = self._validation(agent, node, pod, pods)
                if waiting is not None:
                    if st.gated != waiting:
                        st.gated = waiting
                        _pods.initializing(ctx, pod, init=waiting)
                    st.start_at = now + 5  # the validator's poll
                    ctx.wake_at(st.start_at)
                    continue
                r = role(pod)
                if r is not None and r[0] == "dra" and self._prestart(agent, pod, st):
                    continue
                crashed: dict[str, Crash] = {}
                if r is not None and r[0] == "dra":
                    _, error = dra_mode(r[1])
                    if error is not None:
                        crashed[str(r[1]["name"])] = Crash(error)
                elif r is not None and r[0] == "device-plugin":
                    cms = {
                        (c["metadata"]["namespace"], c["metadata"]["name"]): c
                        for c in ctx.list(ctx.kinds.configmap)
                    }
                    cfg, error = device_plugin_config(
                        pod,
                        main=r[1],
                        node_labels=node["metadata"].get("labels") or {},
                        configmaps=cms,
                    )
                    if cfg is None and error is None:
                        st.start_at = now + 5  # the ConfigMap volume cannot be mounted yet
                        ctx.wake_at(st.start_at)
                        continue
                    if error is not None:
                        crashed[str(r[1]["name"])] = Crash(error)
                lines = self._start_logs(agent, pod, r, crashed)
                st.started = True
                st.running_since = now
                for cname, crash in crashed.items():
                    st.crash[cname] = CrashLoop(crash, lines.get(cname, []), next_at=now + _BACKOFF)
                    ctx.wake_at(now + _BACKOFF)
                _pods.running(ctx, pod, node=agent.name, crashed=crashed)
                if _runs_to_completion(pod) and not crashed:
                    st.done_at = now + ctx.delays.job_run
                    ctx.wake_at(st.done_at)
            elif st.started and st.crash:
                self._crash_loop(agent, pod, st)
        for uid in [u for u in agent.pods if u not in seen]:
            del agent.pods[uid]
        live = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods}
        for card in agent.ledger.cards:
            card.tenants[:] = [t for t in card.tenants if t.pod in live]

    def _validation(self, agent: NodeAgent, node: Obj, pod: Obj, pods: list[Obj]) -> str | None:
        """The first GPU Operator validation init container of ``pod`` whose operand is not
        yet running on this node, or None."""
        ns = str(pod["metadata"].get("namespace"))
        labels = node["metadata"].get("labels") or {}
        for c in (pod.get("spec") or {}).get("initContainers") or []:
            operand = _VALIDATIONS.get(str(c.get("name")))
            if operand is None or _VALIDATOR_IMAGE not in str(c.get("image", "")):
                continue
            try:
                ds = self.ctx.store.get(self.ctx.kinds.daemonset, name=operand, namespace=ns)
            except ApiError:
                continue  # not deployed: on the host
            selector = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
            wanted = selector.get("nodeSelector") or {}
            if any(labels.get(k) != v for k, v in wanted.items()):
                continue  # not on this node: on the host here
            if not any(self._runs(agent, p, operand) for p in pods):
                return str(c["name"])
        return None

    def _runs(self, agent: NodeAgent, pod: Obj, daemonset: str) -> bool:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or not any(
            o.get("kind") == "DaemonSet" and o.get("name") == daemonset
            for o in meta.get("ownerReferences") or []
        ):
            return False
        st = agent.pods.get(meta["uid"])
        return st is not None and st.started and not st.crash

    # -- logs, crash loops, the DRA prestart script --

    def _start_logs(
        self,
        agent: NodeAgent,
        pod: Obj,
        found: tuple[str, Obj] | None,
        crashed: dict[str, Crash],
    ) -> dict[str, list[str]]:
        """Start every container's log; a scenario fault may make the agent crash (added to
        ``crashed``). Returns the lines each container printed."""
        now = self.ctx.clock.now()
        fault = self.faults.get(agent.name) if agent.gpus else None
        uid = pod["metadata"]["uid"]
        out: dict[str, list[str]] = {}
        main = str(found[1].get("name")) if found is not None else None
        kind = found[0] if found is not None else None
        lines: list[str] = []
        if kind == "device-plugin":
            lines = logs.device_plugin_start(now)
            if fault == "nvml-init-failure":
                lines += logs.nvml_failure(now)
                crashed[str(main)] = Crash(f"nvml init failed: {logs.NVML_ERROR}")
        elif kind == "gfd":
            lines = logs.gfd_start(now)
            if fault == "nvml-init-failure":
                lines += logs.nvml_failure(now, component="gfd")
                crashed[str(main)] = Crash(f"failed to initialize NVML: {logs.NVML_ERROR}")
        elif kind == "dra":
            lines = logs.dra_plugin_start(now, node=agent.name)
            if fault == "nvml-init-failure":
                lines = [
                    logs.klog(
                        "E", now, "main.go:112", f"failed to initialize NVML: {logs.NVML_ERROR}"
                    )
                ]
                crashed[str(main)] = Crash(f"failed to initialize NVML: {logs.NVML_ERROR}")
        elif kind == "dcgm" and found is not None:
            dra = _env(found[1]).get("KUBERNETES_ENABLE_DRA", "").lower() == "true"
            lines = logs.dcgm_start(now, dra=dra)
            if dra and not self.dcgm_may_list_slices(agent.name, pod, found[1]):
                sa = (pod.get("spec") or {}).get("serviceAccountName") or "default"
                lines += logs.slices_forbidden(
                    now, namespace=pod["metadata"]["namespace"], service_account=sa
                )
        if main is not None and fault == "plugin-crashloop" and kind in ("device-plugin", "dra"):
            # The container is killed for memory right after it starts, run after run.
            crashed[main] = Crash("", reason="OOMKilled", exit_code=137)
        if main is not None and main in crashed and crashed[main].reason == "Error":
            error = crashed[main].message
            if not any(error in ln for ln in lines):
                lines.append(logs.klog("E", now, "main.go:160", error))
        for c in _pods.containers(pod):
            name = str(c["name"])
            out[name] = lines if name == main else []
            self.logs.start(uid, name, out[name])
        return out

    def dcgm_may_list_slices(self, node: str, pod: Obj, container: Obj) -> bool:
        """Whether the dcgm-exporter pod on ``node`` can attribute DRA devices: the env switch,
        RBAC on ResourceSlices, and no ``dcgm-rbac-missing`` fault on its node."""
        from gpushift_twin.cluster._dcgm import dra_attribution

        if self.faults.get(node) == "dcgm-rbac-missing":
            return False
        return dra_attribution(self.ctx, pod=pod, container=container)

    def _crash_loop(self, agent: NodeAgent, pod: Obj, st: PodState) -> None:
        ctx = self.ctx
        now = ctx.now()
        uid = pod["metadata"]["uid"]
        for name, loop in st.crash.items():
            if now < loop.next_at:
                ctx.wake_at(loop.next_at)
                continue
            loop.restarts += 1
            loop.backoff = min(loop.backoff * 2, _MAX_BACKOFF)
            loop.next_at = now + loop.backoff
            self.logs.start(uid, name, loop.lines)
            _pods.restarted(
                ctx,
                pod,
                node=agent.name,
                container=name,
                crash=loop.crash,
                restarts=loop.restarts,
                backoff=loop.backoff,
            )
            ctx.wake_at(loop.next_at)

    def _prestart(self, agent: NodeAgent, pod: Obj, st: PodState) -> bool:
        """Run the DRA plugin's prestart init container; True while it has not finished (the
        driver is not found under the driver root, re-checked every 10 s)."""
        inits = (pod.get("spec") or {}).get("initContainers") or []
        if not inits:
            return False
        init = inits[0]
        name = str(init["name"])
        root = _env(init).get("NVIDIA_DRIVER_ROOT") or "/"
        uid = pod["metadata"]["uid"]
        now = self.ctx.clock.now()
        missing = agent.gpus and self.faults.get(agent.name) == "driver-root-missing"
        if not self.logs.started(uid, name):
            self.logs.start(uid, name, logs.prestart_begin(root))
            if missing:
                _pods.initializing(self.ctx, pod, init=name)
        self.logs.write(
            uid,
            name,
            logs.prestart_attempt(now, root=root, attempt=st.init_attempts, found=not missing),
        )
        st.init_attempts += 1
        if not missing:
            return False
        st.start_at = self.ctx.now() + _PRESTART_WAIT
        self.ctx.wake_at(st.start_at)
        return True

    def _admit(self, agent: NodeAgent, node: Obj, pod: Obj) -> tuple[str, str] | None:
        # Device manager first (devicemanager manager.go devicesToAllocate), then the
        # predicate admit handler for resources no plugin ever registered (predicate.go).
        capacity = (node.get("status") or {}).get("capacity") or {}
        for resource in {GPU, GPU + ".shared"}:
            want = sum(_gpu_requests(pod, resource).values())
            if not want:
                continue
            ep = agent.endpoints.get(resource)
            if ep is not None:
                healthy = ep.units if ep.stopped_at is None else 0
                used = (
                    sum(len(c.tenants) for c in agent.ledger.cards)
                    if resource == self._dp_resource(agent)
                    else 0
                )
                available = max(healthy - used, 0)
                if want > available:
                    return (
                        "UnexpectedAdmissionError",
                        f"Allocate failed due to requested number of devices unavailable "
                        f"for {resource}. Requested: {want}, Available: {available}, "
                        "which is unexpected",
                    )
            elif resource not in capacity or int(str(capacity.get(resource, 0))) < want:
                cap = int(str(capacity.get(resource, 0)))
                return (
                    f"OutOf{resource}",
                    f"Node didn't have enough resource: {resource}, requested: {want}, "
                    f"used: 0, capacity: {cap}",
                )
        return None

    def _dp_resource(self, agent: NodeAgent) -> str | None:
        live = [r for r, ep in agent.endpoints.items() if ep.stopped_at is None]
        return live[0] if live else None

    def _assign(self, agent: NodeAgent, pod: Obj, key: str) -> None:
        resource = self._dp_resource(agent) or GPU
        for container, count in _gpu_requests(pod, resource).items():
            agent.ledger.assign(pod=key, container=container, count=count)

    def _prepared(self, agent: NodeAgent, pod: Obj) -> bool:
        # kubelet DRA manager PrepareResources: a claim on a driver not registered here fails.
        if not (pod.get("spec") or {}).get("resourceClaims") and not (
            (pod.get("status") or {}).get("extendedResourceClaimStatus")
        ):
            return True
        names = [
            s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        ]
        names += [pc.get("resourceClaimName") for pc in pod["spec"].get("resourceClaims") or []]
        ext = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        names.append(ext.get("resourceClaimName"))
        ns = pod["metadata"]["namespace"]
        for n in filter(None, names):
            try:
                claim = self.ctx.store.get(self.ctx.kinds.claim, name=str(n), namespace=ns)
            except ApiError:
                continue
            results = (
                ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            ).get("results") or []
            if any(r.get("driver") == DRIVER for r in results) and not agent.dra_ready:
                self.ctx.event(
                    pod,
                    reason="FailedPrepareDynamicResources",
                    warning=True,
                    component=_pods.KUBELET,
                    host=agent.name,
                    message="Failed to prepare dynamic resources: DRA driver "
                    f"{DRIVER} is not registered",
                )
                return False
        return True

    # -- device plugin --

    def _running_config(
        self,
        pod: Obj,
        main: Obj,
        *,
        labels: dict[str, str],
        configmaps: dict[tuple[str, str], Obj],
    ) -> PluginConfig | None:
        """The config a started plugin (or GFD) pod runs with.

        A running pod keeps the config it loaded when its ConfigMap is deleted: the kubelet
        leaves the projected files of a missing ConfigMap in place.
        """
        uid = pod["metadata"]["uid"]
        config, error = device_plugin_config(
            pod, main=main, node_labels=labels, configmaps=configmaps
        )
        if config is None and error is None:
            return self._loaded.get(uid)
        if config is not None:
            self._loaded[uid] = config
        return config

    def _device_plugin(
        self,
        agent: NodeAgent,
        found: tuple[Obj, Obj, PodState] | None,
        labels: dict[str, str],
        configmaps: dict[tuple[str, str], Obj],
    ) -> None:
        ctx = self.ctx
        now = ctx.now()
        config = None
        if found is not None and agent.gpus:
            pod, main, st = found
            config = self._running_config(pod, main, labels=labels, configmaps=configmaps)
            if config is not None and now < st.running_since + ctx.delays.plugin_register:
                ctx.wake_at(st.running_since + ctx.delays.plugin_register)
                config = None
        for resource, ep in agent.endpoints.items():
            if config is not None and resource == config.resource:
                continue
            if ep.stopped_at is None:
                ep.stopped_at = now  # PluginDisconnected: every device unhealthy
            if not ep.zeroed:
                due = ep.stopped_at + ctx.delays.device_plugin_grace
                if now >= due:
                    ep.zeroed = True
                else:
                    ctx.wake_at(due)
        if config is not None and found is not None:
            units = len(agent.gpus) * config.replicas
            current = agent.endpoints.get(config.resource)
            if current is None or current.stopped_at is not None or current.units != units:
                agent.endpoints[config.resource] = Endpoint(units, config.replicas)
                agent.relayout(config.replicas)
                self.logs.write(
                    found[0]["metadata"]["uid"],
                    str(found[1].get("name")),
                    logs.device_plugin_registered(ctx.clock.now(), config.resource),
                )

    def _gfd(
        self,
        agent: NodeAgent,
        node: Obj,
        found: tuple[Obj, Obj, PodState] | None,
        labels: dict[str, str],
        configmaps: dict[tuple[str, str], Obj],
    ) -> None:
        if found is None or not agent.gpus:
            return
        pod, main, _ = found
        config = self._running_config(pod, main, labels=labels, configmaps=configmaps)
        if config is None:
            return
        want = _gfd.labels(
            agent.gpus,
            replicas=config.replicas if config.sharing else 0,
            strategy=config.strategy,
            renamed=config.renamed,
        )
        if all(labels.get(k) == v for k, v in want.items()):
            return

        def mutate(cur: Obj) -> Obj:
            cur["metadata"]["labels"] = {**(cur["metadata"].get("labels") or {}), **want}
            return cur

        with contextlib.suppress(ApiError):
            self.ctx.store.update(self.ctx.kinds.node, name=agent.name, mutate=mutate)

    # -- DRA kubelet plugin --

    def _dra(
        self,
        agent: NodeAgent,
        node: Obj,
        found: tuple[Obj, Obj, PodState] | None,
        published: Obj | None,
    ) -> None:
        ctx = self.ctx
        mode: Any = None
        if found is not None and agent.gpus:
            _pod, main, st = found
            parsed, error = dra_mode(main)
            due = st.running_since + ctx.delays.slice_publish
            if error is None and ctx.now() >= due:
                mode = parsed
            elif error is None:
                ctx.wake_at(due)
        agent.dra_ready = mode is not None
        if mode is None:
            if published is not None:
                with contextlib.suppress(ApiError):
                    ctx.store.delete(ctx.kinds.slice, name=published["metadata"]["name"])
            agent.slice_mode = None
            return
        generation = int(((published or {}).get("spec") or {}).get("pool", {}).get("generation", 0))
        want: Any = nvidia_resource_slice(
            node_name=agent.name,
            gpus=[g.info() for g in agent.gpus],
            sharing=mode,
            generation=max(generation, 1),
        )
        want["metadata"]["ownerReferences"][0]["uid"] = node["metadata"]["uid"]
        if published is None:
            with contextlib.suppress(ApiError):
                ctx.store.create(ctx.kinds.slice, want)
        elif published.get("spec", {}).get("devices") != want["spec"]["devices"]:
            want["spec"]["pool"]["generation"] = generation + 1

            def mutate(cur: Obj) -> Obj:
                cur["spec"] = want["spec"]
                return cur

            with contextlib.suppress(ApiError):
                ctx.store.update(ctx.kinds.slice, name=published["metadata"]["name"], mutate=mutate)
        agent.slice_mode = mode

    # -- other device plugins --

    def _generic(
        self,
        agent: NodeAgent,
        running: list[tuple[Obj, Obj, PodState]],
        configmaps: dict[tuple[str, str], Obj],
    ) -> None:
        """The resources generic device plugins register on this node; as the NVIDIA
        plugin's, they turn unhealthy when the plugin goes and read 0 after the grace."""
        ctx = self.ctx
        now = ctx.now()
        want: dict[str, int] = {}
        for pod, container, st in running:
            due = st.running_since + ctx.delays.plugin_register
            if now < due:
                ctx.wake_at(due)
                continue
            # A second registration of a resource name replaces the first (devicemanager).
            want.update(generic_resources(pod, container, configmaps))
        for resource, ep in agent.generic.items():
            if resource in want:
                continue
            if ep.stopped_at is None:
                ep.stopped_at = now
            if not ep.zeroed:
                grace = ep.stopped_at + ctx.delays.device_plugin_grace
                if now >= grace:
                    ep.zeroed = True
                else:
                    ctx.wake_at(grace)
        for resource, units in want.items():
            current = agent.generic.get(resource)
            if current is None or current.stopped_at is not None or current.units != units:
                agent.generic[resource] = Endpoint(units, 1)

    # -- node status --

    def _status(self, agent: NodeAgent, node: Obj) -> None:
        status = node.get("status") or {}
        capacity = dict(status.get("capacity") or {})
        allocatable = dict(status.get("allocatable") or {})
        registered = {**agent.generic, **agent.endpoints}
        for resource, ep in registered.items():
            # nodestatus setters.go: a removed plugin's capacity is set to 0, never deleted.
            capacity[resource] = "0" if ep.zeroed else str(ep.units)
            allocatable[resource] = "0" if ep.stopped_at is not None else str(ep.units)
        if capacity == status.get("capacity") and allocatable == status.get("allocatable"):
            return

        def mutate(cur: Obj) -> Obj:
            st = cur.setdefault("status", {})
            st["capacity"] = {
                **(st.get("capacity") or {}),
                **{k: v for k, v in capacity.items() if k in registered},
            }
            st["allocatable"] = {
                **(st.get("allocatable") or {}),
                **{k: v for k, v in allocatable.items() if k in registered},
            }
            return cur

        with contextlib.suppress(ApiError):
            self.ctx.store.update(
                self.ctx.kinds.node, name=agent.name, mutate=mutate, subresource="status"
            )
