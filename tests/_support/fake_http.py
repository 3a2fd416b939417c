"""A small recording HTTP server for standing in for SaaS APIs in tests: it runs in a thread on loopback, records
every request, can be scripted to fail, to hold a response, and can be stopped and started again on the same port
(a destination that is really down, not mocked)."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Route = Callable[[Seen], Reply]


class FakeServer:
    """Subclasses implement :meth:`route`; ``fail_next(path, *replies)`` scripts failures for a path."""

    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.lock = threading.RLock()
        self._scripted: dict[str, deque[Reply]] = {}
        self._holds: dict[str, tuple[float, threading.Event]] = {}
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------------------------------------------

    def start(self) -> FakeServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                owner._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- scripting ----------------------------------------------------------------------------------------------------

    def fail_next(self, path: str, *replies: Reply) -> None:
        with self.lock:
            self._scripted.setdefault(path, deque()).extend(replies)

    def hold_next(self, path: str, seconds: float) -> threading.Event:
        """Serve the next request to ``path`` (its side effect happens), then wait ``seconds`` before answering.
        The returned event is set when the request has been served."""
        event = threading.Event()
        with self.lock:
            self._holds[path] = (seconds, event)
        return event

    def seen(self, path: str | None = None, method: str | None = None) -> list[Seen]:
        with self.lock:
            return [
                r for r in self.requests if (path is None or r.path == path) and (method is None or r.method == method)
            ]

    # -- serving ------------------------------------------------------------------------------------------------------

    def route(self, req: Seen) -> Reply:
        raise NotImplementedError

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        req = Seen(handler.command, parts.path, parse_qs(parts.query), dict(handler.headers.items()), body, time.time())
        with self.lock:
            self.requests.append(req)
            scripted = self._scripted.get(parts.path)
            reply = scripted.popleft() if scripted else None
            hold = self._holds.pop(parts.path, None)
        if reply is None:
            with self.lock:
                reply = self.route(req)
        if hold is not None:
            # The side effect happened; only the answer is late (a client killed now never learns it succeeded).
            hold[1].set()
            time.sleep(hold[0])
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        try:
            handler.send_response(reply.status)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            if payload:
                handler.send_header("Content-Type", "application/json; charset=utf-8")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client died while we held the answer (the kill -9 test)
