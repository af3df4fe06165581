"""Certificates, keys and kubeconfigs for a control plane on loopback.

One CA signs the API server's serving certificate and an admin client certificate in
``system:masters`` (the group kube-apiserver authorizes for everything); a separate key pair
signs service-account tokens. The layout follows kubeadm's (``ca.crt``, ``apiserver.crt``,
``sa.key``, ``sa.pub``), made with ``cryptography`` and ECDSA P-256 keys, which kube-apiserver
accepts for serving, client certificates and ES256 service-account tokens.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

#: The admin identity; kube-apiserver's authorizer lets ``system:masters`` do anything.
ADMIN_USER = "gpushift-admin"
ADMIN_GROUP = "system:masters"


@dataclass(frozen=True, slots=True)
class Pki:
    """Paths of the files :func:`make_pki` wrote, and the PEM data a kubeconfig embeds."""

    directory: Path
    ca_pem: bytes
    admin_cert_pem: bytes
    admin_key_pem: bytes

    @property
    def ca_crt(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def apiserver_crt(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def admin_crt(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def make_pki(directory: Path, *, service_ip: str = "10.0.0.1") -> Pki:
    """Write the CA, the serving and admin certificates and the service-account keys.

    The serving certificate names loopback and, as kubeadm's does, the ``kubernetes`` Service
    (``service_ip`` and its DNS names), so in-cluster clients would verify it too.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=30)
    pem = serialization.Encoding.PEM

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def name(cn: str, org: str | None = None) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        return x509.Name(attrs)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("gpushift-upstream-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(
        subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]
    ) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        return cert.public_bytes(pem), key_pem(key)

    serving = [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(service_ip)),
        *(
            x509.DNSName(n)
            for n in (
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            )
        ),
    ]
    server_crt, server_key = leaf(name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, serving)
    admin_crt, admin_key = leaf(name(ADMIN_USER, ADMIN_GROUP), ExtendedKeyUsageOID.CLIENT_AUTH, [])
    sa = ec.generate_private_key(ec.SECP256R1())
    ca_pem = ca.public_bytes(pem)

    pki = Pki(directory, ca_pem, admin_crt, admin_key)
    _write(pki.ca_crt, ca_pem)
    _write(pki.apiserver_crt, server_crt)
    _write(pki.apiserver_key, server_key)
    _write(pki.admin_crt, admin_crt)
    _write(pki.admin_key, admin_key)
    _write(pki.sa_key, key_pem(sa))
    _write(
        pki.sa_pub,
        sa.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    return pki


def kubeconfig(pki: Pki, *, server: str, name: str = "gpushift-upstream") -> str:
    """A kubeconfig (YAML) for the admin user, certificates embedded, as kubectl and the
    official Python client read it."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": b64(pki.ca_pem)},
            }
        ],
        "users": [
            {
                "name": ADMIN_USER,
                "user": {
                    "client-certificate-data": b64(pki.admin_cert_pem),
                    "client-key-data": b64(pki.admin_key_pem),
                },
            }
        ],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": name, "user": ADMIN_USER, "namespace": "default"},
            }
        ],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(path: Path, text: str) -> Path:
    """Write a kubeconfig with mode 0600, atomically (a temporary file and a rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        _write(tmp, text.encode())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
