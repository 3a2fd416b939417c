"""The SSRF guard: internal addresses refused in every spelling, public ones passed, the allowlist honoured, and a
host refused if any of its addresses is internal."""

from __future__ import annotations

import ipaddress

import pytest

from metalake.net.ssrf import AddressGuard, RefusedAddress

REFUSED = [
    "127.0.0.1",
    "127.9.9.9",
    "0.0.0.0",  # noqa: S104 - an address to refuse, not one to bind
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",  # AWS/GCP/Azure metadata
    "169.254.170.2",  # ECS task metadata
    "100.100.100.200",  # Alibaba metadata (shared address space)
    "100.64.0.1",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.1",  # documentation
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fec0::1",  # site-local (deprecated by RFC 3879, yet routed inside some networks; not "global" to Python)
    "fd00:ec2::254",  # AWS metadata over IPv6
    "ff02::1",
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


def _guard(addresses: list[str], allow: tuple[str, ...] = ()) -> AddressGuard:
    return AddressGuard.from_settings(allow, resolver=lambda host, port: addresses)


@pytest.mark.parametrize("address", REFUSED)
def test_internal_addresses_are_refused(address: str) -> None:
    with pytest.raises(RefusedAddress):
        _guard([address]).resolve("hooks.example.com", 443)
    with pytest.raises(RefusedAddress):
        _guard([]).resolve(f"[{address}]" if ":" in address else address, 443)


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass_and_are_what_to_connect_to(address: str) -> None:
    assert ipaddress.ip_address(_guard([address]).resolve("hooks.example.com", 443)) == ipaddress.ip_address(address)


def test_one_internal_address_among_public_ones_refuses_the_host() -> None:
    with pytest.raises(RefusedAddress, match="private"):
        _guard(["93.184.216.34", "10.0.0.5"]).resolve("rebind.example.com", 443)


def test_the_allowlist_lets_a_network_through_and_nothing_else() -> None:
    guard = _guard(["127.0.0.1"], allow=("127.0.0.0/8",))
    assert guard.resolve("localhost", 8080) == "127.0.0.1"
    with pytest.raises(RefusedAddress):
        _guard(["169.254.169.254"], allow=("127.0.0.0/8",)).resolve("metadata", 80)
