"""Credentials of a twin: the bearer token, its self-signed TLS certificate and the kubeconfig.

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
from dataclasses import dataclass
from pathlib import Path

import yaml


def new_token() -> str:
    """A random bearer token (256 bits)."""
    return secrets.token_urlsafe(32)


def check_bearer(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (constant-time)."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), token.encode())


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
