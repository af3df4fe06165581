"""etcd, kube-apiserver, kube-controller-manager and kube-scheduler on loopback, started and
stopped the way controller-runtime's envtest starts its control plane, with the controller
manager and the scheduler beside it.

Everything binds to 127.0.0.1 and advertises 127.0.0.1. The data directory (etcd's data,
certificates, logs) is a new temporary directory, on /dev/shm when there is one, and is
removed at stop. A directory left by a control plane whose owner was killed is removed by the
next start.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from gpushift._crds import custom_crds
from gpushift.upstream._paths import require_binaries
from gpushift.upstream._pki import Pki, kubeconfig, make_pki, write_kubeconfig
from gpushift.upstream._process import Component

#: Prefix of the data directories; the owner's pid is in ``owner.pid`` inside.
_PREFIX = "gpushift-upstream-"
#: The Service CIDR and the ``kubernetes`` Service's address in it (envtest's defaults).
SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
#: Starts tried when a component finds its port taken between picking and binding.
_START_ATTEMPTS = 3
_IN_USE = "address already in use"
#: kube-controller-manager's default: every controller that is on by default.
ALL_CONTROLLERS: tuple[str, ...] = ("*",)


class StartError(Exception):
    """A component did not come up; the message names it and ends with its last log lines."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _base_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _sweep(base: str | None) -> None:
    """Remove data directories whose owning process no longer runs."""
    root = Path(base or tempfile.gettempdir())
    for path in root.glob(f"{_PREFIX}*"):
        try:
            pid = int((path / "owner.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue


class Client:
    """Minimal JSON over HTTPS to kube-apiserver with the admin certificate (health and CRDs:
    what the control plane needs before any other client is used)."""

    def __init__(self, pki: Pki, port: int) -> None:
        self.port = port
        self.context = ssl.create_default_context(cafile=str(pki.ca_crt))
        self.context.load_cert_chain(str(pki.admin_crt), str(pki.admin_key))

    def request(
        self, method: str, path: str, body: object | None = None, *, timeout: float = 5.0
    ) -> tuple[int, Any]:
        """Send one request; returns the status and the decoded JSON (or text) body."""
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=timeout
        )
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw.decode("utf-8", "replace")


def _insecure_ok(port: int, path: str) -> bool:
    """GET https://127.0.0.1:port/path answers 200 (a component's own self-signed endpoint)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2.0)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _http_ok(port: int, path: str) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2.0)
    try:
        conn.request("GET", path)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


class ControlPlane:
    """A real Kubernetes control plane on loopback; a context manager.

    ``controllers`` is kube-controller-manager's ``--controllers``. ``scheduler=False`` leaves
    the scheduler out until :meth:`start_scheduler`, and ``controller_manager=False`` the
    controller manager until :meth:`start_controller_manager`: a loader can then write every
    object and status first, as on a cluster whose controllers were down.
    ``scheduler_config`` is merged into the KubeSchedulerConfiguration. ``progress`` is called
    with a short line as each component comes up.
    """

    def __init__(
        self,
        *,
        bin_dir: Path | None = None,
        port: int = 0,
        controller_manager: bool = True,
        controllers: Sequence[str] = ALL_CONTROLLERS,
        scheduler: bool = True,
        scheduler_config: Mapping[str, Any] | None = None,
        crds: bool = True,
        timeout: float = 60.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.bin_dir = require_binaries(bin_dir)
        self.port = port
        self.controller_manager = controller_manager
        self.controllers = tuple(controllers)
        self.scheduler = scheduler
        self.scheduler_config = dict(scheduler_config or {})
        self.crds = crds
        self.timeout = timeout
        self._progress = progress or (lambda _line: None)
        self.components: list[Component] = []
        self.directory: Path | None = None
        self.pki: Pki | None = None
        self.client: Client | None = None
        self.kubeconfig: Path | None = None
        #: Seconds each phase took at start: pki, etcd, apiserver, crds, controllers.
        self.timings: dict[str, float] = {}
        #: Inside :meth:`start`, which waits for the components it starts itself.
        self._starting = False

    @staticmethod
    def binaries(bin_dir: Path | None = None) -> Path:
        """The bin directory when every binary is there.

        Raises:
            NotBuiltError: one or more are missing; the message names `make upstream`.
        """
        return require_binaries(bin_dir)

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def server(self) -> str:
        """The API server's URL."""
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> ControlPlane:
        """Start every component and wait until each is healthy.

        Raises:
            StartError: a component exited or was not healthy within ``timeout`` seconds;
                everything started is stopped and the data directory removed.
        """
        asked = self.port
        for attempt in range(_START_ATTEMPTS):
            try:
                self._start()
            except StartError as err:
                self.stop()
                # Ports are picked free and bound by the component a moment later; another
                # process may take one in between. Only that failure is worth a new start.
                if _IN_USE not in str(err) or attempt + 1 == _START_ATTEMPTS:
                    raise
                self.port = asked
                self.timings.clear()
                continue
            except BaseException:
                self.stop()
                raise
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _start(self) -> None:
        begin = time.monotonic()
        base = _base_dir()
        _sweep(base)
        self.directory = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=base))
        (self.directory / "owner.pid").write_text(f"{os.getpid()}\n")
        pki = self.pki = make_pki(self.directory / "pki", service_ip=SERVICE_IP)
        if self.port == 0:
            self.port = _free_port()
        self.client = Client(pki, self.port)
        self.kubeconfig = write_kubeconfig(
            self.directory / "admin.kubeconfig", kubeconfig(pki, server=self.server)
        )
        self.timings["pki"] = time.monotonic() - begin

        t = time.monotonic()
        etcd_port, peer_port = _free_port(), _free_port()
        etcd = self._component(
            "etcd",
            self._etcd_args(etcd_port, peer_port),
            ready=lambda: _http_ok(etcd_port, "/health"),
        )
        apiserver = self._component(
            "kube-apiserver", self._apiserver_args(pki, etcd_port), ready=self._apiserver_ready
        )
        etcd.start()
        # kube-apiserver waits for etcd itself; starting both at once saves etcd's start.
        apiserver.start()
        self._wait(etcd)
        self.timings["etcd"] = time.monotonic() - t
        self._progress(f"etcd ready on 127.0.0.1:{etcd_port}")
        self._wait(apiserver)
        self.timings["apiserver"] = time.monotonic() - t
        self._progress(f"kube-apiserver ready on {self.server}")

        t = time.monotonic()
        self._starting = True
        try:
            if self.controller_manager:
                self.start_controller_manager()
            if self.scheduler:
                self.start_scheduler()
        finally:
            self._starting = False
        if self.crds:
            self._install_crds()
        self.timings["crds"] = time.monotonic() - t
        t = time.monotonic()
        for comp in self.components[2:]:
            self._wait(comp)
            self._progress(f"{comp.name} ready")
        self.timings["controllers"] = time.monotonic() - t
        self.timings["total"] = time.monotonic() - begin

    def stop(self) -> None:
        """Stop every component (last started first) and remove the data directory."""
        for comp in reversed(self.components):
            with contextlib.suppress(Exception):
                comp.stop()
        self.components.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def write_kubeconfig(self, path: Path) -> Path:
        """Write the admin kubeconfig to ``path`` (mode 0600)."""
        assert self.pki is not None, "start the control plane first"
        return write_kubeconfig(path, kubeconfig(self.pki, server=self.server))

    def start_scheduler(self) -> None:
        """Start kube-scheduler (when the control plane was made with ``scheduler=False``)."""
        assert self.directory is not None and self.kubeconfig is not None
        port = _free_port()
        config: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(self.kubeconfig)},
            "leaderElection": {"leaderElect": False},
            **self.scheduler_config,
        }
        path = self.directory / "scheduler.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        comp = self._component(
            "kube-scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                f"--config={path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                f"--cert-dir={self.directory / 'scheduler-certs'}",
            ],
            ready=lambda: _insecure_ok(port, "/readyz"),
        )
        comp.start()
        if not self._starting:  # started late: wait here
            self._wait(comp)

    def stop_scheduler(self) -> None:
        """Stop kube-scheduler; :meth:`start_scheduler` starts a new one (with empty caches)."""
        self._stop_component("kube-scheduler")

    def stop_controller_manager(self) -> None:
        """Stop kube-controller-manager; :meth:`start_controller_manager` starts a new one."""
        self._stop_component("kube-controller-manager")

    def _stop_component(self, name: str) -> None:
        for comp in [c for c in self.components if c.name == name]:
            comp.stop()
            self.components.remove(comp)

    def exited(self) -> list[Component]:
        """Components that have ended (none while the control plane is healthy)."""
        return [c for c in self.components if c.exited is not None]

    # --- components -----------------------------------------------------------------------

    def _component(
        self, name: str, argv: list[str], *, ready: Callable[[], bool] | None = None
    ) -> Component:
        assert self.directory is not None
        comp = Component(name, argv, log=self.directory / f"{name}.log", ready=ready)
        self.components.append(comp)
        return comp

    def _etcd_args(self, port: int, peer: int) -> list[str]:
        assert self.directory is not None
        client, peer_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer}"
        return [
            str(self.bin_dir / "etcd"),
            "--name=gpushift",
            f"--data-dir={self.directory / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=gpushift={peer_url}",
            # envtest's choice: a throwaway store needs no fsync.
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]

    def _apiserver_args(self, pki: Pki, etcd_port: int) -> list[str]:
        return [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={pki.apiserver_crt}",
            f"--tls-private-key-file={pki.apiserver_key}",
            f"--client-ca-file={pki.ca_crt}",
            f"--service-account-issuer=https://127.0.0.1:{self.port}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # No kube-proxy or endpoints here; the `kubernetes` Service keeps no endpoints.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
        ]

    def start_controller_manager(self) -> None:
        """Start kube-controller-manager (when made with ``controller_manager=False``)."""
        assert self.pki is not None and self.directory is not None
        port = _free_port()
        comp = self._component(
            "kube-controller-manager",
            [
                str(self.bin_dir / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.directory / 'kcm-certs'}",
                "--leader-elect=false",
                f"--service-account-private-key-file={self.pki.sa_key}",
                f"--root-ca-file={self.pki.ca_crt}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--controllers={','.join(self.controllers)}",
                "--profiling=false",
            ],
            ready=lambda: _insecure_ok(port, "/healthz"),
        )
        comp.start()
        if not self._starting:  # started late: wait here
            self._wait(comp)

    # --- waits ----------------------------------------------------------------------------

    def _wait(self, comp: Component) -> None:
        deadline = time.monotonic() + self.timeout
        delay = 0.02
        while True:
            code = comp.exited
            if code is not None:
                taken = " (address already in use)" if comp.mentions(_IN_USE) else ""
                raise StartError(f"{comp.name} exited with status {code}{taken}: {comp.tail()}")
            if comp.ready():
                return
            if time.monotonic() > deadline:
                raise StartError(
                    f"{comp.name} was not ready within {self.timeout:.0f} s: {comp.tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def _apiserver_ready(self) -> bool:
        assert self.client is not None
        try:
            status, _ = self.client.request("GET", "/readyz", timeout=2.0)
        except OSError:
            return False
        return status == 200

    def _install_crds(self) -> None:
        """Create gpushift's CRDs and wait until each is Established."""
        assert self.client is not None
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        names = []
        for body in custom_crds():
            status, answer = self.client.request("POST", path, body)
            if status not in (201, 409):
                raise StartError(f"creating CRD {body['metadata']}: {status} {answer}")
            names.append(str(body["metadata"]["name"]))  # type: ignore[index]
        deadline = time.monotonic() + self.timeout
        pending = set(names)
        while pending:
            for name in sorted(pending):
                status, crd = self.client.request("GET", f"{path}/{name}")
                conditions = (crd.get("status") or {}).get("conditions") or []
                if status == 200 and any(
                    c.get("type") == "Established" and c.get("status") == "True" for c in conditions
                ):
                    pending.discard(name)
            if pending and time.monotonic() > deadline:
                raise StartError(f"CRDs not Established: {', '.join(sorted(pending))}")
            if pending:
                time.sleep(0.05)
        self._progress(f"{len(names)} CustomResourceDefinitions established")
