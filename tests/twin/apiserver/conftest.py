"""The API servers the twin's API tests drive: the twin, and kube-apiserver itself.

The ``server`` fixture is parametrised over both: ``twin`` is a twin started in this process
for the module (``run_twin``), ``upstream`` the module's real control plane (the
``upstream_plane`` fixture of tests/conftest.py: etcd, kube-apiserver, kube-controller-manager
and kube-scheduler with gpushift's CRDs), marked ``upstream`` so that ``make test`` leaves it
out and ``make test-upstream`` runs it. A test that passes on both holds the twin to what
kube-apiserver does. Where the servers must differ, the test says so per server and
docs/twin.md lists the difference ("Where the twin differs from kube-apiserver").

The module's tests share one server of each kind, so each test keeps to names of its own:
its own namespace (the ``namespace`` fixture) where it makes namespaced objects, names no
other test of the module uses for cluster-scoped ones. The upstream control plane runs its
controllers, as a cluster does: every namespace gets its ``default`` ServiceAccount and its
``kube-root-ca.crt`` ConfigMap, and deletion is finished by the garbage collector; the tests
wait for what Kubernetes does asynchronously instead of assuming it done.

Tests of twin-only features (fault injection, the store's event window, the bookmark
interval) start a twin of their own with ``run_twin`` and are not parametrised; each says so.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest

from gpushift_twin import Twin, run_twin

KUBECTL = shutil.which("kubectl")

#: The ``server`` fixture's parameters: the twin always, kube-apiserver in the upstream tier.
SERVERS = ("twin", pytest.param("upstream", marks=pytest.mark.upstream))

T = TypeVar("T")


@dataclass
class Server:
    """One API server under test and the admin's ways to reach it: a kubeconfig (kubectl, the
    official client, gpushift's own client) and raw HTTPS (:meth:`call`, :meth:`stream`)."""

    name: str
    url: str
    kubeconfig: Path
    ca_pem: bytes
    cache: Path
    #: The twin, when this is one (its store and faults are for twin-only tests).
    twin: Twin | None = None
    #: The admin client certificate and key (kube-apiserver); the twin takes a bearer token.
    client_cert: tuple[Path, Path] | None = None
    _names: set[str] = field(default_factory=set)

    @property
    def is_twin(self) -> bool:
        return self.twin is not None

    # --- raw HTTPS ---------------------------------------------------------------------------

    def connection(
        self, *, admin: bool = True, timeout: float = 10.0
    ) -> http.client.HTTPConnection:
        """An HTTPS connection that trusts the server; with the admin's client certificate on
        kube-apiserver when ``admin``."""
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        if admin and self.client_cert is not None:
            context.load_cert_chain(*self.client_cert)
        url = urlsplit(self.url)
        return http.client.HTTPSConnection(
            url.hostname or "", url.port, context=context, timeout=timeout
        )

    def _headers(self, admin: bool, token: str | None) -> dict[str, str]:
        if token is not None:
            return {"Authorization": f"Bearer {token}"}
        if admin and self.twin is not None:
            return {"Authorization": f"Bearer {self.twin.token}"}
        return {}

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
        admin: bool = True,
        token: str | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        """One request; returns the status, the headers (lower-case names) and the body, parsed
        when it is JSON. ``admin=False`` sends no credentials; ``token`` sends that bearer
        token instead of the admin's credentials."""
        conn = self.connection(admin=admin and token is None)
        sent = {**self._headers(admin, token), **(headers or {})}
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            sent["Content-Type"] = content_type
        try:
            conn.request(method, path, body=data, headers=sent)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        parsed = json.loads(raw) if raw and raw[:1] in b"{[" else raw.decode()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, parsed

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        """:meth:`call` that must succeed (2xx); returns the body."""
        status, _, answer = self.call(method, path, body, **kwargs)
        assert 200 <= status < 300, (method, path, status, answer)
        return answer

    def stream(
        self, path: str, *, timeout: float = 10.0
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """A GET whose response is read as it arrives (a watch)."""
        conn = self.connection(timeout=timeout)
        conn.request("GET", path, headers=self._headers(True, None))
        return conn, conn.getresponse()

    def namespace(self, name: str, **labels: str) -> str:
        """Create the namespace ``name`` (with ``labels``); returns the name. On kube-apiserver
        it waits for the ``default`` ServiceAccount, without which Pods are not admitted, as
        a script on a cluster must."""
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        self.ok(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": meta},
        )
        if not self.is_twin:
            path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
            eventually(
                lambda: True if self.call("GET", path)[0] == 200 else None,
                what=f"the default ServiceAccount of {name}",
            )
        return name

    def unique(self, base: str) -> str:
        """A name no other caller of this server got: ``base``, else ``base-2``, …"""
        name, n = base, 1
        while name in self._names:
            n += 1
            name = f"{base}-{n}"
        self._names.add(name)
        return name

    # --- kubectl -----------------------------------------------------------------------------

    def kubectl(
        self,
        *args: str,
        stdin: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
        namespace: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """The operators' kubectl (the one on ``PATH``) against this server."""
        assert KUBECTL is not None, "kubectl is not installed"
        ns = ["-n", namespace] if namespace else []
        done = subprocess.run(
            [KUBECTL, "--cache-dir", str(self.cache), *ns, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": str(kubeconfig or self.kubeconfig)},
            timeout=60,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done


def eventually(probe: Callable[[], T | None], *, timeout: float = 30.0, what: str = "") -> T:
    """Poll ``probe`` (50 ms, backing off to 400 ms) until it returns something other than
    None; for what Kubernetes does asynchronously (the garbage collector, CRD establishment).
    The twin usually answers on the first probe."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        got = probe()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what or probe}")
        time.sleep(delay)
        delay = min(delay * 2, 0.4)


@pytest.fixture(scope="module", params=SERVERS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The module's API server: the twin, or kube-apiserver (``upstream``)."""
    cache = tmp_path_factory.mktemp(f"kubectl-cache-{request.param}")
    if request.param == "twin":
        with run_twin(tls=True) as twin:
            assert twin.ca_pem is not None
            yield Server("twin", twin.url, twin.kubeconfig, twin.ca_pem, cache, twin=twin)
        return
    plane = request.getfixturevalue("upstream_plane")
    pki = plane.pki
    yield Server(
        "upstream",
        plane.server,
        plane.kubeconfig,
        pki.ca_pem,
        cache,
        client_cert=(pki.admin_crt, pki.admin_key),
    )


@pytest.fixture
def namespace(server: Server, request: pytest.FixtureRequest) -> str:
    """A namespace of the test's own, named after the test (a DNS-1123 label)."""
    base = re.sub(r"[^a-z0-9]+", "-", request.node.originalname.removeprefix("test_").lower())
    return server.namespace(server.unique(base.strip("-")[:50].strip("-")))
