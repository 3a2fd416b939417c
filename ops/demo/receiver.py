"""The demo's webhook receiver: a loopback HTTP server that verifies each delivery's signature as docs/outbound.md
says (Standard Webhooks HMAC-SHA256 over ``<webhook-id>.<webhook-timestamp>.<body>``, constant-time comparison)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOLERANCE_S = 300


@dataclass(frozen=True)
class Delivery:
    webhook_id: str
    kind: str
    asset: str | None
    tag: str | None
    verified: bool
    reason: str
    # An incident's change (kind incidents.changed): its id (from the row's key) and its status after the change.
    incident_id: str | None = None
    status: str | None = None


def verify(secret: str, headers: dict[str, str], body: bytes, now: float | None = None) -> str | None:
    """None when one of the signatures matches ``secret`` and the timestamp is fresh, else why not."""
    try:
        msg_id, timestamp = headers["webhook-id"], int(headers["webhook-timestamp"])
        signatures = headers["webhook-signature"].split(" ")
    except (KeyError, ValueError):
        return "missing or malformed webhook-* headers"
    if abs((time.time() if now is None else now) - timestamp) > TOLERANCE_S:
        return "stale or future timestamp"
    key = base64.b64decode(secret[6:]) if secret.startswith("whsec_") else secret.encode()
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(digest).decode()
    return None if any(hmac.compare_digest(expected, s) for s in signatures) else "no signature matches"


def _object(value: Any) -> dict[str, Any]:  # noqa: ANN401
    return value if isinstance(value, dict) else {}


class WebhookReceiver:
    """Serves ``POST /hook`` on 127.0.0.1 (an ephemeral port) in a thread; ``deliveries`` grows as requests come."""

    def __init__(self, secret: str) -> None:
        self._secret = secret
        self._lock = threading.Lock()
        self._deliveries: list[Delivery] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, name="demo-webhooks", daemon=True)

    @property
    def secret(self) -> str:
        """The signing secret the subscription is given (write-only in the API; never printed)."""
        return self._secret

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def deliveries(self) -> list[Delivery]:
        with self._lock:
            return list(self._deliveries)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, headers: dict[str, str], body: bytes) -> None:
        reason = verify(self._secret, headers, body)
        try:
            doc: dict[str, Any] = json.loads(body)
        except ValueError:
            doc = {}
        change = doc.get("change") or {}
        data = _object(change.get("data"))
        key, state = _object(data.get("key")), _object(data.get("state"))
        delivery = Delivery(
            webhook_id=headers.get("webhook-id", ""),
            kind=str(doc.get("type", "?")),
            asset=change.get("asset"),
            tag=change.get("tag"),
            verified=reason is None,
            reason=reason or "signature verified",
            incident_id=key.get("incident_id"),
            status=state.get("status"),
        )
        with self._lock:
            # Deliveries are at least once: a resent webhook-id is the same delivery.
            if all(d.webhook_id != delivery.webhook_id for d in self._deliveries):
                self._deliveries.append(delivery)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver._record(headers, body)
                self.send_response(204 if self.path == "/hook" else 404)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: ANN401
                """Quiet: the demo prints its own summary."""

        return Handler
