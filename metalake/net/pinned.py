"""HTTP connections to an address the SSRF guard already checked: no second DNS lookup, so a DNS answer that changes
(rebinding) cannot slip in between the check and the connect. TLS still verifies the certificate against the host
name (SNI and hostname check use the URL's host; the TCP connection goes to the checked address).

Shared by the outbound destinations (``processors.outbound.runtime.pinned_http``) and the source connectors that
fetch from a tenant's endpoint (``connectors.dbt.s3_objects``)."""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl

from metalake.net.ssrf import AddressGuard, RefusedAddress


def refuse_plain_http(guard: AddressGuard, address: str) -> None:
    """The one rule for plain ``http://`` where a request carries a credential (a token or basic-auth header, a URL
    that is itself the credential such as a Teams ``sig=``): allowed only to an address the SSRF policy refuses and
    the allowlist (``ssrf_allow``) lets through, i.e. a test receiver the operator configured explicitly (loopback in
    the tests). Anywhere else the credential would cross networks in clear and redirects could not be refused."""
    if not guard.exempted(ipaddress.ip_address(address.split("%", 1)[0])):
        raise RefusedAddress("plain http is refused: the URL must be https (http only to an allowlisted test receiver)")


def connect_checked(
    guard: AddressGuard, host: str, port: int, timeout: float | None, *, require_tls: bool = False
) -> socket.socket:
    """A TCP connection to ``host``: resolved once through ``guard``, connected to the address it checked. Raises
    :class:`metalake.net.ssrf.RefusedAddress` before connecting anywhere; with ``require_tls`` (a plain http
    connection that will carry a credential) also where :func:`refuse_plain_http` refuses the address."""
    address = guard.resolve(host, port)
    if require_tls:
        refuse_plain_http(guard, address)
    return socket.create_connection((address, port), timeout)


class PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, guard: AddressGuard, timeout: float, *, require_tls: bool = False) -> None:
        super().__init__(host, port, timeout=timeout)
        self._guard, self._require_tls = guard, require_tls

    def connect(self) -> None:
        self.sock = connect_checked(self._guard, self.host, self.port, self.timeout, require_tls=self._require_tls)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, guard: AddressGuard, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._guard = guard
        self._context = context

    def connect(self) -> None:
        raw = connect_checked(self._guard, self.host, self.port, self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def pinned_connection(  # noqa: PLR0913
    scheme: str,
    host: str,
    port: int,
    guard: AddressGuard,
    timeout: float,
    tls: ssl.SSLContext | None,
    *,
    require_tls: bool = False,
) -> http.client.HTTPConnection:
    """An ``https`` (``tls``, else the system's trust store with hostname checking) or ``http`` connection; with
    ``require_tls`` a plain http one only where :func:`refuse_plain_http` allows it."""
    if scheme == "https":
        return PinnedHTTPSConnection(host, port, guard, timeout, tls or ssl.create_default_context())
    return PinnedHTTPConnection(host, port, guard, timeout, require_tls=require_tls)
