"""Forging JWTs for the attack tests: any header, any claims, any key (or none)."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, OctKey, RSAKey

ISSUER = "https://issuer.test"
AUDIENCE = "metalake-api"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    out: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "mlc_test",
        "client_id": "mlc_test",
        "iat": now,
        "nbf": now,
        "exp": now + 300,
        "jti": "j1",
        "scope": "tenant:read sql:read",
        "tenant": "acme",
    }
    out.update(overrides)
    return {k: v for k, v in out.items() if v is not None}


def sign(key: RSAKey | ECKey | OctKey, header: dict[str, Any], body: dict[str, Any]) -> str:
    return jwt.encode(header, body, key, algorithms=[header["alg"]])


def unsigned(header: dict[str, Any], body: dict[str, Any], signature: bytes = b"") -> str:
    """A token with whatever header (alg none included) and an arbitrary signature segment."""
    return ".".join([b64(json.dumps(header).encode()), b64(json.dumps(body).encode()), b64(signature)])


def hs256_with_public_key(public_pem: bytes, header: dict[str, Any], body: dict[str, Any]) -> str:
    """The classic confusion attack: HMAC the token with the server's *public* key as the secret."""
    import hashlib
    import hmac

    head = b64(json.dumps({**header, "alg": "HS256"}).encode())
    payload = b64(json.dumps(body).encode())
    mac = hmac.new(public_pem, f"{head}.{payload}".encode(), hashlib.sha256).digest()
    return f"{head}.{payload}.{b64(mac)}"
