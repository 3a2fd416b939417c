"""One HTTP request to an address the SSRF guard already checked: no second DNS lookup, no redirects followed.

TLS still verifies the certificate against the host name (SNI and hostname check use the URL's host, the TCP
connection goes to the checked address).
"""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from metalake.net.ssrf import AddressGuard, RefusedAddress

MAX_RESPONSE_BYTES = 64 * 1024


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: Mapping[str, str]
    # The first ``max_body_bytes`` of the body (Freshdesk's answers carry the ticket id; webhooks ignore it).
    body: bytes = b""


def connect_checked(guard: AddressGuard, host: str, port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to ``host``: resolved once through ``guard``, connected to the address it checked.

    The only lookup of the connection, so a DNS answer that changes (rebinding) cannot slip in between the check
    and the connect. Raises :class:`RefusedAddress` before connecting anywhere. Also used by the ``requests``
    transport adapter of :mod:`processors.outbound.destinations.jira.pinned`.
    """
    return socket.create_connection((guard.resolve(host, port), port), timeout)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, guard: AddressGuard, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._guard = guard

    def connect(self) -> None:
        self.sock = connect_checked(self._guard, self.host, self.port, self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, guard: AddressGuard, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._guard = guard
        self._context = context

    def connect(self) -> None:
        raw = connect_checked(self._guard, self.host, self.port, self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    guard: AddressGuard,
    timeout_s: float,
    tls: ssl.SSLContext | None = None,
) -> HttpAnswer:
    """POST ``body``; ``tls`` defaults to the system's trust store with hostname checking."""
    return request("POST", url, body, headers, guard=guard, timeout_s=timeout_s, tls=tls)


def request(
    method: str,
    url: str,
    body: bytes | None,
    headers: Mapping[str, str],
    *,
    guard: AddressGuard,
    timeout_s: float,
    tls: ssl.SSLContext | None = None,
    max_body_bytes: int = MAX_RESPONSE_BYTES,
) -> HttpAnswer:
    """``method`` ``url`` with ``body``, connected to the checked address; a 3xx is returned, never followed."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedAddress("destination URL must be http(s) with a host")
    if parts.username or parts.password:
        raise RefusedAddress("destination URL must not carry credentials")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = _PinnedHTTPSConnection(parts.hostname, port, guard, timeout_s, tls or ssl.create_default_context())
    else:
        conn = _PinnedHTTPConnection(parts.hostname, port, guard, timeout_s)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, target, body=body, headers=dict(headers))
        response = conn.getresponse()
        data = response.read(max_body_bytes)
        return HttpAnswer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        conn.close()
