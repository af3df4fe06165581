"""What the cluster looks like over a rehearsal, recorded from watches.

Three watches (Pods, Nodes, ResourceSlices) through ``gpushift.kube`` keep a small state;
every change that moves one of the figures (GPU pods Running, ``nvidia.com/gpu``
allocatable per node, ``gpu.nvidia.com`` ResourceSlices per node) appends a
:class:`Sample`. A fourth thread reads the invariant monitor's record
(``/twin/v1/violations``, as ``gpushift twin check-invariants`` does) once a second.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpushift import kube
from gpushift.common import Obj
from gpushift_twin.cluster import fetch_violations

GPU = "nvidia.com/gpu"
DRA_DRIVER = "gpu.nvidia.com"
_POD = kube.ResourceRef.named("Pod")
_NODE = kube.ResourceRef.named("Node")
_SLICE = kube.ResourceRef.named("ResourceSlice")


@dataclass(frozen=True, slots=True)
class Sample:
    """The figures at one instant, ``t`` wall seconds after the sampler's origin."""

    t: float
    gpu_pods_running: int
    allocatable: tuple[tuple[str, int], ...]
    slices: tuple[tuple[str, int], ...]
    violations_active: int


def _gpu_units(resources: Mapping[str, Any]) -> bool:
    return any(
        str(key).startswith(GPU)
        for part in ("limits", "requests")
        for key in resources.get(part) or {}
    )


def is_gpu_pod(pod: Obj) -> bool:
    """A pod that holds GPUs: a container asking ``nvidia.com/gpu`` (or a renamed shared
    resource such as ``nvidia.com/gpu.shared``), or a pod with resource claims."""
    spec = pod.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    return any(
        _gpu_units(c.get("resources") or {})
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
    )


def allocatable_gpus(node: Obj) -> int | None:
    """``status.allocatable["nvidia.com/gpu"]`` as a number; None when the key is absent."""
    value = ((node.get("status") or {}).get("allocatable") or {}).get(GPU)
    if value is None:
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def _gpu_node(node: Obj) -> bool:
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    return (
        GPU in (status.get("capacity") or {})
        or GPU in (status.get("allocatable") or {})
        or "nvidia.com/gpu.present" in labels
        or "nvidia.com/gpu.count" in labels
    )


class _State:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.pods: dict[str, bool] = {}  # ns/name -> Running GPU pod
        self.nodes: dict[str, int] = {}  # GPU node -> allocatable nvidia.com/gpu
        self.slices: dict[str, str] = {}  # slice name -> node
        self.active = 0

    def figures(self) -> tuple[int, tuple[tuple[str, int], ...], tuple[tuple[str, int], ...], int]:
        per_node: dict[str, int] = dict.fromkeys(self.nodes, 0)
        for node in self.slices.values():
            per_node[node] = per_node.get(node, 0) + 1
        return (
            sum(self.pods.values()),
            tuple(sorted(self.nodes.items())),
            tuple(sorted(per_node.items())),
            self.active,
        )


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def _apply_pod(state: _State, kind: str, pod: Obj) -> None:
    key = _key(pod)
    if kind == "DELETED" or not is_gpu_pod(pod):
        state.pods.pop(key, None)
        return
    state.pods[key] = (pod.get("status") or {}).get("phase") == "Running"


def _apply_node(state: _State, kind: str, node: Obj) -> None:
    name = str((node.get("metadata") or {}).get("name"))
    if kind == "DELETED":
        state.nodes.pop(name, None)
    elif name in state.nodes or _gpu_node(node):
        state.nodes[name] = allocatable_gpus(node) or 0


def _apply_slice(state: _State, kind: str, obj: Obj) -> None:
    spec = obj.get("spec") or {}
    key = _key(obj)
    if kind == "DELETED" or spec.get("driver") != DRA_DRIVER or not spec.get("nodeName"):
        state.slices.pop(key, None)
    else:
        state.slices[key] = str(spec["nodeName"])


_APPLY: dict[str, Callable[[_State, str, Obj], None]] = {
    "Pod": _apply_pod,
    "Node": _apply_node,
    "ResourceSlice": _apply_slice,
}


