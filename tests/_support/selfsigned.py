"""A TLS certificate for a made-up host name, issued by a throwaway CA (the local stack's own CA code,
``ops.stack.tls``), for tests of pinned HTTPS connections."""

from __future__ import annotations

from pathlib import Path

from ops.stack.tls import server_cert


def self_signed(tmp: Path, hostname: str) -> tuple[Path, Path]:
    """``(chain.pem, key.pem)`` in ``tmp``: the certificate for ``hostname`` followed by its CA's. A server serves the
    chain with the key; a client trusts the chain (the CA in it)."""
    issued = server_cert(tmp / "tls", hostname, [hostname])
    chain = tmp / "chain.pem"
    chain.write_bytes(issued.cert.read_bytes() + issued.ca.read_bytes())
    return chain, issued.key
