"""The fault proxy in front of an API server: the twin's own, and kube-apiserver (the upstream
tier). Real clients over HTTPS (http.client and kubectl) through the proxy's kubeconfig.

Expectations are kube-apiserver's: the error bodies are its wording (an ``InternalError``
for 500, its throttling filters' bodies with ``Retry-After`` for 429 and 503), and with no
faults the proxy answers what the server answers.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from gpushift._errors import UsageError
from gpushift_twin import FaultConfig, run_twin
from gpushift_twin.apiserver import (
    ProxyTarget,
    RunningProxy,
    check_loopback,
    run_proxy,
    target_from_kubeconfig,
)

KUBECTL = shutil.which("kubectl")

#: kube-apiserver's bodies for the three injected codes (reason, message).
BODIES = {
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    429: (
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    ),
}


@dataclass(frozen=True)
class Backend:
    """An API server behind the proxy: its name and admin kubeconfig."""

    name: str
    kubeconfig: Path


@pytest.fixture(
    scope="module", params=["twin", pytest.param("upstream", marks=pytest.mark.upstream)]
)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "twin":
        with run_twin(tls=True) as twin:
            yield Backend("twin", twin.kubeconfig)
    else:
        plane: Any = request.getfixturevalue("upstream_plane")
        yield Backend("upstream", Path(plane.kubeconfig))


def _target(backend: Backend) -> ProxyTarget:
    return target_from_kubeconfig(backend.kubeconfig, None)


def _connection(proxy: RunningProxy, timeout: float = 30) -> http.client.HTTPSConnection:
    assert proxy.ca_pem is not None
    context = ssl.create_default_context(cadata=proxy.ca_pem.decode())
    url = urlsplit(proxy.url)
    return http.client.HTTPSConnection(
        url.hostname or "", url.port, context=context, timeout=timeout
    )


def call(
    proxy: RunningProxy,
    method: str,
    path: str,
    *,
    body: Any = None,
    token: str | None = "",
) -> tuple[int, dict[str, str], Any]:
    """One request with the proxy's token (``token=None``: none; a string: that one)."""
    conn = _connection(proxy)
    headers = {"Accept": "application/json"}
    presented = proxy.token if token == "" else token
    if presented is not None:
        headers["Authorization"] = f"Bearer {presented}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    parsed = json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _namespace(proxy: RunningProxy, name: str) -> None:
    status, _, body = call(proxy, "POST", "/api/v1/namespaces", body={"metadata": {"name": name}})
    assert status in (201, 409), body


def test_error_rate_one_answers_with_kube_apiservers_bodies(backend: Backend) -> None:
    faults = FaultConfig(error_rate=1.0, seed=3)
    with run_proxy(_target(backend), faults=faults) as proxy:
        answers = [call(proxy, "GET", "/api/v1/namespaces") for _ in range(12)]
    for status, headers, body in answers:
        reason, message = BODIES[status]
        assert body["kind"] == "Status" and body["status"] == "Failure"
        assert (body["code"], body["reason"], body["message"]) == (status, reason, message)
        if status in (429, 503):
            assert headers["retry-after"] == "1"
            assert body["details"] == {"retryAfterSeconds": 1}
        else:
            assert "retry-after" not in headers and "details" not in body
    assert {status for status, _, _ in answers} == {500, 503, 429}


def test_the_same_seed_faults_the_same_requests_as_the_twins_own_server(
    backend: Backend,
) -> None:
    # One implementation: the proxy and the twin's in-server faults draw the same way.
    faults = FaultConfig(error_rate=0.5, seed=42)
    with run_proxy(_target(backend), faults=faults) as proxy:
        through_proxy = [call(proxy, "GET", "/api/v1/namespaces")[0] for _ in range(16)]
    with (
        run_twin(tls=True, faults=faults) as twin,
        run_proxy(target_from_kubeconfig(twin.kubeconfig, None)) as clean,
    ):
        in_server = [call(clean, "GET", "/api/v1/namespaces")[0] for _ in range(16)]
    assert through_proxy == in_server
    assert {200} < set(through_proxy) <= {200, 500, 503, 429}


