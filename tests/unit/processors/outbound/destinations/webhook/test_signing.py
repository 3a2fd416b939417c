"""Webhook signatures: the Standard Webhooks test vector, key rotation, and what a receiver refuses."""

from __future__ import annotations

import pytest

from processors.outbound.destinations.webhook.signing import InvalidSignature, SigningKey, sign, signature, verify

# The published Standard Webhooks (svix) example: secret, id, timestamp, body -> signature.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID, VECTOR_TS, VECTOR_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_standard_webhooks_vector() -> None:
    assert signature(VECTOR_SECRET, VECTOR_ID, VECTOR_TS, VECTOR_BODY) == VECTOR_SIGNATURE


def test_plain_secret_is_used_as_utf8_bytes() -> None:
    # HMAC-SHA256(b"key", b"id.1.{}") computed independently with `openssl dgst -sha256 -hmac key -binary | base64`.
    assert signature("key", "id", 1, b"{}") == "v1,5PVmP2AfJGwnp9flV+flrzfukNWA9zyUdqvI+IQalVs="


def test_rotation_sends_both_signatures_and_either_key_verifies() -> None:
    keys = [SigningKey("k2", "new-secret-0123456789"), SigningKey("k1", VECTOR_SECRET)]
    headers = sign(keys, "mld_1", VECTOR_TS, VECTOR_BODY)
    assert headers["webhook-key-id"] == "k2 k1"
    assert headers["Idempotency-Key"] == headers["webhook-id"] == "mld_1"
    assert headers["webhook-signature"].split(" ")[1] == signature(VECTOR_SECRET, "mld_1", VECTOR_TS, VECTOR_BODY)
    for key in keys:
        verify(key.secret, headers, VECTOR_BODY, now=VECTOR_TS + 10)


@pytest.mark.parametrize(
    ("change", "now"),
    [
        ({"body": b'{"test": 1}'}, VECTOR_TS),  # body tampered
        ({"webhook-id": "msg_other"}, VECTOR_TS),  # id swapped
        ({}, VECTOR_TS + 301),  # replayed too late
        ({"webhook-signature": "v1,AAAA"}, VECTOR_TS),
    ],
)
def test_receiver_refuses(change: dict[str, object], now: int) -> None:
    headers = sign([SigningKey("k1", VECTOR_SECRET)], VECTOR_ID, VECTOR_TS, VECTOR_BODY)
    body = change.pop("body", VECTOR_BODY)
    headers.update({k: str(v) for k, v in change.items()})
    assert isinstance(body, bytes)
    with pytest.raises(InvalidSignature):
        verify(VECTOR_SECRET, headers, body, now=now)


def test_missing_headers_are_refused() -> None:
    with pytest.raises(InvalidSignature):
        verify(VECTOR_SECRET, {}, b"", now=0)
