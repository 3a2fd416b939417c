"""The crawler's TLS and password defaults against an on-path attacker (issue 21, item 19), with the real libpq.

Before: ``sslmode=prefer`` took any certificate and ``require_auth`` allowed ``password``, so whoever answered on the
path (a self-signed certificate, then "send me your password in clear") got the stored password. Now the default is
``verify-full`` against the system's CAs or the operator's bundle (``connect.source_tls_ca_file``), and cleartext is
refused unless a configuration allows it explicitly."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from connectors.postgres.catalog import CatalogError, list_databases
from connectors.postgres.config import PostgresCatalogConfig
from control.connectors.plugin import SourceAccess
from control.connectors.settings import ConnectSettings
from metalake.net.ssrf import AddressGuard
from ops.stack.tls import server_cert

SECRET = "the-stored-password"
_SSL_REQUEST, _GSSENC_REQUEST = 80877103, 80877104


@dataclass
class _OnPath:
    """Speaks just enough PostgreSQL to be taken for the server: TLS with its own certificate, then it asks for the
    password in clear (AuthenticationCleartextPassword) and keeps what it is sent."""

    port: int
    ca: Path
    captured: list[bytes] = field(default_factory=list)


def _read(conn: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _serve_one(raw: socket.socket, context: ssl.SSLContext, server: _OnPath) -> None:
    conn: Any = raw
    while True:  # SSLRequest (and a GSSENCRequest, refused, if libpq tries one first)
        length, code = struct.unpack("!ii", _read(conn, 8))
        if code == _GSSENC_REQUEST:
            conn.sendall(b"N")
            continue
        if code != _SSL_REQUEST:
            return
        conn.sendall(b"S")
        conn = context.wrap_socket(conn, server_side=True)
        break
    (length,) = struct.unpack("!i", _read(conn, 4))
    _read(conn, length - 4)  # the startup message: user, database
    conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # cleartext password, please
    kind, length = struct.unpack("!ci", _read(conn, 5))
    if kind == b"p":
        server.captured.append(_read(conn, length - 4).rstrip(b"\x00"))
    error = b"SFATAL\x00C28P01\x00Mpassword authentication failed for user\x00\x00"
    conn.sendall(b"E" + struct.pack("!i", len(error) + 4) + error)


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[_OnPath]:
    issued = server_cert(tmp_path / "tls", "db", ["127.0.0.1"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(issued.bundle)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    server = _OnPath(listener.getsockname()[1], issued.ca)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            with raw:
                raw.settimeout(5)
                try:
                    _serve_one(raw, context, server)
                except (OSError, ConnectionError, struct.error):
                    pass  # the client gave up (a certificate it refused): what the tests expect

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield server
    stop.set()
    thread.join()
    listener.close()


def _crawl(server: _OnPath, ca_file: str | None = None, **config: Any) -> CatalogError:
    values = {"host": "127.0.0.1", "port": server.port, "user": "crawler", "password": SECRET, "instance": "i"}
    pg = PostgresCatalogConfig(**values, connect_timeout_s=3, **config)
    access = SourceAccess(AddressGuard.from_settings(["127.0.0.0/8"]), tls_ca_file=ca_file)
    with pytest.raises(CatalogError) as err:
        list_databases(pg, access)
    return err.value


def test_by_default_an_on_path_server_gets_no_password(on_path: _OnPath) -> None:
    failure = _crawl(on_path)  # its certificate is signed by no CA the worker trusts
    assert failure.error_class == "tls-failed" and "config/sslmode verify-full" in failure.message
    assert on_path.captured == []


def test_a_verified_server_asking_for_cleartext_is_refused_unless_allowed(on_path: _OnPath) -> None:
    failure = _crawl(on_path, ca_file=str(on_path.ca))  # TLS verified (the operator's CA): a genuine server
    assert failure.error_class == "authentication-failed"
    assert on_path.captured == []
    # The explicit opt-out for an old server that knows only "password": sent, over the verified connection.
    _crawl(on_path, ca_file=str(on_path.ca), allow_cleartext_password=True)
    assert on_path.captured == [SECRET.encode()]


def test_the_defaults_and_the_explicit_opt_outs() -> None:
    config = PostgresCatalogConfig(host="db.example.com", user="u", password=SECRET, instance="i")
    kwargs = config.connect_kwargs("shop", "93.184.216.34")
    assert (kwargs["sslmode"], kwargs["sslrootcert"], kwargs["require_auth"]) == (
        "verify-full",
        "system",
        "md5,scram-sha-256",
    )
    assert config.connect_kwargs("shop", "93.184.216.34", ca_file="/etc/ca.pem")["sslrootcert"] == "/etc/ca.pem"
    local = config.model_copy(update={"sslmode": "disable", "allow_cleartext_password": True})
    kwargs = local.connect_kwargs("shop", "127.0.0.1")
    assert "sslrootcert" not in kwargs and kwargs["require_auth"] == "md5,scram-sha-256,password"
    # Turning either opt-out on is a change of endpoint: the stored password must be given again.
    assert {"sslmode", "allow_cleartext_password"} <= set(PostgresCatalogConfig.endpoint_fields)


def test_the_worker_passes_its_ca_bundle() -> None:
    connect = ConnectSettings(source_tls_ca_file="/etc/metalake/rds-ca.pem")
    assert SourceAccess.from_settings(connect).tls_ca_file == "/etc/metalake/rds-ca.pem"
    assert SourceAccess.from_settings(ConnectSettings()).tls_ca_file is None
