"""The SSRF guard for where tenants send or read (outbound URLs, source connectors' hosts): resolve once,
refuse internal addresses, connect to what was checked.

Refused: loopback, private (RFC 1918, ULA), site-local (``fec0::/10``), link-local (incl. 169.254.169.254),
multicast, reserved, unspecified, shared (CGNAT, 100.64/10, where some clouds keep metadata), documentation and
every other non-global range, plus the cloud metadata addresses by name. IPv6 forms that embed an IPv4 address
(IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4, Teredo) are judged by that IPv4 address too. A host
is refused if *any* of its addresses is, so DNS cannot smuggle an internal address in next to a public one; the
caller connects to the returned address, so there is no second lookup to rebind. ``allow`` (settings
``outbound.ssrf_allow`` and ``connect.ssrf_allow``) lists networks to let through, for the local stack and tests
whose receivers and sources are on loopback.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metalake.net.deadline import note_peer

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192", "fd00:ec2::254")
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class RefusedAddress(ValueError):
    """The destination resolves to an address no tenant may reach. The message names the address class."""


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` is refused, or ``None`` if it is a public address."""
    if address in METADATA_ADDRESSES:
        return "cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            # ::ffff:a.b.c.d is a.b.c.d on the wire: judged as that IPv4 address alone.
            return refusal(address.ipv4_mapped)
        embedded = _embedded_v4(address)
        if embedded is not None:
            inner = refusal(embedded)
            if inner is not None:
                return f"{inner} (embedded in IPv6)"
    for label, flag in (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        # fec0::/10: Python counts it as global, but it was the IPv6 private range and still routes internally.
        ("site-local", isinstance(address, ipaddress.IPv6Address) and address.is_site_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
    ):
        if flag:
            return f"{label} address"
    if not address.is_global:
        return "non-global address"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class AddressGuard:
    allow: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    resolver: Resolver = system_resolver

    @classmethod
    def from_settings(cls, allow: Sequence[str], resolver: Resolver = system_resolver) -> AddressGuard:
        return cls(tuple(ipaddress.ip_network(a, strict=False) for a in allow), resolver)

    def _allowed(self, address: IPAddress) -> bool:
        return any(address.version == net.version and address in net for net in self.allow)

    def check_address(self, address: IPAddress) -> None:
        reason = refusal(address)
        if reason is not None and not self._allowed(address):
            raise RefusedAddress(f"destination resolves to a {reason}")

    def exempted(self, address: IPAddress) -> bool:
        """Whether ``address`` gets through only because the allowlist lets it (the policy itself refuses it)."""
        return refusal(address) is not None and self._allowed(address)

    def resolve(self, host: str, port: int) -> str:
        """The address to connect to for ``host``; raises :class:`RefusedAddress` if any address is refused."""
        try:
            literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is not None:
            candidates = [literal]
        else:
            # A lookup failure (OSError) propagates: it may be transient, so the caller retries it.
            candidates = [ipaddress.ip_address(a.split("%", 1)[0]) for a in self.resolver(host, port)]
        if not candidates:
            raise RefusedAddress("destination host does not resolve")
        for address in candidates:
            self.check_address(address)
        # The thread's delivery deadline (metalake.net.deadline) covers what is connected to this address.
        note_peer(str(candidates[0]), port)
        return str(candidates[0])
