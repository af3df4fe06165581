"""A ``gpushift twin serve`` subprocess on 127.0.0.1 for one rehearsal.

The twin runs in its own process (its agents and Flux then do not share this process's
interpreter lock with the sampler), with a kubeconfig in the rehearsal's temporary
directory, and is stopped with SIGTERM (SIGKILL to its process group after a grace) when the
rehearsal ends; the kernel sends it SIGKILL if the rehearsal dies first.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpushift import kube
from gpushift.common import die_with_parent
from gpushift_twin.rehearse._lifetime import Lifetime

_SERVING = "gpushift twin serving "
_PROXY_SERVING = "gpushift fault proxy serving "
_SOURCE = "flux source: "

#: Wall seconds the upstream twin gets to stop when the rehearsal ends without a signal.
_UPSTREAM_CLEAN_STOP = 60.0

#: The control planes a rehearsal runs on: the twin's own API server, or kube-apiserver,
#: kube-controller-manager and kube-scheduler as ``make upstream`` built them, with the twin's
#: node-side agents and Flux acting through it (docs/twin.md, "A real control plane").
CONTROL_PLANES = ("embedded", "upstream")


class TwinStartError(Exception):
    """The twin did not start or did not settle; the message says what it printed."""


def gpushift_argv() -> list[str]:
    """How to run this gpushift as a subprocess, whatever ``PATH`` holds."""
    return [sys.executable, "-m", "gpushift"]


@dataclass(frozen=True, slots=True)
class TwinOptions:
    """What the twin runs and the faults it injects (they pass through to ``twin serve``).

    On ``control_plane="upstream"`` the twin runs in real time (``time_scale`` is not passed)
    and injects no faults itself: ``twin serve`` refuses fault flags with agents on the real
    control plane, so :func:`running_proxy` puts ``gpushift twin proxy`` in front instead.
    """

    example: str | None = "homelab"
    repo: Path | None = None
    root: str | None = None
    nodes: Path | None = None
    #: ``--secret NS/NAME=FILE`` for ``twin serve`` (Secrets the repository does not produce).
    secrets: tuple[str, ...] = ()
    time_scale: float = 100.0
    error_rate: float = 0.0
    drop_watch_every: float = 0.0
    seed: int = 0
    access_log: bool = False
    extra: tuple[str, ...] = ()
    control_plane: str = "embedded"
    #: ``--flux-version 2.N`` for ``twin serve`` (None: the release it models by default).
    flux_version: str | None = None

    @property
    def upstream(self) -> bool:
        """Whether the twin's agents run on the upstream control plane."""
        return self.control_plane == "upstream"

    def argv(self, kubeconfig: Path) -> list[str]:
        """The ``gpushift twin serve`` command line."""
        out = [
            *gpushift_argv(),
            "twin",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--kubeconfig-out",
            str(kubeconfig),
        ]
        if self.upstream:
            # Real time, kube-apiserver's own names; the faults go to the proxy in front.
            out += ["--control-plane", "upstream"]
        else:
            out += ["--time-scale", f"{self.time_scale:g}", "--seed", str(self.seed)]
        if self.example is not None:
            out += ["--example", self.example]
        if self.repo is not None:
            out += ["--repo", str(self.repo)]
        if self.root is not None:
            out += ["--root", self.root]
        if self.nodes is not None:
            out += ["--nodes", str(self.nodes)]
        for secret in self.secrets:
            out += ["--secret", secret]
        if self.flux_version is not None:
            out += ["--flux-version", self.flux_version]
        if self.faulted and not self.upstream:
            out += self.fault_argv()
        if self.access_log:
            out.append("--access-log")
        return out + list(self.extra)

    @property
    def faulted(self) -> bool:
        """Whether a fault is asked for."""
        return self.error_rate > 0 or self.drop_watch_every > 0

    def fault_argv(self) -> list[str]:
        """The fault flags, as ``twin serve`` and ``twin proxy`` take them."""
        out: list[str] = []
        if self.error_rate > 0:
            out += ["--error-rate", f"{self.error_rate:g}"]
        if self.drop_watch_every > 0:
            out += ["--drop-watch-every", f"{self.drop_watch_every:g}"]
        return out

    def proxy_argv(self, kubeconfig: Path, proxy_kubeconfig: Path) -> list[str]:
        """The ``gpushift twin proxy`` command line: the faults in front of the twin whose
        kubeconfig is ``kubeconfig``, its clients' kubeconfig written to ``proxy_kubeconfig``."""
        return [
            *gpushift_argv(),
            "twin",
            "proxy",
            "--kubeconfig",
            str(kubeconfig),
            "--kubeconfig-out",
            str(proxy_kubeconfig),
            "--port",
            "0",
            "--seed",
            str(self.seed),
            *self.fault_argv(),
        ]


