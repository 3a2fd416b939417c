"""HTTP connections to an address the SSRF guard already checked: no second DNS lookup, so a DNS answer that changes
(rebinding) cannot slip in between the check and the connect. TLS still verifies the certificate against the host
name (SNI and hostname check use the URL's host; the TCP connection goes to the checked address).

Shared by the outbound destinations (``processors.outbound.runtime.pinned_http``) and the source connectors that
fetch from a tenant's endpoint (``metalake.s3_objects``)."""

from __future__ import annotations

import http.client
import socket
import ssl

from metalake.net.ssrf import AddressGuard


def connect_checked(guard: AddressGuard, host: str, port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to ``host``: resolved once through ``guard``, connected to the address it checked. Raises
    :class:`metalake.net.ssrf.RefusedAddress` before connecting anywhere."""
    return socket.create_connection((guard.resolve(host, port), port), timeout)


class PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, guard: AddressGuard, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._guard = guard

    def connect(self) -> None:
        self.sock = connect_checked(self._guard, self.host, self.port, self.timeout)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, guard: AddressGuard, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._guard = guard
        self._context = context

    def connect(self) -> None:
        raw = connect_checked(self._guard, self.host, self.port, self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def pinned_connection(
    scheme: str, host: str, port: int, guard: AddressGuard, timeout: float, tls: ssl.SSLContext | None
) -> http.client.HTTPConnection:
    """An ``https`` (``tls``, else the system's trust store with hostname checking) or ``http`` connection."""
    if scheme == "https":
        return PinnedHTTPSConnection(host, port, guard, timeout, tls or ssl.create_default_context())
    return PinnedHTTPConnection(host, port, guard, timeout)