def test_health_paths_are_never_faulted(backend: Backend) -> None:
    with run_proxy(_target(backend), faults=FaultConfig(error_rate=1.0)) as proxy:
        for path in ("/healthz", "/livez", "/readyz"):
            status, _, body = call(proxy, "GET", path)
            assert (status, body) == (200, "ok"), path
        assert call(proxy, "GET", "/version")[0] in (429, 500, 503)


def test_the_proxy_checks_its_own_token(backend: Backend) -> None:
    with run_proxy(_target(backend)) as proxy:
        status, _, body = call(proxy, "GET", "/api/v1/namespaces", token="not-the-token")
        assert (status, body["reason"]) == (401, "Unauthorized")
        status, _, body = call(proxy, "GET", "/api/v1/namespaces", token=None)
        assert (status, body["reason"]) == (403, "Forbidden")
        assert body["message"] == (
            'namespaces is forbidden: User "system:anonymous" cannot list resource '
            '"namespaces" in API group "" at the cluster scope'
        )
        assert call(proxy, "GET", "/healthz", token=None)[:3:2] == (200, "ok")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_without_faults_kubectl_works_through_the_proxy(backend: Backend) -> None:
    with run_proxy(_target(backend)) as proxy:
        _namespace(proxy, "proxied")
        created = _kubectl(
            proxy.kubeconfig, "-n", "proxied", "create", "configmap", "a", "--from-literal=k=v"
        )
        assert created.returncode == 0, created.stderr
        assert created.stdout.strip() == "configmap/a created"
        got = _kubectl(proxy.kubeconfig, "-n", "proxied", "get", "configmap", "a", "-o", "json")
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["data"] == {"k": "v"}
        # A watch: kubectl prints the object that exists, then one created while it watches.
        assert KUBECTL is not None
        watch = subprocess.Popen(
            [
                KUBECTL,
                "--kubeconfig",
                str(proxy.kubeconfig),
                "-n",
                "proxied",
                "get",
                "configmaps",
                "-w",
                "-o",
                "name",
                "--field-selector",
                "metadata.name!=kube-root-ca.crt",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert watch.stdout is not None
            assert watch.stdout.readline().strip() == "configmap/a"
            made = _kubectl(proxy.kubeconfig, "-n", "proxied", "create", "configmap", "b")
            assert made.returncode == 0, made.stderr
            assert watch.stdout.readline().strip() == "configmap/b"
        finally:
            watch.kill()
            watch.wait()
        # Unchanged: the proxy answers the server's own bytes.
        direct = _kubectl(backend.kubeconfig, "get", "--raw", "/version")
        proxied = _kubectl(proxy.kubeconfig, "get", "--raw", "/version")
        assert proxied.returncode == 0 and proxied.stdout == direct.stdout


def test_a_dropped_watch_resumes_from_its_resource_version(backend: Backend) -> None:
    with run_proxy(_target(backend), faults=FaultConfig(drop_watch_every=1.0)) as proxy:
        _namespace(proxy, "dropped")
        status, _, listed = call(proxy, "GET", "/api/v1/namespaces/dropped/secrets")
        assert status == 200
        start_rv = listed["metadata"]["resourceVersion"]
        conn = _connection(proxy)
        conn.request(
            "GET",
            f"/api/v1/namespaces/dropped/secrets?watch=true&resourceVersion={start_rv}",
            headers={"Authorization": f"Bearer {proxy.token}"},
        )
        resp = conn.getresponse()
        opened = time.monotonic()
        made = call(
            proxy,
            "POST",
            "/api/v1/namespaces/dropped/secrets",
            body={"metadata": {"name": "first"}},
        )
        assert made[0] == 201
        event = json.loads(resp.readline())
        assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "first")
        seen = event["object"]["metadata"]["resourceVersion"]
        assert resp.read() == b""  # the proxy ends the stream cleanly
        lasted = time.monotonic() - opened
        conn.close()
        assert 0.9 <= lasted < 5, lasted
        # Made while no watch was open; a watch from the last version seen delivers it.
        assert (
            call(
                proxy,
                "POST",
                "/api/v1/namespaces/dropped/secrets",
                body={"metadata": {"name": "second"}},
            )[0]
            == 201
        )
        conn = _connection(proxy)
        conn.request(
            "GET",
            f"/api/v1/namespaces/dropped/secrets?watch=true&resourceVersion={seen}",
            headers={"Authorization": f"Bearer {proxy.token}"},
        )
        resumed = json.loads(conn.getresponse().readline())
        conn.close()
        assert (resumed["type"], resumed["object"]["metadata"]["name"]) == ("ADDED", "second")


def test_spdy_upgrades_are_refused_with_a_status(backend: Backend) -> None:
    with run_proxy(_target(backend)) as proxy:
        conn = _connection(proxy)
        conn.request(
            "POST",
            "/api/v1/namespaces/default/pods/p/exec?command=true&stdout=true",
            headers={
                "Authorization": f"Bearer {proxy.token}",
                "Connection": "Upgrade",
                "Upgrade": "SPDY/3.1",
                "X-Stream-Protocol-Version": "v4.channel.k8s.io",
            },
        )
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
    assert resp.status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == (
        "the gpushift fault proxy does not forward SPDY/3.1 upgrades; use the API server "
        "directly, or a client that speaks WebSocket"
    )


def _websocket(proxy: RunningProxy, path: str) -> Any:
    """An aiohttp WebSocket to ``path`` through the proxy, as kubectl opens one (with an
    Origin, which kube-apiserver's WebSocket handler wants)."""
    import aiohttp

    assert proxy.ca_pem is not None
    context = ssl.create_default_context(cadata=proxy.ca_pem.decode())

    async def run() -> list[Any]:
        out: list[Any] = []
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                proxy.url.replace("https:", "wss:") + path,
                ssl=context,
                origin="http://127.0.0.1",
                headers={"Authorization": f"Bearer {proxy.token}"},
            ) as ws,
        ):
            started = time.monotonic()
            async for message in ws:
                out.append((message.type.name, message.data, time.monotonic() - started))
            out.append(("CLOSED", ws.close_code, time.monotonic() - started))
        return out

    return asyncio.run(run())


