"""The fault proxy in the foreground: in front of an operator's cluster (``gpushift twin
proxy``) and in front of the upstream control plane (``gpushift twin serve --control-plane
upstream --bare`` with fault flags), until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import aiohttp
import aiohttp.web

from gpushift.common import InputError
from gpushift_twin.apiserver import (
    FaultConfig,
    FaultProxy,
    Faults,
    ProxyTarget,
    check_loopback,
    describe_error,
    new_token,
    self_signed,
    serve_forever,
    url_for,
    write_kubeconfig,
)


class UnreachableError(Exception):
    """The target API server did not answer (exit 3)."""


class ExitedError(Exception):
    """What the proxy fronts stopped while it served (exit 1); the message says what."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyOptions:
    """Where the proxy listens, where its clients' kubeconfig goes, and what it injects.

    ``pause_after`` seconds after it starts listening, the proxy holds every request (and
    every open stream) for ``pause_for`` seconds.
    """

    host: str = "127.0.0.1"
    port: int = 0
    kubeconfig_out: Path = Path("gpushift-proxy.kubeconfig")
    tls: bool = True
    faults: FaultConfig = field(default_factory=FaultConfig)
    pause_after: float | None = None
    pause_for: float = 10.0


def serve_proxy(
    target: ProxyTarget,
    options: ProxyOptions,
    *,
    banner: str = "gpushift fault proxy serving",
    probe: bool = True,
    watchdog: Callable[[], str | None] | None = None,
    routes: Callable[[aiohttp.web.Application], None] | None = None,
    token: str | None = None,
) -> None:
    """Serve a :class:`FaultProxy` in front of ``target`` until SIGINT or SIGTERM.

    ``routes`` adds endpoints the proxy answers itself; ``token`` is the one its clients
    present (a new one when None).

    Once listening, it writes its clients' kubeconfig to ``options.kubeconfig_out`` (mode
    0600: the proxy's URL, its CA and a token of its own, none of the target's credentials)
    and prints ``BANNER URL`` and an ``export KUBECONFIG=`` line. With ``probe`` it first asks
    the target for ``/version`` and raises :class:`UnreachableError` when it does not answer.
    ``watchdog`` is called every half second; a message from it ends the proxy with
    :class:`ExitedError`.

    Raises ``UsageError`` for an address off loopback and ``InputError`` for one in use.
    """
    check_loopback(listen=options.host, target=target.server)
    if not 0 <= options.faults.error_rate <= 1:
        raise InputError(f"--error-rate must be between 0 and 1, got {options.faults.error_rate:g}")
    asyncio.run(
        _main(
            target,
            options,
            banner=banner,
            probe=probe,
            watchdog=watchdog,
            routes=routes,
            token=token or new_token(),
        )
    )


async def _probe(proxy: FaultProxy) -> None:
    target = proxy.target
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    ssl_context = target.ssl_context()
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15)) as session,
            session.get(
                target.server + "/version",
                headers=headers,
                ssl=ssl_context if ssl_context is not None else False,
            ) as resp,
        ):
            await resp.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as err:
        raise UnreachableError(
            f"cannot reach the cluster: {target.server}: {describe_error(err)}"
        ) from None


async def _main(
    target: ProxyTarget,
    options: ProxyOptions,
    *,
    banner: str,
    probe: bool,
    watchdog: Callable[[], str | None] | None,
    routes: Callable[[aiohttp.web.Application], None] | None,
    token: str,
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    proxy = FaultProxy(target, token=token, faults=Faults(options.faults), routes=routes)
    if probe:
        await _probe(proxy)
    certificate = self_signed([options.host]) if options.tls else None
    exited: list[str] = []
    tasks: list[asyncio.Task[None]] = []

    def ready(bound: int) -> None:
        url = url_for(options.host, bound, tls=options.tls)
        write_kubeconfig(
            options.kubeconfig_out,
            server=url,
            token=token,
            ca_pem=certificate.cert_pem if certificate else None,
            name="gpushift-proxy",
        )
        print(f"{banner} {url}", flush=True)
        print(f"export KUBECONFIG={options.kubeconfig_out.resolve()}", flush=True)
        if options.pause_after is not None:
            loop.call_later(options.pause_after, proxy.faults.pause)
            loop.call_later(options.pause_after + options.pause_for, proxy.faults.resume)
        if watchdog is not None:
            tasks.append(loop.create_task(_watch(watchdog, stop, exited)))

    try:
        await serve_forever(
            proxy,
            host=options.host,
            port=options.port,
            certificate=certificate,
            on_ready=ready,
            stop=stop,
            handler_cancellation=True,
        )
    except OSError as err:
        raise InputError(
            f"cannot listen on {options.host}:{options.port}: {err.strerror or err}"
        ) from None
    for task in tasks:
        task.cancel()
    if exited:
        raise ExitedError(exited[0])


async def _watch(
    watchdog: Callable[[], str | None], stop: asyncio.Event, exited: list[str]
) -> None:
    while not stop.is_set():
        message = watchdog()
        if message is not None:
            exited.append(message)
            stop.set()
            return
        await asyncio.sleep(0.5)


def serve_upstream(options: ProxyOptions, *, bin_dir: Path | None = None) -> None:
    """``twin serve --control-plane upstream --bare`` with faults: start the upstream control
    plane (``gpushift.upstream.ControlPlane``) and serve the fault proxy in front of it on
    ``options``' port until SIGINT or SIGTERM; then stop every component and remove its data
    directory. The admin kubeconfig stays inside the control plane's directory; clients get
    the proxy's.

    Raises ``upstream.NotBuiltError`` (the binaries are missing), ``upstream.StartError`` (a
    component did not come up) and :class:`ExitedError` (one exited while serving).
    """
    from gpushift import upstream

    plane = upstream.ControlPlane(
        bin_dir=bin_dir, progress=lambda line: print(line, file=sys.stderr, flush=True)
    )
    with _interruptible():
        try:
            plane.start()
        except KeyboardInterrupt:
            plane.stop()
            return
    try:
        assert plane.kubeconfig is not None
        from gpushift_twin.apiserver import target_from_kubeconfig

        def ended() -> str | None:
            gone = plane.exited()
            if not gone:
                return None
            return f"{gone[0].name} exited with status {gone[0].exited}: {gone[0].tail()}"

        serve_proxy(
            target_from_kubeconfig(Path(plane.kubeconfig), None),
            options,
            banner="gpushift upstream control plane serving",
            probe=False,
            watchdog=ended,
        )
    finally:
        # Signals arriving while the components stop must not cut the cleanup short.
        with _ignoring_signals():
            plane.stop()


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt inside the block."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    for sig in _SIGNALS:
        signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def _ignoring_signals() -> Iterator[None]:
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
