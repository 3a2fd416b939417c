"""Port probes on loopback."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ops.stack.health import port_free, port_open, tcp_probe

HOST = "127.0.0.1"


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound once, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
    return port


def test_a_listening_port_is_open_and_not_free(listener: int) -> None:
    assert port_open(HOST, listener, timeout_s=1.0) is True
    assert port_free(HOST, listener) is False
    assert tcp_probe(HOST, listener) is None


def test_a_closed_port_is_free_and_not_open(closed_port: int) -> None:
    assert port_open(HOST, closed_port, timeout_s=1.0) is False
    assert port_free(HOST, closed_port) is True
    assert tcp_probe(HOST, closed_port) == f"nothing listens on {HOST}:{closed_port}"
