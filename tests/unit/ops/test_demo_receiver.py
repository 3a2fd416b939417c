"""The demo's webhook receiver: signature verification (the Standard Webhooks vector) and what it records."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import urllib.request

from ops.demo.receiver import WebhookReceiver, verify

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HEADERS = {
    "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
    "webhook-timestamp": "1614265330",
    "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
}
BODY = b'{"test": 2432232314}'


def test_the_standard_webhooks_vector_verifies() -> None:
    assert verify(SECRET, HEADERS, BODY, now=1614265330) is None
    # Any of several space-separated signatures (a key rotation) may match.
    rotated = {**HEADERS, "webhook-signature": "v1,AAAA " + HEADERS["webhook-signature"]}
    assert verify(SECRET, rotated, BODY, now=1614265330) is None


def test_tampering_staleness_and_missing_headers_are_refused() -> None:
    assert verify(SECRET, HEADERS, BODY + b" ", now=1614265330) == "no signature matches"
    assert verify("whsec_" + base64.b64encode(b"another key!!").decode(), HEADERS, BODY, now=1614265330) == (
        "no signature matches"
    )
    assert verify(SECRET, HEADERS, BODY, now=1614265330 + 301) == "stale or future timestamp"
    assert verify(SECRET, {"webhook-id": "x"}, BODY) == "missing or malformed webhook-* headers"


def _post(url: str, secret: str, msg_id: str, body: bytes, *, sign_with: str | None = None) -> None:
    ts = str(int(time.time()))
    key = (sign_with or secret).encode()
    sig = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
    headers = {"webhook-id": msg_id, "webhook-timestamp": ts, "webhook-signature": f"v1,{sig}"}
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - loopback test URL
    with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310
        assert resp.status == 204


def test_the_receiver_records_each_delivery_once_with_its_verdict() -> None:
    secret = "a-demo-secret-of-24-chars"
    change = {"asset": "urn:metalake:postgres:p/db/s/t/c", "tag": "PII"}
    body = json.dumps({"type": "classification.added", "change": change}).encode()
    with WebhookReceiver(secret) as receiver:
        assert receiver.url.startswith("http://127.0.0.1:")
        _post(receiver.url, secret, "msg_1", body)
        _post(receiver.url, secret, "msg_1", body)  # a retry of the same delivery
        _post(receiver.url, secret, "msg_2", body, sign_with="the-wrong-secret-0000000")
        got = receiver.deliveries()
    assert [(d.webhook_id, d.kind, d.asset, d.tag, d.verified) for d in got] == [
        ("msg_1", "classification.added", change["asset"], "PII", True),
        ("msg_2", "classification.added", change["asset"], "PII", False),
    ]
    assert got[1].reason == "no signature matches"


def test_an_incident_change_is_recorded_with_its_id_and_status() -> None:
    secret = "a-demo-secret-of-24-chars"
    table = "urn:metalake:postgres:shop-prod/shop/public/customers"
    # What outbound sends for a row of the incidents table (io.metalake.state.changed.v1, kind incidents.changed).
    data = {
        "table": "incidents",
        "key": {"incident_id": "f83867b6", "urn": table},
        "deleted": False,
        "version": 1,
        "state": {"status": "opened", "summary": "0 rows"},
    }
    body = json.dumps({"type": "incidents.changed", "change": {"asset": table, "tag": None, "data": data}}).encode()
    with WebhookReceiver(secret) as receiver:
        _post(receiver.url, secret, "msg_1", body)
        # A change without a row (propagation.completed) or with a malformed one records no incident.
        _post(receiver.url, secret, "msg_2", json.dumps({"type": "x", "change": {"data": {"key": "k"}}}).encode())
        got = receiver.deliveries()
    assert [(d.kind, d.asset, d.incident_id, d.status, d.verified) for d in got] == [
        ("incidents.changed", table, "f83867b6", "opened", True),
        ("x", None, None, None, True),
    ]
