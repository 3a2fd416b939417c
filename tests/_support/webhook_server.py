"""A webhook receiver that verifies signatures as docs/outbound.md tells receivers to, and records deliveries."""

from __future__ import annotations

import time
from typing import Any

from processors.outbound.destinations.webhook.signing import InvalidSignature, verify
from tests._support.fake_http import FakeServer, Reply, Seen


class WebhookServer(FakeServer):
    def __init__(self, secret: str) -> None:
        super().__init__()
        self.secret = secret
        self.verified: list[dict[str, Any]] = []
        self.rejected = 0

    def route(self, req: Seen) -> Reply:
        try:
            verify(self.secret, req.headers, req.body, int(time.time()))
        except InvalidSignature:
            self.rejected += 1
            return Reply(401, {"error": "bad signature"})
        self.verified.append({"headers": req.headers, "body": req.json()})
        return Reply(204)
