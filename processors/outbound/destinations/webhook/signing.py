"""Webhook signatures in the Standard Webhooks style, with key ids for rotation.

Headers of every delivery:

- ``webhook-id``: the delivery's idempotency key (the same on every retry), also sent as ``Idempotency-Key``;
- ``webhook-timestamp``: seconds since the epoch;
- ``webhook-signature``: space-separated ``v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>``, one per
  active key (two during a rotation);
- ``webhook-key-id``: the ids of those keys, space-separated, in the same order.

A secret written ``whsec_<base64>`` is used as the decoded bytes (as Standard Webhooks libraries do); any other
secret as its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
KEY_ID_HEADER = "webhook-key-id"
IDEMPOTENCY_HEADER = "Idempotency-Key"
DEFAULT_TOLERANCE_S = 300


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    secret: str = field(repr=False)


def key_bytes(secret: str) -> bytes:
    if secret.startswith("whsec_"):
        return base64.b64decode(secret.removeprefix("whsec_"))
    return secret.encode()


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(key_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def sign(keys: Sequence[SigningKey], message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    if not keys:
        raise ValueError("at least one signing key is needed")
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: " ".join(signature(k.secret, message_id, timestamp, body) for k in keys),
        KEY_ID_HEADER: " ".join(k.key_id for k in keys),
        IDEMPOTENCY_HEADER: message_id,
    }


class InvalidSignature(ValueError):
    pass


def verify(
    secret: str, headers: Mapping[str, str], body: bytes, now: int, tolerance_s: int = DEFAULT_TOLERANCE_S
) -> None:
    """What a receiver does: check the timestamp window, then compare in constant time against each signature."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        message_id, raw_ts, sigs = lowered[ID_HEADER], lowered[TIMESTAMP_HEADER], lowered[SIGNATURE_HEADER]
        timestamp = int(raw_ts)
    except (KeyError, ValueError):
        raise InvalidSignature("missing or malformed webhook headers") from None
    if abs(now - timestamp) > tolerance_s:
        raise InvalidSignature("timestamp outside the tolerance window")
    expected = signature(secret, message_id, timestamp, body)
    if not any(hmac.compare_digest(expected, candidate) for candidate in sigs.split(" ")):
        raise InvalidSignature("no signature matches")
