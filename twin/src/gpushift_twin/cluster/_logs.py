"""Container logs of the cluster twin: what each NVIDIA agent prints, and where it is kept.

:class:`LogBook` keeps every container's runs (the current one and the ones before it, for
``previous``) and serves them to the API server's ``pods/log``. The line builders print what
the real agents print in the states the twin models:

- NVIDIA/k8s-device-plugin (klog): start, config, registration with the kubelet, and the NVML
  failure block of its resource-manager factory;
- dra-driver-nvidia-gpu ``hack/kubelet-plugin-prestart.sh``: the init container's driver
  search every 10 s, its common error and hints;
- dcgm-exporter (logrus): start, and client-go's reflector when its service account may not
  list ResourceSlices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal

Line = tuple[datetime, str]
Level = Literal["I", "W", "E"]

#: How many runs of one container are kept (the current one and a few before it).
_RUNS_KEPT = 3
#: An NVML error the kernel modules' absence produces (go-nvml's ERROR_DRIVER_NOT_LOADED).
NVML_ERROR = "ERROR_DRIVER_NOT_LOADED"


class LogBook:
    """Thread-safe container logs, by pod uid and container name, on the cluster's clock."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._runs: dict[tuple[str, str], list[list[Line]]] = {}

    def now(self) -> datetime:
        """The cluster's current time."""
        return self._now()

    def start(self, uid: str, container: str, lines: Sequence[str] = ()) -> None:
        """A new run of the container begins, printing ``lines``."""
        at = self._now()
        with self._lock:
            runs = self._runs.setdefault((uid, container), [])
            runs.append([(at, text) for text in lines])
            del runs[:-_RUNS_KEPT]

    def write(self, uid: str, container: str, lines: Sequence[str]) -> None:
        """The current run prints more lines (a run is started if there is none)."""
        at = self._now()
        with self._lock:
            runs = self._runs.setdefault((uid, container), [[]])
            runs[-1].extend((at, text) for text in lines)

    def started(self, uid: str, container: str) -> bool:
        """Whether the container has run at all."""
        with self._lock:
            return (uid, container) in self._runs

    def lines(self, *, uid: str, container: str, previous: bool) -> Sequence[Line] | None:
        """The current run's lines, or the previous run's; None when there is no such run."""
        with self._lock:
            runs = self._runs.get((uid, container))
            if not runs:
                return None
            if previous:
                return list(runs[-2]) if len(runs) > 1 else None
            return list(runs[-1])

    def forget(self, uids: set[str]) -> None:
        """Drop the logs of pods that are gone (the kubelet removes their log files)."""
        with self._lock:
            for key in [k for k in self._runs if k[0] not in uids]:
                del self._runs[key]


def klog(level: Level, now: datetime, source: str, message: str) -> str:
    """One klog line: ``I1201 15:10:53.000000       1 main.go:235] message``."""
    return f"{level}{now:%m%d %H:%M:%S.%f} {1:>7} {source}] {message}"


def logrus(level: str, now: datetime, message: str, **fields: str) -> str:
    """One logrus text line: ``time="…" level=info msg="…" key="value"``."""
    extra = "".join(f' {k}="{v}"' for k, v in fields.items())
    return f'time="{now:%Y-%m-%dT%H:%M:%SZ}" level={level} msg="{message}"{extra}'


# -- NVIDIA/k8s-device-plugin (cmd/nvidia-device-plugin main.go, internal/rm factory.go) --


def device_plugin_start(now: datetime) -> list[str]:
    """From start to the point where the plugin looks for GPUs."""
    return [
        klog("I", now, "main.go:235", "Starting NVIDIA Device Plugin"),
        klog("I", now, "main.go:238", "Starting FS watcher for /var/lib/kubelet/device-plugins"),
        klog("I", now, "main.go:245", "Starting OS watcher."),
        klog("I", now, "main.go:260", "Starting Plugins."),
        klog("I", now, "main.go:317", "Loading configuration."),
        klog("I", now, "main.go:342", "Updating config with default resource matching patterns."),
        klog("I", now, "main.go:356", "Retrieving plugins."),
    ]


def device_plugin_registered(now: datetime, resource: str) -> list[str]:
    """The plugin serves ``resource`` and registered it with the kubelet."""
    sock = "nvidia-gpu.sock" if resource == "nvidia.com/gpu" else "nvidia-gpu-shared.sock"
    return [
        klog("I", now, "server.go:165", f"Starting GRPC server for '{resource}'"),
        klog(
            "I",
            now,
            "server.go:117",
            f"Starting to serve '{resource}' on /var/lib/kubelet/device-plugins/{sock}",
        ),
        klog("I", now, "server.go:125", f"Registered device plugin for '{resource}' with Kubelet"),
    ]


def nvml_failure(now: datetime, *, component: str = "plugin") -> list[str]:
    """NVML cannot initialise (kernel modules not loaded): the factory's hint block, then the
    error the process exits with (``failOnInitError`` defaults to true)."""
    fatal = (
        f"error starting plugins: error creating plugin manager: unable to create plugin "
        f"manager: nvml init failed: {NVML_ERROR}"
        if component == "plugin"
        else f"failed to initialize NVML: {NVML_ERROR}"
    )
    return [
        klog("E", now, "factory.go:68", f"Failed to initialize NVML: {NVML_ERROR}."),
        klog(
            "E",
            now,
            "factory.go:69",
            "If this is a GPU node, did you set the docker default runtime to `nvidia`?",
        ),
        klog(
            "E",
            now,
            "factory.go:70",
            "You can check the prerequisites at: "
            "https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
        ),
        klog(
            "E",
            now,
            "factory.go:71",
            "You can learn how to set the runtime at: "
            "https://github.com/NVIDIA/k8s-device-plugin#quick-start",
        ),
        klog(
            "E",
            now,
            "factory.go:72",
            "If this is not a GPU node, you should set up a toleration or nodeSelector to only "
            "deploy this plugin on GPU nodes",
        ),
        klog("E", now, "main.go:160", fatal),
    ]


