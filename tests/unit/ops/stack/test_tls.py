"""The local stack's CA and server certificates: a real TLS handshake verifies them, they are kept across starts,
and issued again when the hosts change or the end nears."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509

from ops.stack import tls


def handshake(cert: tls.ServerCert, server_name: str) -> str:
    """Serve one TLS handshake with the bundle and connect to it trusting only the CA; the negotiated version."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert.bundle)
    client_ctx = ssl.create_default_context(cafile=str(cert.ca))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True):
                    pass
            except ssl.SSLError:
                pass

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            client_ctx.wrap_socket(raw, server_hostname=server_name) as conn,
        ):
            version = conn.version() or ""
        thread.join(5)
    return version


def test_a_server_certificate_passes_a_verified_handshake_for_its_hosts(tmp_path: Path) -> None:
    cert = tls.server_cert(tmp_path, "kafka", ["localhost", "127.0.0.1"])
    assert handshake(cert, "localhost").startswith("TLS")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(cert, "elsewhere.example")


def test_keys_are_private_and_kept_across_starts(tmp_path: Path) -> None:
    first = tls.server_cert(tmp_path, "trino", ["localhost"])
    for path in (first.key, first.bundle, tmp_path / "ca-key.pem"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    pem = first.cert.read_bytes()
    again = tls.server_cert(tmp_path, "trino", ["localhost"])
    assert again.cert.read_bytes() == pem


def test_other_hosts_or_a_new_ca_issue_the_certificate_again(tmp_path: Path) -> None:
    first = tls.server_cert(tmp_path, "trino", ["localhost"]).cert.read_bytes()
    second = tls.server_cert(tmp_path, "trino", ["localhost", "10.0.0.7"])
    assert second.cert.read_bytes() != first
    sans = x509.load_pem_x509_certificate(second.cert.read_bytes()).extensions
    assert "10.0.0.7" in str(sans)
    issued = second.cert.read_bytes()
    (tmp_path / "ca.pem").unlink()
    third = tls.server_cert(tmp_path, "trino", ["localhost", "10.0.0.7"])
    assert third.cert.read_bytes() != issued
    assert handshake(third, "localhost").startswith("TLS")


def test_a_certificate_near_its_end_is_issued_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = tls.server_cert(tmp_path, "kafka", ["localhost"]).cert.read_bytes()
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=tls.SERVER_DAYS) - tls.RENEW_BEFORE + dt.timedelta(days=1)
    monkeypatch.setattr(tls, "_now", lambda: later)
    assert tls.server_cert(tmp_path, "kafka", ["localhost"]).cert.read_bytes() != first
