"""The soak's signed-webhook receiver: every soak tenant's webhook subscription points here. It verifies each
delivery's signature (as docs/outbound.md tells receivers to), answers 204, and counts the deliveries per change id
(``change.id`` of the body: the change in ``metalake.changes`` it tells of) and per delivery id (``id``: the same on a
resend). ``down()`` closes its port (connections refused, as a receiver that crashed) and ``up()`` opens the same
port again: the fault "webhook receiver down for two minutes"."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from processors.outbound.destinations.webhook.signing import InvalidSignature, verify


class Counts:
    """What arrived, thread-safe: per change id how many verified deliveries, their kinds, the unverified ones."""

    def __init__(self) -> None:
        self.by_change: Counter[str] = Counter()
        self.by_delivery: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.tenants: dict[str, str] = {}  # change id -> tenant
        self.rejected = 0
        self.lock = threading.Lock()

    def add(self, doc: dict[str, Any]) -> None:
        change = doc.get("change") or {}
        with self.lock:
            self.by_change[str(change.get("id"))] += 1
            self.by_delivery[str(doc.get("id"))] += 1
            self.kinds[str(doc.get("type"))] += 1
            self.tenants[str(change.get("id"))] = str(doc.get("tenant"))

    def total(self) -> int:
        with self.lock:
            return sum(self.by_change.values())


class Receiver:
    def __init__(self, port: int, secret: str) -> None:
        self.port, self.secret = port, secret
        self.counts = Counts()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def receive(self, headers: dict[str, str], body: bytes) -> int:
        try:
            verify(self.secret, headers, body, int(time.time()))
        except InvalidSignature:
            with self.counts.lock:
                self.counts.rejected += 1
            return 401
        self.counts.add(json.loads(body))
        return 204

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(receiver.receive(dict(self.headers.items()), body))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def up(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]  # port 0 asked for a free one: keep it for every later up()
        threading.Thread(target=server.serve_forever, name="soak-receiver", daemon=True).start()
        self._server = server

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
