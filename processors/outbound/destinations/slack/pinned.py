"""slack-sdk's ``WebClient`` connected to the address the SSRF guard checked, TLS still verifying the host name.

``WebClient`` opens every connection through urllib (``urlopen(request, context=client.ssl)``) and has no resolver,
opener or session hook, but its public options are enough to pin it without touching the SDK:

- ``base_url`` names the checked address instead of the host (``https://203.0.113.7:443/api/``, IPv6 in brackets),
  so urllib has no name to look up: one lookup (the guard's) per client, no DNS-rebinding window;
- ``headers`` carries ``Host`` with the configured host (urllib sends an explicit ``Host`` as it is);
- ``ssl`` is a :class:`PinnedTLSContext`: it hands the configured host name to TLS whatever name urllib passes (SNI
  and the certificate's hostname check), refuses a socket connected anywhere but the checked address and port
  before the handshake, and refuses a redirect status before urllib reads it. urllib would follow a 301/302/303 as a
  GET, with the bot token, to any host, https or plain http; Slack's API never redirects.

Plain http has no TLS layer to hook, so its redirects cannot be stopped: an ``http://`` base URL is accepted only
for an address that only the allowlist (``outbound.ssrf_allow``, the tests' local stand-in) lets through.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from slack_sdk import WebClient

from metalake.net.pinned import refuse_plain_http
from metalake.net.ssrf import AddressGuard, IPAddress, RefusedAddress

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# http.client's own limit for a status or header line (it raises LineTooLong beyond it).
_MAX_LINE = 65536


class RedirectRefused(RefusedAddress):
    """The server answered with a redirect; outbound never follows one."""


class _StatusWatch:
    """Reads the start of a response the way ``http.client`` does and refuses a 3xx final status.

    ``http.client`` skips ``100 Continue`` responses (status line, then header lines up to an empty one) and takes
    the next status line as the answer; this mirrors its parsing (ISO-8859-1, ``split(None, 2)``, ``int()``) so a
    status it would read as 3xx is never let through.
    """

    def __init__(self) -> None:
        self.done = False
        self._pending = b""
        self._in_continue_headers = False

    def feed(self, data: bytes) -> None:
        self._pending += data
        while not self.done:
            end = self._pending.find(b"\n")
            if end < 0:
                # A line longer than http.client accepts makes it fail on its own.
                self.done = len(self._pending) > _MAX_LINE
                return
            line, self._pending = self._pending[:end], self._pending[end + 1 :]
            if self._in_continue_headers:
                self._in_continue_headers = line not in (b"\r", b"")
            else:
                self._status_line(str(line, "iso-8859-1"))
        self._pending = b""

    def _status_line(self, line: str) -> None:
        parts = line.split(None, 2)
        try:
            status = int(parts[1]) if len(parts) >= 2 and parts[0].startswith("HTTP/") else None
        except ValueError:
            status = None
        if status == 100:
            self._in_continue_headers = True
        elif status is not None and 300 <= status <= 399:
            raise RedirectRefused(f"slack answered a redirect ({status}); redirects are not followed")
        else:
            self.done = True  # a final status that is not a redirect, or one http.client refuses itself


class _WatchedSSLSocket(ssl.SSLSocket):
    # http.client reads a response through socket.makefile(), i.e. recv_into(); urllib sends "Connection: close",
    # so a socket carries one response. SSLSocket instances are made by _create(), not __init__: state is lazy.
    def recv_into(self, buffer: WriteableBuffer, nbytes: int | None = None, flags: int = 0) -> int:
        count = super().recv_into(buffer, nbytes, flags)
        watch: _StatusWatch = self.__dict__.setdefault("_metalake_status_watch", _StatusWatch())
        if not watch.done:
            watch.feed(bytes(memoryview(buffer)[:count]))
        return count


class PinnedTLSContext(ssl.SSLContext):
    """A client context for one pinned host: see the module docstring. Build it with :func:`pinned_tls_context`."""

    sslsocket_class = _WatchedSSLSocket
    pinned_host: str
    pinned_peer: tuple[IPAddress, int] | None

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        if self.pinned_peer is not None:
            host, port = sock.getpeername()[:2]
            if (ipaddress.ip_address(str(host).split("%", 1)[0]), port) != self.pinned_peer:
                # urllib connected somewhere else (a redirect the status check did not see): no byte goes there.
                raise RefusedAddress("slack connection is not to the address the guard checked")
        return super().wrap_socket(
            sock,
            server_side=server_side,
            do_handshake_on_connect=do_handshake_on_connect,
            suppress_ragged_eofs=suppress_ragged_eofs,
            server_hostname=self.pinned_host,
            session=session,
        )


def pinned_tls_context(host: str, peer: tuple[IPAddress, int] | None, cafile: str | None = None) -> PinnedTLSContext:
    """TLS for ``host`` (SNI and certificate check) over a connection to ``peer`` (``None``: through a proxy).

    Trusts the system's store unless ``cafile`` names the certificates to trust instead.
    """
    context = PinnedTLSContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and its host name
    if cafile is None:
        context.load_default_certs()
    else:
        context.load_verify_locations(cafile=cafile)
    context.pinned_host = host
    context.pinned_peer = peer
    return context


def pinned_web_client(
    base_url: str,
    *,
    guard: AddressGuard,
    token: str,
    timeout: int,
    cafile: str | None = None,
) -> WebClient:
    """A ``WebClient`` for ``base_url`` whose connections go to the address ``guard`` checked for its host.

    Raises :class:`RefusedAddress` (before any connection) for a refused address, a URL that is not http(s) with a
    host, carries credentials, or is plain http to an address the policy does not refuse. SDK retries are off (the
    outbound runtime retries). A proxy from the environment (``HTTPS_PROXY``, which ``WebClient`` reads) gets the
    checked address as its target (``CONNECT 203.0.113.7:443``), so it does not resolve the name either.
    """
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RefusedAddress("slack base_url must be http(s) with a host")
    if parts.username is not None or parts.password is not None:
        raise RefusedAddress("slack base_url must not carry credentials")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise RefusedAddress("slack base_url has an invalid port") from None
    address = ipaddress.ip_address(guard.resolve(parts.hostname, port))
    if parts.scheme == "http":
        refuse_plain_http(guard, str(address))
    literal = f"[{address}]" if address.version == 6 else str(address)
    client = WebClient(
        token=token,
        base_url=urlunsplit((parts.scheme, f"{literal}:{port}", parts.path, parts.query, "")),
        timeout=timeout,
        headers={"Host": parts.netloc},
        retry_handlers=[],
    )
    if parts.scheme == "https":
        # Through a proxy the socket is connected to the proxy, which connects to the checked address.
        client.ssl = pinned_tls_context(parts.hostname, None if client.proxy else (address, port), cafile)
    return client