def test_a_websocket_to_a_missing_pod_answers_the_servers_code(backend: Backend) -> None:
    import aiohttp

    with run_proxy(_target(backend)) as proxy, pytest.raises(aiohttp.WSServerHandshakeError) as err:
        _websocket(proxy, "/api/v1/namespaces/default/pods/none/exec?command=true&stdout=true")
    # The pod does not exist, on either server: the handshake is answered with its 404.
    assert err.value.status == 404


@pytest.mark.upstream
def test_a_websocket_watch_is_relayed_and_dropped(upstream_plane: Any) -> None:
    # Upstream only: kube-apiserver serves watches over WebSocket (the twin does not).
    target = target_from_kubeconfig(Path(upstream_plane.kubeconfig), None)
    with run_proxy(target, faults=FaultConfig(drop_watch_every=1.0)) as proxy:
        _namespace(proxy, "sockets")
        made = call(
            proxy,
            "POST",
            "/api/v1/namespaces/sockets/configmaps",
            body={"metadata": {"name": "relayed"}},
        )
        assert made[0] == 201
        messages = _websocket(
            proxy, "/api/v1/namespaces/sockets/configmaps?watch=true&resourceVersion=0"
        )
    *events, closed = messages
    names = [json.loads(data)["object"]["metadata"]["name"] for _, data, _ in events]
    assert "relayed" in names
    assert all(kind == "TEXT" for kind, _, _ in events)
    assert closed[0] == "CLOSED" and 0.9 <= closed[2] < 5


def test_the_written_kubeconfig_holds_none_of_the_targets_credentials(
    backend: Backend,
) -> None:
    target = _target(backend)
    secrets = [
        s for s in (target.token, target.client_cert_pem, target.client_key_pem, target.ca_pem) if s
    ]
    assert secrets  # the target has credentials to keep
    with run_proxy(target) as proxy:
        text = proxy.kubeconfig.read_text()
        config = yaml.safe_load(text)
    (user,) = config["users"]
    assert set(user["user"]) == {"token"} and user["user"]["token"] == proxy.token
    for secret in secrets:
        raw = secret.decode() if isinstance(secret, bytes) else secret
        assert raw not in text
        assert base64.b64encode(raw.encode()).decode() not in text


