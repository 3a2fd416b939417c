"""One HTTP request to an address the SSRF guard already checked (:mod:`metalake.net.pinned`): no second DNS lookup,
no redirects followed, plain http only to an allowlisted test receiver (every outbound request carries a credential
or a tenant's data: :func:`metalake.net.pinned.refuse_plain_http`)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from metalake.net.pinned import pinned_connection
from metalake.net.ssrf import AddressGuard, RefusedAddress

MAX_RESPONSE_BYTES = 64 * 1024


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: Mapping[str, str]
    # The first ``max_body_bytes`` of the body (Freshdesk's answers carry the ticket id; webhooks ignore it).
    body: bytes = b""


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


def request(  # noqa: PLR0913
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
    conn = pinned_connection(parts.scheme, parts.hostname, port, guard, timeout_s, tls, require_tls=True)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request(method, target, body=body, headers=dict(headers))
        response = conn.getresponse()
        data = response.read(max_body_bytes)
        return HttpAnswer(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    finally:
        conn.close()
