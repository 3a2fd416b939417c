"""``GET /metrics`` and the HTTP request metrics of the two FastAPI services (the admin API, the connector worker).

:class:`HttpMetrics` is the outermost ASGI layer: it answers ``GET /metrics`` itself (not a route of the app, so
no router, OpenAPI document or token check of the app's sees it; ``metalake.telemetry.exposition`` decides:
404 without ``telemetry.metrics_token``, 401 as problem+json without the token), and times every other request
into ``metalake_http_requests_total`` / ``metalake_http_request_seconds`` by route *template* (``/v1/tenants/{tenant}
/assets``, never the path a caller sent: a label per tenant or per typo would be unbounded), method and status.

The template is the one the router chooses for the path and method (looked up here, so a request refused before
routing, by the body limit or the API's early token check, has its route's too); a path no route matches is
``route="none"``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from pydantic import SecretStr
from starlette.routing import compile_path

from metalake.http.bodies import ASGIApp, Message, Receive, Scope, Send, send_problem
from metalake.http.problems import Problem
from metalake.telemetry import exposition
from metalake.telemetry.metrics import EVENTS, HTTP_REQUEST, HTTP_REQUESTS, INTAKE_REQUEST

METRICS_PATH = "/metrics"
UNMATCHED = "none"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RouteTemplates:
    """The template of the route a request is for, as the router would choose it (first route of that path and
    method; else the first of that path, which answers 405), from the app's routes through included routers at any
    depth. Built at the first request, once every router is included."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._table: list[tuple[re.Pattern[str], frozenset[str], str]] | None = None

    def _routes(self) -> list[tuple[re.Pattern[str], frozenset[str], str]]:
        if self._table is None:
            self._table = [
                (compile_path(context.path)[0], frozenset(context.methods or ()), context.path)
                for context in iter_route_contexts(self._app.routes)
                if context.path is not None
            ]
        return self._table

    def __call__(self, scope: Scope) -> str:
        path, root = str(scope["path"]), str(scope.get("root_path", ""))
        path = path[len(root) :] if root and path.startswith(root + "/") else path
        method, candidate = scope["method"], None
        for regex, methods, template in self._routes():
            if regex.match(path):
                if not methods or method in methods:
                    return template
                candidate = candidate or template
        return candidate or UNMATCHED


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class HttpMetrics:
    """The ASGI layer; add it last (``app.add_middleware``), so it sees every answer the other layers give."""

    def __init__(
        self, app: ASGIApp, api: FastAPI, token: SecretStr | None, intake: Mapping[str, str] | None = None
    ) -> None:
        self.app = app
        self._templates = RouteTemplates(api)
        self._token = token
        self._intake = dict(intake or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == METRICS_PATH and scope["method"] in ("GET", "HEAD"):
            await self._scrape(scope, send)
            return
        started = time.perf_counter()
        status = 500  # an app that raised before answering

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            elapsed = time.perf_counter() - started
            method = scope["method"] if scope["method"] in _METHODS else "other"
            route = self._templates(scope)
            HTTP_REQUEST.record(elapsed, {"route": route, "method": method})
            HTTP_REQUESTS.add(1, {"route": route, "method": method, "status": str(status)})
            source = self._intake.get(route)
            if source is not None:
                _intake(source, elapsed, status)

    async def _scrape(self, scope: Scope, send: Send) -> None:
        # Rendering reads every instrument (and runs the readiness checks): off the event loop.
        from starlette.concurrency import run_in_threadpool

        answer = await run_in_threadpool(exposition.answer, self._token, _header(scope, b"authorization"))
        if answer.status != 200:
            slug, detail = (
                ("not-found", "metrics are off") if answer.status == 404 else ("unauthorized", "bearer token needed")
            )
            await send_problem(send, Problem(answer.status, slug, detail, headers=dict(answer.headers)), METRICS_PATH)
            return
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", answer.content_type.encode()),
            (b"content-length", str(len(answer.body)).encode()),
            (b"cache-control", b"no-store"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        body = b"" if scope["method"] == "HEAD" else answer.body
        await send({"type": "http.response.body", "body": body, "more_body": False})


#: Why an intake request was refused, by its status: a fixed vocabulary (the problem's detail is in the answer).
REFUSALS = {
    400: "invalid",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid",
    429: "rate_limited",
    503: "unavailable",
}


def refusal_reason(status: int) -> str:
    return REFUSALS.get(status, "error" if status >= 500 else "refused")


def _intake(source: str, elapsed: float, status: int) -> None:
    """An intake request (webhook, ingest): its latency, and one refused event when the whole request was refused
    (the events it carried are unknown then); accepted events are counted where Kafka confirmed them."""
    INTAKE_REQUEST.record(elapsed, {"source": source})
    if status >= 400:
        EVENTS.add(1, {"source": source, "outcome": "refused", "reason": refusal_reason(status)})


def install_metrics(app: FastAPI, token: SecretStr | None, intake: Mapping[str, str] | None = None) -> None:
    """Serve ``GET /metrics`` and time every request; call after every other ``add_middleware``. ``intake`` maps the
    route templates of intake routes to their ``source`` (``metalake_intake_request_seconds``, refusals)."""
    kwargs: dict[str, Any] = {"api": app, "token": token, "intake": intake}
    app.add_middleware(HttpMetrics, **kwargs)


__all__ = [
    "METRICS_PATH",
    "REFUSALS",
    "UNMATCHED",
    "HttpMetrics",
    "RouteTemplates",
    "install_metrics",
    "refusal_reason",
]
