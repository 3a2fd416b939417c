"""The local stack's certificate authority, and the server certificates it issues (Kafka's SASL_SSL listener, Trino's
HTTPS): production brings its own PKI; the local stack makes a self-signed CA once, under ``<stack>/tls``, so the
clients are configured exactly as in production (a CA file to trust, a host name to verify).

Every file is PEM. A server's bundle holds its private key (PKCS#8, unencrypted: the file is 0600, and both Kafka's
``ssl.keystore.type=PEM`` and Trino's PEM keystore take this form) followed by its certificate and the CA's.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVER_DAYS = 825
# A certificate this close to its end is issued again at the next start, so a long-lived checkout never fails a
# handshake on an expired local certificate.
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class ServerCert:
    """Where a server's files are: ``bundle`` (key + certificate + CA), ``cert`` and ``key`` apart, and ``ca``."""

    bundle: Path
    cert: Path
    key: Path
    ca: Path


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    """Write atomically; private files are created 0600 (never briefly readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    tmp.replace(path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _valid(cert_path: Path, names: frozenset[str] | None = None) -> bool:
    """Whether the certificate exists, is not near its end and (for a server) names exactly ``names``."""
    if not cert_path.is_file():
        return False
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    if cert.not_valid_after_utc - RENEW_BEFORE < _now():
        return False
    if names is None:
        return True
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    held = {str(n) for n in sans.get_values_for_type(x509.DNSName)}
    held |= {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    return held == names


def local_ca(tls_dir: Path) -> tuple[Path, Path]:
    """The stack's CA (certificate, key), made on first use and kept: every client trusts its certificate."""
    cert_path, key_path = tls_dir / "ca.pem", tls_dir / "ca-key.pem"
    if _valid(cert_path) and key_path.is_file():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "metalake local stack CA")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - dt.timedelta(minutes=5))
        .not_valid_after(_now() + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _key_pem(key), private=True)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def server_cert(tls_dir: Path, name: str, hosts: list[str]) -> ServerCert:
    """A certificate for server ``name`` valid for ``hosts`` (DNS names or IP addresses), issued by the stack's CA;
    issued again when missing, near its end, or made for other hosts (or by a CA made since)."""
    ca_cert_path, ca_key_path = local_ca(tls_dir)
    out = ServerCert(
        bundle=tls_dir / f"{name}.pem",
        cert=tls_dir / f"{name}-cert.pem",
        key=tls_dir / f"{name}-key.pem",
        ca=ca_cert_path,
    )
    ca_cert = x509.load_pem_x509_certificate(ca_cert_path.read_bytes())
    if _valid(out.cert, frozenset(hosts)) and out.bundle.is_file() and out.key.is_file():
        issuer = x509.load_pem_x509_certificate(out.cert.read_bytes()).issuer
        if issuer == ca_cert.subject and _signed_by(out.cert, ca_cert):
            return out
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca_key_path}: the stack's CA key is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - dt.timedelta(minutes=5))
        .not_valid_after(_now() + dt.timedelta(days=SERVER_DAYS))
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = _key_pem(key)
    _write(out.key, key_pem, private=True)
    _write(out.cert, cert_pem)
    _write(out.bundle, key_pem + cert_pem + ca_cert_path.read_bytes(), private=True)
    return out


def _signed_by(cert_path: Path, ca_cert: x509.Certificate) -> bool:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