class Sampler:
    """Records :class:`Sample` values from watches until :meth:`stop`.

    Use as a context manager; :attr:`samples` and :attr:`violations` are complete once it
    has stopped. Watches resume from the last resourceVersion when a stream ends or fails
    (injected errors, dropped streams) and relist on 410 Gone, so no change is missed.
    """

    def __init__(
        self,
        kubeconfig: Path,
        *,
        origin: float | None = None,
        violations_every: float = 1.0,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.origin = time.monotonic() if origin is None else origin
        self.violations_every = violations_every
        self.samples: list[Sample] = []
        self.violations: list[Obj] = []
        self.errors: list[str] = []
        self._state = _State()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._clients: list[kube.Kube] = []
        self._synced: dict[str, threading.Event] = {}
        self._ready = False  # no sample until every watch has listed its kind once

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, *, timeout: float = 30.0) -> Sampler:
        """Start the watches and return once each has listed its kind once."""
        for ref in (_POD, _NODE, _SLICE):
            client = kube.connect(kubeconfig=self.kubeconfig, timeout=60.0)
            self._clients.append(client)
            synced = threading.Event()
            self._synced[ref.kind] = synced
            thread = threading.Thread(
                target=self._watch,
                args=(client, ref, synced),
                name=f"rehearse-watch-{ref.plural}",
                daemon=True,
            )
            self._threads.append(thread)
        poller = threading.Thread(
            target=self._poll_violations, name="rehearse-violations", daemon=True
        )
        self._threads.append(poller)
        for thread in self._threads:
            thread.start()
        deadline = time.monotonic() + timeout
        for synced in self._synced.values():
            synced.wait(max(deadline - time.monotonic(), 0.0))
        with self._state.lock:
            self._ready = True
            self._record(force=True)
        return self

    def stop(self, *, last_read: bool = True) -> None:
        """Stop the watches, read the monitor's record one last time (unless ``last_read`` is
        False), and join the threads."""
        if last_read:
            self._read_violations()
        self._stop.set()
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()
        # Closing the client does not interrupt a stream being read: a watch thread ends at
        # its next event or when the twin stops (it is a daemon and sees the stop flag then),
        # so the join is brief and bounded, not exhaustive. Samples are complete either way:
        # nothing is recorded after the flag is set.
        deadline = time.monotonic() + 0.5
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0.0))

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # On the way out of an error or an interrupt, no last request to a twin about to go.
        self.stop(last_read=exc_type is None)

    # --- reading -----------------------------------------------------------------------------

    def now(self) -> Sample:
        """The figures at this instant (also recorded when they differ from the last sample)."""
        with self._state.lock:
            return self._record(force=True)

    def _record(self, *, force: bool = False) -> Sample:
        pods, alloc, slices, active = self._state.figures()
        t = time.monotonic() - self.origin
        last = self.samples[-1] if self.samples else None
        sample = Sample(t, pods, alloc, slices, active)
        if not self._ready or self._stop.is_set():
            return sample
        if (
            force
            or last is None
            or (last.gpu_pods_running, last.allocatable, last.slices, last.violations_active)
            != (pods, alloc, slices, active)
        ):
            self.samples.append(sample)
            self._state.lock.notify_all()
        return sample

    def wait_for(self, until: Callable[[Sample], bool], *, timeout: float) -> Sample | None:
        """Block until a recorded sample satisfies ``until`` (checked on each change); returns
        it, or None after ``timeout`` wall seconds."""
        deadline = time.monotonic() + timeout
        with self._state.lock:
            seen = 0
            while True:
                for sample in self.samples[seen:]:
                    if until(sample):
                        return sample
                seen = len(self.samples)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._state.lock.wait(left)

    # --- threads -----------------------------------------------------------------------------

    def _watch(self, client: kube.Kube, ref: kube.ResourceRef, synced: threading.Event) -> None:
        apply = _APPLY[ref.kind]
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    items = client.list(ref)
                    with self._state.lock:
                        self._reset(ref.kind)
                        for obj in items:
                            apply(self._state, "ADDED", obj)
                        self._record()
                    rv = max(
                        (
                            str((o.get("metadata") or {}).get("resourceVersion") or "0")
                            for o in items
                        ),
                        key=int,
                        default="0",
                    )
                    synced.set()
                for kind, obj in client.watch(ref, resource_version=rv):
                    if self._stop.is_set():
                        return
                    if kind == "BOOKMARK":
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        continue
                    if kind == "ERROR":
                        rv = None  # 410 Gone (Expired): relist
                        break
                    with self._state.lock:
                        apply(self._state, kind, obj)
                        self._record()
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            except kube.KubeError as err:
                if self._stop.is_set():
                    return
                if err.code == 410:
                    rv = None
                self.errors.append(f"{ref.plural}: {err}")
                self._stop.wait(0.2)
            except Exception as err:  # stream torn by an injected fault or by stop()
                if self._stop.is_set():
                    return
                if getattr(getattr(err, "status", None), "code", None) == 410:
                    rv = None
                self.errors.append(f"{ref.plural}: {type(err).__name__}")
                self._stop.wait(0.2)

    def _reset(self, kind: str) -> None:
        state = self._state
        if kind == "Pod":
            state.pods.clear()
        elif kind == "Node":
            state.nodes.clear()
        else:
            state.slices.clear()

    def _read_violations(self) -> None:
        try:
            record = fetch_violations(self.kubeconfig)
        except OSError as err:
            self.errors.append(f"violations: {err}")
            return
        items = [v for v in record.get("items") or [] if isinstance(v, dict)]
        with self._state.lock:
            self.violations = items
            self._state.active = sum(1 for v in items if v.get("active"))
            self._record()

    def _poll_violations(self) -> None:
        while not self._stop.wait(self.violations_every):
            self._read_violations()
