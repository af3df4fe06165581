"""Credentials of a twin: the bearer token, its self-signed TLS certificate and the kubeconfig;
and what a request without credentials may do (kube-apiserver's anonymous user under RBAC).

The token is only ever written to the kubeconfig file (mode 0600) and compared in constant
time; nothing here logs it.
"""

from __future__ import annotations

import base64
import datetime as dt
import hmac
import ipaddress
import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpushift_twin.apiserver._status import ApiError, StatusDetails


def new_token() -> str:
    """A random bearer token (256 bits)."""
    return secrets.token_urlsafe(32)


def check_bearer(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (constant-time)."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), token.encode())


def bearer_token(header: str | None) -> str | None:
    """The bearer token an ``Authorization`` header presents, None when it presents none (no
    header, another scheme, an empty token): such a request is anonymous, one with a token
    is refused unless the token is right. As k8s.io/apiserver's bearertoken authenticator."""
    parts = (header or "").strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


def authenticate(header: str | None, token: str) -> bool | None:
    """True for the twin's token, False for any other token (401), None for no token at all
    (the anonymous user)."""
    presented = bearer_token(header)
    if presented is None:
        return None
    return hmac.compare_digest(presented.encode(), token.encode())


#: What RBAC's system:public-info-viewer lets everyone, the anonymous user too, read.
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})
ANONYMOUS = "system:anonymous"

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What a request asks to do, for authorization (k8s.io/apiserver's request.RequestInfo)."""

    verb: str
    path: str
    resource: str = ""
    group: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """Parse a request as request.RequestInfoFactory.NewRequestInfo does (no proxy or watch
    path prefixes): ``/api/v1/...`` and ``/apis/GROUP/VERSION/...`` are resource requests,
    everything else a non-resource request with the method, lower-case, as its verb."""
    parts = [p for p in path.strip("/").split("/") if p] if path.strip("/") else []
    plain = RequestInfo(method.lower(), path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return plain
    group = ""
    rest = parts[1:]
    if parts[0] == "apis":
        if len(rest) < 3:
            return plain
        group, rest = rest[0], rest[1:]
    rest = rest[1:]  # the version
    verb = _VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch", "") in _TRUE else "list"
        for term in query.get("fieldSelector", "").split(","):
            key, _, value = term.partition("=")
            value = value.removeprefix("=").strip()  # "=" and "==" both require the value
            if key.strip() == "metadata.name" and _path_segment(value):
                name = value
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(verb, path, resource, group, namespace, name, subresource)


def _path_segment(name: str) -> bool:
    """path.IsValidPathSegmentName, and not empty."""
    return name not in ("", ".", "..") and "/" not in name and "%" not in name


def forbidden(info: RequestInfo, user: str = ANONYMOUS) -> ApiError:
    """403 Forbidden as RBAC refuses ``user`` (responsewriters.forbiddenMessage, wrapped by
    apierrors.NewForbidden)."""
    if not info.is_resource:
        why = f'User "{user}" cannot {info.verb} path "{info.path}"'
        return ApiError(403, "Forbidden", f"forbidden: {why}", details={})
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    scope = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
    why = (
        f'User "{user}" cannot {info.verb} resource "{resource}" in API group "{info.group}" '
        f"{scope}"
    )
    qualified = f"{info.resource}.{info.group}" if info.group else info.resource
    details: StatusDetails = {}
    if info.name:
        details["name"] = info.name
    if info.group:
        details["group"] = info.group
    details["kind"] = info.resource
    named = f'{qualified} "{info.name}"' if info.name else qualified
    return ApiError(403, "Forbidden", f"{named} is forbidden: {why}", details=details)


@dataclass(frozen=True, slots=True)
class Certificate:
    """A PEM certificate and key; ``cert_pem`` is also the CA a client trusts."""

    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> tuple[Path, Path]:
        """Write ``tls.crt`` and ``tls.key`` (0600) into ``directory``; returns both paths."""
        crt, key = directory / "tls.crt", directory / "tls.key"
        _atomic_write(crt, self.cert_pem)
        _atomic_write(key, self.key_pem)
        return crt, key


def self_signed(hosts: list[str]) -> Certificate:
    """A self-signed ECDSA certificate valid for ``hosts`` (names or IPs) for one year."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpushift-twin")])
    alt: list[x509.GeneralName] = []
    for host in dict.fromkeys([*hosts, "localhost", "127.0.0.1"]):
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Certificate(
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def kubeconfig(
    *, server: str, token: str, ca_pem: bytes | None = None, name: str = "gpushift-twin"
) -> str:
    """A kubeconfig (YAML) whose current context reaches ``server`` with ``token``."""
    cluster: dict[str, object] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
        ],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(path: Path, **kwargs: object) -> Path:
    """Write :func:`kubeconfig` to ``path`` atomically with mode 0600; returns ``path``."""
    _atomic_write(path, kubeconfig(**kwargs).encode())  # type: ignore[arg-type]
    return path