@pytest.mark.parametrize(
    ("listen", "target", "message"),
    [
        (
            "0.0.0.0",
            "https://127.0.0.1:6443",
            "the fault proxy listens on loopback only (127.0.0.1, ::1, localhost), not 0.0.0.0",
        ),
        (
            "127.0.0.1",
            "https://10.0.0.1:6443",
            "the fault proxy forwards to a loopback API server only, not https://10.0.0.1:6443",
        ),
        (
            "::1",
            "https://api.example.com",
            "the fault proxy forwards to a loopback API server only, not https://api.example.com",
        ),
    ],
)
def test_off_loopback_is_refused(listen: str, target: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        check_loopback(listen=listen, target=target)
    assert str(raised.value) == message
    with pytest.raises(UsageError), run_proxy(ProxyTarget(target), host=listen):
        pass


def test_loopback_is_accepted() -> None:
    for listen in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        check_loopback(listen=listen, target="https://localhost:6443")
    check_loopback(target="http://[::1]:8080")


@pytest.mark.upstream
def test_a_dropped_protobuf_watch_ends_between_whole_frames(upstream_plane: Any) -> None:
    # Upstream only: the twin serves JSON. kube-apiserver's protobuf watch is length-delimited
    # frames: a 4-byte big-endian size, then a WatchEvent of that size.
    target = target_from_kubeconfig(Path(upstream_plane.kubeconfig), None)
    with run_proxy(target, faults=FaultConfig(drop_watch_every=1.0)) as proxy:
        _namespace(proxy, "framed")
        conn = _connection(proxy)
        conn.request(
            "GET",
            "/api/v1/namespaces/framed/configmaps?watch=true",
            headers={
                "Authorization": f"Bearer {proxy.token}",
                "Accept": "application/vnd.kubernetes.protobuf;stream=watch",
            },
        )
        resp = conn.getresponse()
        assert resp.getheader("Content-Type", "").startswith("application/vnd.kubernetes.protobuf")
        for name in ("one", "two"):
            made = call(
                proxy,
                "POST",
                "/api/v1/namespaces/framed/configmaps",
                body={"metadata": {"name": name}, "data": {"k": "v" * 5000}},
            )
            assert made[0] == 201
        body = resp.read()  # until the proxy ends the stream
        conn.close()
    frames, at = [], 0
    while at < len(body):
        size = int.from_bytes(body[at : at + 4], "big")
        frames.append(body[at + 4 : at + 4 + size])
        at += 4 + size
    assert at == len(body)  # no frame cut short
    # kube-root-ca.crt (the controller manager's) and the two made here, each ADDED.
    assert len(frames) >= 2
    # Each a WatchEvent: field 1 its type, field 2 the object, itself "k8s\0"-prefixed.
    assert all(frame.startswith(b"\n\x05ADDED\x12") and b"k8s\x00" in frame for frame in frames)
    assert sum(b"one" in f for f in frames) == 1 and sum(b"two" in f for f in frames) == 1


def test_latency_delays_and_a_pause_holds_every_request(backend: Backend) -> None:
    faults = FaultConfig(latency=0.3, seed=1)
    with run_proxy(_target(backend), faults=faults) as proxy:
        started = time.monotonic()
        assert call(proxy, "GET", "/version")[0] == 200
        assert time.monotonic() - started >= 0.3
        proxy.faults.pause()
        done: list[float] = []

        def probe() -> None:
            call(proxy, "GET", "/healthz")
            done.append(time.monotonic())

        worker = threading.Thread(target=probe)
        paused = time.monotonic()
        worker.start()
        time.sleep(0.5)
        assert done == []  # held, health paths too
        proxy.faults.resume()
        worker.join(10)
    assert done and done[0] - paused >= 0.5


def test_many_open_watches_do_not_hold_other_requests(backend: Backend) -> None:
    # More watches than aiohttp's default connection pool (100) holds.
    with run_proxy(_target(backend)) as proxy:
        watches = []
        try:
            for _ in range(110):
                conn = _connection(proxy)
                conn.request(
                    "GET",
                    "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=60",
                    headers={"Authorization": f"Bearer {proxy.token}"},
                )
                watches.append(conn)
            for conn in watches:
                assert conn.getresponse().status == 200
            assert call(proxy, "GET", "/api/v1/namespaces/default")[0] == 200
        finally:
            for conn in watches:
                conn.close()
