"""HTTPS to a pinned address: the TCP connection goes to the address the guard checked, while SNI and the
certificate check still use the URL's host name (so pinning does not weaken TLS)."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from metalake.net.ssrf import AddressGuard, RefusedAddress
from processors.outbound.runtime.pinned_http import post
from tests._support.selfsigned import self_signed


def _certificate(tmp: Path) -> tuple[Path, Path]:
    return self_signed(tmp, "hooks.test")


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[int, Path, list[str]]]:
    cert, key = _certificate(tmp_path)
    hosts: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hosts.append(self.headers["Host"])
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], cert, hosts
    server.shutdown()
    server.server_close()


def test_https_connects_to_the_checked_address_and_verifies_the_host_name(
    tls_server: tuple[int, Path, list[str]],
) -> None:
    port, cert, hosts = tls_server
    lookups: list[str] = []

    def resolver(host: str, _port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    guard = AddressGuard.from_settings(["127.0.0.0/8"], resolver=resolver)
    trust = ssl.create_default_context(cafile=str(cert))
    answer = post(f"https://hooks.test:{port}/in", b"{}", {}, guard=guard, timeout_s=5, tls=trust)
    assert answer.status == 204 and hosts == [f"hooks.test:{port}"] and lookups == ["hooks.test"]

    # The same server reached under a name its certificate does not carry: refused by the TLS check.
    other = AddressGuard.from_settings(["127.0.0.0/8"], resolver=lambda host, _port: ["127.0.0.1"])
    with pytest.raises(ssl.SSLCertVerificationError):
        post(f"https://evil.test:{port}/in", b"{}", {}, guard=other, timeout_s=5, tls=trust)


def test_post_refuses_before_connecting() -> None:
    guard = AddressGuard.from_settings((), resolver=lambda host, port: ["169.254.169.254"])
    for url in ("http://169.254.169.254/latest/meta-data", "ftp://example.com/x", "http://user:pw@example.com/"):
        with pytest.raises(RefusedAddress):
            post(url, b"{}", {}, guard=guard, timeout_s=1)