def gfd_start(now: datetime) -> list[str]:
    """GPU feature discovery starting (same repository, same logger)."""
    return [
        klog("I", now, "main.go:163", "Starting OS watcher."),
        klog("I", now, "main.go:168", "Loading configuration."),
        klog("I", now, "main.go:244", "Start running"),
    ]


# -- dra-driver-nvidia-gpu hack/kubelet-plugin-prestart.sh --


def _basename(root: str) -> str:
    trimmed = root.rstrip("/")
    return trimmed.rsplit("/", 1)[-1] if trimmed else ""


def prestart_begin(root: str) -> list[str]:
    """The script's first line: the /driver-root symlink."""
    return [f"create symlink: /driver-root -> /driver-root-parent/{_basename(root)}"]


def prestart_attempt(now: datetime, *, root: str, attempt: int, found: bool) -> list[str]:
    """One pass of ``validate_and_exit_on_success``: found and left, or not found (with the
    common error and hints every sixth attempt)."""
    stamp = f"{now:%Y-%m-%dT%H:%M:%SZ}"
    if found:
        smi, lib = "/driver-root/bin/nvidia-smi", "/driver-root/lib64/libnvidia-ml.so.1"
        return [
            f"{stamp}  /driver-root ({root} on host): nvidia-smi: '{smi}', "
            f"libnvidia-ml.so.1: '{lib}', current contents: [bin lib lib64 share].",
            f"invoke: env -i LD_PRELOAD={lib} {smi} ",
            "nvidia-smi returned with code 0: success, leave",
        ]
    contents = (
        "" if root != "/" else "bin boot dev etc home lib lib64 opt proc root run sys usr var"
    )
    lines = [
        f"{stamp}  /driver-root ({root} on host): nvidia-smi: not found, "
        f"libnvidia-ml.so.1: not found, current contents: [{contents}]."
    ]
    if attempt % 6 != 0:
        return lines
    lines += [
        "",
        "Check failed. Has the NVIDIA GPU driver been set up? It is expected to be installed "
        f"under NVIDIA_DRIVER_ROOT (currently set to '{root}') in the host filesystem. If that "
        "path appears to be unexpected: review the DRA driver's 'nvidiaDriverRoot' Helm chart "
        "variable. Otherwise, review if the GPU driver has actually been installed under that "
        "path.",
    ]
    if root != "/":
        lines.append(f"Hint: Directory {root} on the host is empty")
    if root == "/run/nvidia/driver":
        lines.append(
            "Hint: NVIDIA_DRIVER_ROOT is set to '/run/nvidia/driver' which typically means that "
            "the NVIDIA GPU Operator manages the GPU driver. Make sure that the GPU Operator is "
            "deployed and healthy."
        )
    lines.append("")
    return lines


def dra_plugin_start(now: datetime, *, node: str) -> list[str]:
    """The ``gpus`` container of the DRA kubelet plugin starting and publishing its pool."""
    return [
        klog("I", now, "main.go:245", '"Starting gpu-kubelet-plugin"'),
        klog(
            "I",
            now,
            "driver.go:104",
            f'"Publishing resources" driver="gpu.nvidia.com" node="{node}"',
        ),
    ]


# -- dcgm-exporter (logrus) and client-go's reflector --


def dcgm_start(now: datetime, *, dra: bool) -> list[str]:
    """dcgm-exporter starting, with Kubernetes (and DRA) attribution enabled."""
    lines = [
        logrus("info", now, "Starting dcgm-exporter"),
        logrus("info", now, "DCGM successfully initialized!"),
        logrus("info", now, "Collecting DCP Metrics"),
        logrus("info", now, "Initializing system entities of type: GPU"),
        logrus("info", now, "Kubernetes metrics collection enabled!"),
    ]
    if dra:
        lines.append(logrus("info", now, "Kubernetes DRA resource mapping enabled"))
    return [
        *lines,
        logrus("info", now, "Pipeline starting"),
        logrus("info", now, "Starting webserver"),
        logrus("info", now, "Listening on", address="[::]:9400"),
    ]


def slices_forbidden(now: datetime, *, namespace: str, service_account: str) -> list[str]:
    """The ResourceSlice informer refused by RBAC (client-go tools/cache reflector.go)."""
    what = (
        f'resourceslices.resource.k8s.io is forbidden: User "system:serviceaccount:{namespace}:'
        f'{service_account}" cannot list resource "resourceslices" in API group '
        '"resource.k8s.io" at the cluster scope'
    )
    source = "k8s.io/client-go/informers/factory.go:160"
    return [
        klog(
            "W", now, "reflector.go:569", f"{source}: failed to list *v1beta1.ResourceSlice: {what}"
        ),
        klog(
            "E",
            now,
            "reflector.go:166",
            f'"Unhandled Error" err="{source}: Failed to watch *v1beta1.ResourceSlice: failed to '
            f'list *v1beta1.ResourceSlice: {what}" logger="UnhandledError"',
        ),
    ]
