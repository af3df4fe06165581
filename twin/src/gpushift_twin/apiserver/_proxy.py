"""The fault proxy: the twin's faults in front of any API server on loopback.

:class:`FaultProxy` is an aiohttp reverse proxy. It terminates TLS for its clients with a
certificate of its own, checks a bearer token of its own (as the twin does: a wrong token is
401, no token is the anonymous user, who may read the public paths only), and forwards every
other request to the target with the target's credentials (its bearer token or client
certificate, and its CA), which therefore never leave the process. On the way it injects the
faults of :class:`~gpushift_twin.apiserver._faults.Faults` through the same calls the twin's
own server makes, in the same order: the pause and the latency first, then authentication,
then a seeded error on every path but the health paths; a watch stream is ended cleanly
``drop_watch_every`` seconds after it opened, between two events (JSON and protobuf streams;
others as they arrive), so the client resumes from the last resourceVersion it saw.

Forwarded: every verb with its query and body, responses streamed as they arrive (watches,
chunked lists, ``pods/log?follow=true``) with their status and headers, compressed bodies as
they are, and WebSocket upgrades message by message (``exec``, ``attach`` and
``port-forward`` as kubectl 1.31 and later speak them, watches over WebSocket). Not
forwarded: SPDY upgrades (older clients' ``exec`` and ``port-forward``), answered with 400
and a Status saying so.

Loopback only, as every gpushift server: the proxy listens on a loopback address and forwards
to a loopback address, and refuses anything else (:func:`check_loopback`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from gpushift.common import InputError, UsageError
from gpushift_twin.apiserver._auth import Certificate, new_token, self_signed, write_kubeconfig
from gpushift_twin.apiserver._faults import FaultConfig, Faults
from gpushift_twin.apiserver._runner import serve_in_thread, url_for
from gpushift_twin.apiserver._server import authorize, error_response
from gpushift_twin.apiserver._status import ApiError

#: Headers that belong to one connection (RFC 9110 section 7.6.1), plus the ones the proxy
#: sets itself: never copied from one side to the other.
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "authorization",
        "content-length",
    }
)


#: Status reasons of the codes a refused upgrade is answered with.
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    429: "TooManyRequests",
    503: "ServiceUnavailable",
}


@dataclass(frozen=True, slots=True)
class ProxyTarget:
    """The API server the proxy forwards to, and the credentials it uses there.

    ``server`` is its URL; ``ca_pem`` the CA its certificate is checked against (None: the
    system's); ``token`` a bearer token, ``client_cert_pem`` and ``client_key_pem`` a client
    certificate; ``insecure`` skips the server certificate check, as the kubeconfig's
    ``insecure-skip-tls-verify`` does.
    """

    server: str
    ca_pem: bytes | None = None
    token: str | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    insecure: bool = False

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context for an ``https`` target, None for ``http``."""
        if not self.server.startswith("https:"):
            return None
        context = ssl.create_default_context(
            cadata=self.ca_pem.decode() if self.ca_pem is not None else None
        )
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.client_cert_pem is not None and self.client_key_pem is not None:
            # ssl loads a key pair from files only: a private directory, gone at once.
            with tempfile.TemporaryDirectory(prefix="gpushift-proxy-") as tmp:
                crt, key = Certificate(self.client_cert_pem, self.client_key_pem).write(Path(tmp))
                context.load_cert_chain(crt, key)
        return context


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def check_loopback(*, listen: str | None = None, target: str | None = None) -> None:
    """Refuse a listen address or a target URL that is not on loopback.

    Raises ``UsageError`` (exit 2) naming the address: the proxy hands out a cluster's
    administrator on its port, so it is reachable from this host only, and it sends a
    cluster's credentials to this host only.
    """
    if listen is not None and not _is_loopback(listen):
        raise UsageError(
            f"the fault proxy listens on loopback only (127.0.0.1, ::1, localhost), not {listen}"
        )
    if target is not None:
        host = urlsplit(target).hostname or ""
        if not _is_loopback(host):
            raise UsageError(
                f"the fault proxy forwards to a loopback API server only, not {target}"
            )


def target_from_kubeconfig(kubeconfig: Path | None, context: str | None) -> ProxyTarget:
    """The server and credentials of ``context`` (None: the current one) in the kubeconfig
    kubectl would read (``kubeconfig``, else ``$KUBECONFIG`` merged, else ``~/.kube/config``).

    Bearer tokens (``token``, ``tokenFile``) and client certificates (inline or as files) are
    supported; a user that authenticates otherwise (``exec``, ``auth-provider``, a password)
    is refused with ``InputError``, as is a server that is not on loopback (``UsageError``).
    """
    from gpushift.kube import kubeconfig_paths, merge_kubeconfigs

    merged = merge_kubeconfigs(kubeconfig_paths(kubeconfig), explicit=kubeconfig is not None)
    name = context or merged.get("current-context")
    if not name:
        raise InputError("the kubeconfig has no current context (give --context)")

    def entry(section: str, inner: str, key: str) -> dict[str, Any]:
        for item in merged.get(section) or []:
            if item.get("name") == key:
                body = item.get(inner)
                return body if isinstance(body, dict) else {}
        raise InputError(f"the kubeconfig has no {inner} {key!r}")

    ctx = entry("contexts", "context", str(name))
    cluster = entry("clusters", "cluster", str(ctx.get("cluster", "")))
    user = entry("users", "user", str(ctx.get("user", ""))) if ctx.get("user") else {}
    server = str(cluster.get("server") or "")
    if not server:
        raise InputError(f"the kubeconfig's cluster {ctx.get('cluster')!r} names no server")
    check_loopback(target=server)
    for unsupported in ("exec", "auth-provider", "username", "password"):
        if user.get(unsupported):
            raise InputError(
                f"the fault proxy reaches the cluster with a bearer token or a client "
                f"certificate; user {ctx.get('user')!r} uses {unsupported}"
            )
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(str(user["tokenFile"])).read_text().strip()
    return ProxyTarget(
        server=server.rstrip("/"),
        ca_pem=_pem(cluster, "certificate-authority"),
        token=str(token) if token else None,
        client_cert_pem=_pem(user, "client-certificate"),
        client_key_pem=_pem(user, "client-key"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def _pem(section: Mapping[str, Any], field: str) -> bytes | None:
    """A kubeconfig's ``FIELD-data`` (base64) or ``FIELD`` (a file path, already resolved
    against the file that names it)."""
    data = section.get(f"{field}-data")
    if data:
        return base64.b64decode(str(data))
    path = section.get(field)
    if path:
        try:
            return Path(str(path)).read_bytes()
        except OSError as err:
            raise InputError(f"cannot read {field}: {err.strerror}", path=str(path)) from None
    return None


def describe_error(err: BaseException) -> str:
    """A connection error in words: the operating system's reason where there is one (an
    aiohttp connector error's text also shows its SSL context)."""
    strerror = getattr(err, "strerror", None)
    return str(strerror) if strerror else str(err) or type(err).__name__


def _json_events_end(data: bytes) -> int:
    """Where the whole JSON events in ``data`` end: each is one line."""
    return data.rfind(b"\n") + 1


def _protobuf_events_end(data: bytes) -> int:
    """Where the whole protobuf events in ``data`` end: each is a 4-byte big-endian length
    and that many bytes (k8s.io/apimachinery's length-delimited framer)."""
    end = 0
    while len(data) - end >= 4:
        size = int.from_bytes(data[end : end + 4], "big")
        if len(data) - end - 4 < size:
            break
        end += 4 + size
    return end


#: How a watch stream of each content type is cut into whole events; a stream of another
#: type is forwarded as it arrives.
_EVENT_ENDS = {
    "application/json": _json_events_end,
    "application/vnd.kubernetes.protobuf": _protobuf_events_end,
}


def _is_watch(request: web.Request) -> bool:
    if request.query.get("watch") in ("true", "1"):
        return True
    segs = [s for s in request.path.split("/") if s]
    # The legacy form: /api/v1/watch/..., /apis/GROUP/VERSION/watch/...
    return len(segs) > 2 and "watch" in segs[2:4]


class FaultProxy:
    """The aiohttp application forwarding to one :class:`ProxyTarget` with :class:`Faults`.

    ``token`` is what clients of the proxy present; ``faults`` is shared with the caller,
    which may pause and resume it.
    """

    def __init__(
        self,
        target: ProxyTarget,
        *,
        token: str,
        faults: Faults | None = None,
        routes: Callable[[web.Application], None] | None = None,
    ) -> None:
        check_loopback(target=target.server)
        self.target = target
        #: Endpoints the proxy answers itself instead of forwarding (the twin's, in front of
        #: a real control plane).
        self.routes = routes
        self.token = token
        self.faults = faults or Faults()
        self.requests = 0
        self._ssl = target.ssl_context()
        self._session: aiohttp.ClientSession | None = None
        self._streams: set[asyncio.Task[Any]] = set()

    def app(self) -> web.Application:
        """A fresh aiohttp application serving the proxy."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        if self.routes is not None:
            self.routes(app)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._open)
        app.on_shutdown.append(self._end_streams)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, app: web.Application) -> None:
        del app
        # No connection limit: each open watch holds one, and a client with many informers
        # must not queue its requests behind them.
        connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False, limit=0)
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
        )

    async def _end_streams(self, app: web.Application) -> None:
        # Open watches would hold the shutdown; clients re-list and re-watch, as after an
        # API server restart.
        del app
        for task in list(self._streams):
            task.cancel()

    async def _close(self, app: web.Application) -> None:
        del app
        if self._session is not None:
            await self._session.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request: faults and authentication as the twin does, then forward."""
        self.requests += 1
        faults = self.faults
        await faults.hold()
        path = request.path
        refused = authorize(request, path, self.token)
        if refused is not None:
            return refused
        injected = faults.error_for(path)
        if injected is not None:
            return error_response(injected)
        upgrade = request.headers.get("Upgrade", "")
        if upgrade.lower() == "websocket":
            return await self._websocket(request)
        if upgrade:
            return error_response(
                ApiError(
                    400,
                    "BadRequest",
                    f"the gpushift fault proxy does not forward {upgrade} upgrades; "
                    "use the API server directly, or a client that speaks WebSocket",
                )
            )
        return await self._forward(request)

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        """Relay a WebSocket (exec, attach, port-forward and watches as kubectl and
        kube-apiserver speak them) message by message, with the subprotocol the target
        chose; a watch is closed after ``drop_watch_every`` as a streamed one is."""
        assert self._session is not None, "the application has not started"
        headers = CIMultiDict(
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in _HOP and not k.lower().startswith("sec-websocket-")
        )
        if self.target.token:
            headers["Authorization"] = f"Bearer {self.target.token}"
        offered = [
            p.strip()
            for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")
            if p.strip()
        ]
        url = URL(self.target.server + request.raw_path, encoded=True)
        try:
            upstream = await self._session.ws_connect(
                url, protocols=offered, headers=headers, max_msg_size=0, autoclose=False
            )
        except aiohttp.WSServerHandshakeError as err:
            # The target refused the upgrade (no such pod, forbidden, ...): its code in a
            # Status (the handshake error keeps no body); a server that answered without
            # upgrading (the twin serves no WebSocket) is a bad request.
            code = err.status if err.status >= 400 else 400
            return error_response(
                ApiError(
                    code,
                    _REASONS.get(code, "InternalError"),
                    f"the API server answered the WebSocket upgrade with {err.status}",
                )
            )
        except (aiohttp.ClientError, OSError) as err:
            return error_response(
                ApiError(
                    503,
                    "ServiceUnavailable",
                    f"the API server cannot be reached: {describe_error(err)}",
                )
            )
        client = web.WebSocketResponse(
            protocols=(upstream.protocol,) if upstream.protocol else (),
            max_msg_size=0,
            autoclose=False,
        )
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            await client.prepare(request)
            limit = self.faults.watch_timeout(float("inf")) if _is_watch(request) else None
            pumps = [
                asyncio.ensure_future(self._pump(client, upstream)),
                asyncio.ensure_future(self._pump(upstream, client)),
            ]
            try:
                # Either side closing ends both; so does a watch's drop.
                await asyncio.wait(
                    pumps,
                    timeout=limit if limit is not None and limit != float("inf") else None,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                for pump in pumps:
                    pump.cancel()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._streams.discard(task)
            await upstream.close()
            with contextlib.suppress(ConnectionResetError):
                await client.close()
        return client

    async def _pump(
        self,
        source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
        sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    ) -> None:
        """Copy messages from ``source`` to ``sink`` until either closes; a pause holds them."""
        async for message in source:
            if self.faults.paused:
                await self.faults.wait_running()
            if message.type is aiohttp.WSMsgType.BINARY:
                await sink.send_bytes(message.data)
            elif message.type is aiohttp.WSMsgType.TEXT:
                await sink.send_str(message.data)
            else:
                break

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None, "the application has not started"
        headers = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in _HOP)
        if self.target.token:
            headers["Authorization"] = f"Bearer {self.target.token}"
        body = await request.read() if request.can_read_body else None
        url = URL(self.target.server + request.raw_path, encoded=True)
        try:
            upstream = await self._session.request(
                request.method, url, headers=headers, data=body, allow_redirects=False
            )
        except (aiohttp.ClientError, OSError) as err:
            # What kube-apiserver's own proxy answers when its backend cannot be reached.
            return error_response(
                ApiError(
                    503,
                    "ServiceUnavailable",
                    f"the API server cannot be reached: {describe_error(err)}",
                )
            )
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            return await self._relay(request, upstream)
        finally:
            if task is not None:
                self._streams.discard(task)
            upstream.release()

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in _HOP:
                response.headers.add(key, value)
        length = upstream.headers.get("Content-Length")
        if length is not None and length.isdigit():
            response.content_length = int(length)
        watch = _is_watch(request) and upstream.status == 200
        # Forwarded event by event, so that a drop falls between two events, never in one.
        cut = _EVENT_ENDS.get(upstream.content_type) if watch else None
        loop = asyncio.get_running_loop()
        limit = self.faults.watch_timeout(float("inf")) if watch else float("inf")
        deadline = loop.time() + limit if limit != float("inf") else None
        await response.prepare(request)
        pending = b""
        try:
            while True:
                if deadline is not None:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    try:
                        async with asyncio.timeout(left):
                            chunk = await upstream.content.readany()
                    except TimeoutError:
                        break
                else:
                    chunk = await upstream.content.readany()
                if not chunk:
                    break
                if self.faults.paused:
                    await self.faults.wait_running()
                if cut is not None:
                    pending += chunk
                    end = cut(pending)
                    chunk, pending = pending[:end], pending[end:]
                if chunk:
                    await response.write(chunk)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError, aiohttp.ClientError):
            # The client went away, the upstream ended mid-stream, or the proxy is stopping.
            pass
        return response


@dataclass(frozen=True, slots=True)
class RunningProxy:
    """A proxy serving on a background thread: its URL, its clients' token and kubeconfig."""

    url: str
    token: str
    kubeconfig: Path
    proxy: FaultProxy
    ca_pem: bytes | None

    @property
    def faults(self) -> Faults:
        """The proxy's fault switches (pause, resume, …)."""
        return self.proxy.faults


@contextlib.contextmanager
def run_proxy(
    target: ProxyTarget,
    *,
    faults: FaultConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: bool = True,
    kubeconfig: Path | None = None,
) -> Iterator[RunningProxy]:
    """Run a :class:`FaultProxy` in front of ``target`` on a background thread for the
    ``with`` block, as :func:`run_twin` runs a twin.

    Yields a :class:`RunningProxy` whose kubeconfig (in a temporary directory unless
    ``kubeconfig`` is given) reaches the proxy with a token of its own. Raises
    ``UsageError`` for a listen address or target off loopback.
    """
    check_loopback(listen=host, target=target.server)
    token = new_token()
    proxy = FaultProxy(target, token=token, faults=Faults(faults))
    certificate = self_signed([host]) if tls else None
    ca_pem = certificate.cert_pem if certificate else None
    with (
        serve_in_thread(
            proxy,
            host=host,
            port=port,
            certificate=certificate,
            name="gpushift-proxy",
            handler_cancellation=True,
        ) as bound,
        tempfile.TemporaryDirectory(prefix="gpushift-proxy-") as tmp,
    ):
        url = url_for(host, bound, tls=tls)
        path = kubeconfig or Path(tmp) / "kubeconfig"
        write_kubeconfig(path, server=url, token=token, ca_pem=ca_pem, name="gpushift-proxy")
        try:
            yield RunningProxy(url, token, path, proxy, ca_pem)
        finally:
            proxy.faults.resume()