@dataclass(slots=True)
class TwinProcess:
    """A running twin: its kubeconfig, URL, the Flux source directory it started from, and
    where its output goes (``stdout``/``stderr`` files in the work directory)."""

    process: subprocess.Popen[bytes]
    kubeconfig: Path
    url: str
    source: Path | None
    stdout: Path
    stderr: Path
    started: float = field(default_factory=time.monotonic)
    lifetime: Lifetime = field(default_factory=Lifetime)
    #: Seconds between SIGTERM and SIGKILL when the rehearsal ends without a signal (None:
    #: the lifetime's grace, which bounds the way out of a Ctrl-C).
    clean_grace: float | None = None

    def stop(self, *, grace: float | None = None) -> int | None:
        """SIGTERM, then SIGKILL to its process group after ``grace`` seconds (the lifetime's
        default); returns the exit code."""
        self.lifetime.stop(self.process, grace=grace)
        return self.process.returncode


def get_json(kubeconfig: Path, path: str, *, timeout: float = 10.0) -> Any:
    """GET one of the twin's own endpoints (``/api/v1/query?…``) with the kubeconfig's
    server, bearer token and CA, as ``twin check-invariants`` reads ``/twin/v1/violations``.

    Raises:
        OSError: the twin cannot be reached or answered an error.
    """
    doc = yaml.safe_load(kubeconfig.read_text(encoding="utf-8")) or {}
    cluster = ((doc.get("clusters") or [{}])[0]).get("cluster") or {}
    user = ((doc.get("users") or [{}])[0]).get("user") or {}
    ca = cluster.get("certificate-authority-data")
    context = ssl.create_default_context(cadata=base64.b64decode(ca).decode()) if ca else None
    token = user.get("token")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(str(cluster.get("server", "")).rstrip("/") + path, headers=headers)
    with urllib.request.urlopen(req, context=context, timeout=timeout) as resp:
        return json.loads(resp.read())


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(text.strip().splitlines()[-lines:])


def _await_banner(
    proc: subprocess.Popen[bytes],
    *,
    what: str,
    banner: str,
    out: Path,
    err: Path,
    kubeconfig: Path,
    timeout: float,
    lifetime: Lifetime,
) -> str:
    """The URL ``proc`` announces on ``out`` after ``banner``, once ``kubeconfig`` exists.

    Raises:
        TwinStartError: it exited, or did not listen within ``timeout`` wall seconds.
    """
    deadline = time.monotonic() + timeout
    url = None
    while time.monotonic() < deadline:
        text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        for line in text.splitlines():
            if line.startswith(banner):
                url = line[len(banner) :].strip()
        if url is not None and kubeconfig.exists():
            return url
        if proc.poll() is not None:
            lifetime.stop(proc)
            raise TwinStartError(f"{what} exited with {proc.returncode}: {_tail(err)}")
        time.sleep(0.1)  # it announces itself only on stdout; nothing to watch yet
    lifetime.stop(proc, grace=0)
    raise TwinStartError(f"{what} did not listen within {timeout:g}s")


