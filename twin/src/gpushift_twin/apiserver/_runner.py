"""Starting a twin: in-process on a background thread (tests, the runbook) or in the foreground
(``gpushift twin serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from gpushift_twin.apiserver import _crd
from gpushift_twin.apiserver._auth import Certificate, new_token, self_signed, write_kubeconfig
from gpushift_twin.apiserver._faults import FaultConfig, Faults
from gpushift_twin.apiserver._server import TwinServer
from gpushift_twin.apiserver._store import Store


@dataclass(frozen=True, slots=True)
class Twin:
    """A running twin: where it listens and how to reach it."""

    url: str
    token: str
    kubeconfig: Path
    store: Store
    server: TwinServer
    ca_pem: bytes | None = None

    @property
    def faults(self) -> Faults:
        """The server's fault switches (pause, resume, …)."""
        return self.server.faults


def new_store(*, seed: int | None = None, window: int = 10_000) -> Store:
    """A store serving the built-in kinds, with CRDs turning into served resources."""
    store = Store(seed=seed, window=window)
    _crd.install(store)
    return store


class Serves(Protocol):
    """What :func:`start` serves: a twin's server or the fault proxy."""

    def app(self) -> web.Application:
        """A fresh aiohttp application."""
        ...


async def start(
    server: Serves,
    *,
    host: str,
    port: int,
    certificate: Certificate | None,
    routes: Callable[[web.Application], None] | None = None,
    handler_cancellation: bool = False,
) -> tuple[web.AppRunner, int]:
    """Listen on ``host:port`` (0 picks a free port); returns the runner and the bound port.

    ``routes`` may add routes beside the API (exact paths win over the API's catch-all).
    ``handler_cancellation`` cancels a handler whose client went away (the proxy: its
    upstream stream ends with it).
    """
    app = server.app()
    if routes is not None:
        routes(app)
    # The server ends its watch streams on shutdown; this bounds any other handler still
    # running, which would otherwise hold the exit (and the state save) for aiohttp's 60 s.
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=2.0,
        handler_cancellation=handler_cancellation,
    )
    await runner.setup()
    context = None
    if certificate is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as tmp:
            crt, key = certificate.write(Path(tmp))
            context.load_cert_chain(crt, key)
    site = web.TCPSite(runner, host, port, ssl_context=context, backlog=1024)
    await site.start()
    bound = port
    server_obj: Any = getattr(site, "_server", None)
    if server_obj is not None and server_obj.sockets:
        bound = int(server_obj.sockets[0].getsockname()[1])
    return runner, bound


def url_for(host: str, port: int, *, tls: bool) -> str:
    """The base URL clients use (IPv6 literals bracketed)."""
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


@contextlib.contextmanager
def serve_in_thread(
    server: Serves,
    *,
    host: str,
    port: int,
    certificate: Certificate | None,
    name: str,
    routes: Callable[[web.Application], None] | None = None,
    handler_cancellation: bool = False,
) -> Iterator[int]:
    """Serve ``server`` on a background thread with an event loop of its own for the ``with``
    block; yields the bound port. Raises what listening raised (an address in use)."""
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        try:
            runner, bound = await start(
                server,
                host=host,
                port=port,
                certificate=certificate,
                routes=routes,
                handler_cancellation=handler_cancellation,
            )
        except BaseException as err:
            box["error"] = err
            ready.set()
            return
        box["port"] = bound
        box["loop"] = asyncio.get_running_loop()
        stop = box["stop"] = asyncio.Event()
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name=name, daemon=True)
    thread.start()
    ready.wait()
    if "error" in box:
        raise box["error"]
    try:
        yield int(box["port"])
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)


@contextlib.contextmanager
def run_twin(
    *,
    store: Store | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: bool = False,
    faults: FaultConfig | None = None,
    token: str | None = None,
    kubeconfig: Path | None = None,
    bookmark_interval: float = 5.0,
    access_log: bool = False,
    routes: Callable[[web.Application], None] | None = None,
) -> Iterator[Twin]:
    """Run a twin on a background thread for the duration of the ``with`` block.

    Yields a :class:`Twin` with the URL, the token and a kubeconfig file (in a temporary
    directory unless ``kubeconfig`` is given). The server stops when the block exits.
    ``routes`` adds routes beside the API (the cluster controllers' endpoints).
    """
    store = store or new_store()
    token = token or new_token()
    certificate = self_signed([host]) if tls else None
    server = TwinServer(
        store,
        token=token,
        faults=Faults(faults),
        bookmark_interval=bookmark_interval,
        access_log=access_log,
    )
    ca_pem = certificate.cert_pem if certificate else None
    with (
        serve_in_thread(
            server,
            host=host,
            port=port,
            certificate=certificate,
            name="gpushift-twin",
            routes=routes,
        ) as bound,
        tempfile.TemporaryDirectory(prefix="gpushift-twin-") as tmp,
    ):
        url = url_for(host, bound, tls=tls)
        path = kubeconfig or Path(tmp) / "kubeconfig"
        write_kubeconfig(path, server=url, token=token, ca_pem=ca_pem)
        try:
            yield Twin(url, token, path, store, server, ca_pem)
        finally:
            # A paused server holds its requests; let them go so the thread can stop.
            server.faults.resume()


async def serve_forever(
    server: Serves,
    *,
    host: str,
    port: int,
    certificate: Certificate | None,
    on_ready: Callable[[int], Awaitable[None] | None],
    stop: asyncio.Event,
    routes: Callable[[web.Application], None] | None = None,
    handler_cancellation: bool = False,
) -> None:
    """Serve until ``stop`` is set; ``on_ready`` gets the bound port once listening."""
    runner, bound = await start(
        server,
        host=host,
        port=port,
        certificate=certificate,
        routes=routes,
        handler_cancellation=handler_cancellation,
    )
    try:
        result = on_ready(bound)
        if result is not None:
            await result
        await stop.wait()
    finally:
        await runner.cleanup()