def start_twin(
    options: TwinOptions,
    *,
    workdir: Path,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
    lifetime: Lifetime | None = None,
) -> TwinProcess:
    """Start ``gpushift twin serve`` and return once it listens (not yet settled); it is
    ``lifetime``'s child (by default, one of its own).

    Raises:
        TwinStartError: it exited, or did not listen within ``timeout`` wall seconds.
    """
    kubeconfig = workdir / "twin.kubeconfig"
    out, err = workdir / "twin.stdout", workdir / "twin.stderr"
    argv = options.argv(kubeconfig)
    lifetime = lifetime or Lifetime()
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = lifetime.spawn(
            "upstream twin" if options.upstream else "twin",
            argv,
            death_signal=signal.SIGKILL,
            stdout=fo,
            stderr=fe,
            stdin=subprocess.DEVNULL,
            env=env if env is not None else os.environ.copy(),
        )
    url = _await_banner(
        proc,
        what="gpushift twin serve",
        banner=_SERVING,
        out=out,
        err=err,
        kubeconfig=kubeconfig,
        timeout=timeout,
        lifetime=lifetime,
    )
    source = options.repo
    for line in err.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(_SOURCE):
            source = Path(line[len(_SOURCE) :].strip())
    # The upstream twin stops etcd, kube-apiserver and its kin and removes their data
    # directory: about 10 s on two cores, longer than a Ctrl-C's way out may take.
    clean_grace = _UPSTREAM_CLEAN_STOP if options.upstream else None
    return TwinProcess(
        proc, kubeconfig, url, source, out, err, lifetime=lifetime, clean_grace=clean_grace
    )


def wait_settled(twin: TwinProcess, *, timeout: float) -> list[str]:
    """Wait until the twin's Flux has settled (``gpushift twin wait-ready``'s test); returns
    what is still not Ready when ``timeout`` wall seconds pass (empty when settled)."""
    from gpushift_twin.flux import wait_ready

    with kube.connect(kubeconfig=twin.kubeconfig) as client:
        return wait_ready(client, timeout=timeout, poll=0.5)


@contextlib.contextmanager
def running_twin(
    options: TwinOptions,
    *,
    workdir: Path,
    settle: float | None = 300.0,
    env: dict[str, str] | None = None,
    lifetime: Lifetime | None = None,
) -> Iterator[TwinProcess]:
    """Start a twin, wait for it to settle (unless ``settle`` is None), stop it on exit;
    ``env`` is the twin process's environment (default: this one's).

    Raises:
        TwinStartError: it did not start, or did not settle within ``settle`` seconds.
    """
    twin = start_twin(options, workdir=workdir, env=env, lifetime=lifetime)
    try:
        if settle is not None:
            pending = wait_settled(twin, timeout=settle)
            if pending:
                raise TwinStartError(
                    f"the twin did not settle within {settle:g}s: {'; '.join(pending[:3])}"
                )
        yield twin
    finally:
        twin.stop(grace=None if twin.lifetime.interrupted else twin.clean_grace)


@contextlib.contextmanager
def running_proxy(
    options: TwinOptions,
    twin: TwinProcess,
    *,
    workdir: Path,
    timeout: float = 60.0,
    env: dict[str, str] | None = None,
) -> Iterator[Path]:
    """``gpushift twin proxy`` in front of ``twin`` with ``options``' faults, a child of the
    twin's lifetime (so Ctrl-C stops it too); yields its clients' kubeconfig and stops it on
    exit.

    Raises:
        TwinStartError: it exited, or did not listen within ``timeout`` wall seconds.
    """
    kubeconfig = workdir / "proxy.kubeconfig"
    out, err = workdir / "proxy.stdout", workdir / "proxy.stderr"
    lifetime = twin.lifetime
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = lifetime.spawn(
            "proxy",
            options.proxy_argv(twin.kubeconfig, kubeconfig),
            death_signal=signal.SIGKILL,
            stdout=fo,
            stderr=fe,
            stdin=subprocess.DEVNULL,
            env=env if env is not None else os.environ.copy(),
        )
    try:
        _await_banner(
            proc,
            what="gpushift twin proxy",
            banner=_PROXY_SERVING,
            out=out,
            err=err,
            kubeconfig=kubeconfig,
            timeout=timeout,
            lifetime=lifetime,
        )
        yield kubeconfig
    finally:
        lifetime.stop(proc)


def command_available(argv: Sequence[str]) -> bool:
    """Whether ``argv + ["--help"]`` exits 0 (a gpushift subcommand exists)."""
    try:
        done = subprocess.run(
            [*argv, "--help"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
            preexec_fn=die_with_parent(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
