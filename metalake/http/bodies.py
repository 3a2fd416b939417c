"""One request body limit for every route of an HTTP service, enforced while the body is read.

:class:`BodyLimit` is an ASGI layer around the whole app: a declared ``Content-Length`` over the limit is answered
``413`` before anything is read, and the bytes that do arrive (chunked bodies have no length) are counted as the app
receives them, so the ``413`` goes out the moment they pass the limit; nothing buffers a body whole to measure it.
A route that takes less than the app-wide limit (a webhook, the token endpoint's form) tightens it for its request
with :func:`read_body`; the same layer then answers, with the route's own problem if it gives one.

In the kernel because both HTTP services (the admin API and the connector worker) install it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Request

from metalake.http.problems import MEDIA_TYPE, Problem

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Where the layer leaves the request's budget for read_body (``scope["state"]`` is what ``request.state`` reads).
_STATE_KEY = "metalake.body_budget"


def body_too_large(limit: int) -> Problem:
    return Problem(413, "body-too-large", f"the request body exceeds the limit of {limit} bytes", field="body")


class BodyTooLarge(Exception):
    """Raised to the app by ``receive`` once the body passed its limit: the layer answers, not the app."""


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.problem = body_too_large(limit)
        self.received = 0
        self.exceeded = False

    def tighten(self, limit: int, problem: Problem | None) -> None:
        if limit < self.limit:
            self.limit = limit
            self.problem = problem or body_too_large(limit)
        elif problem is not None and limit == self.limit:
            self.problem = problem


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


async def send_problem(send: Send, problem: Problem, path: str, *, close: bool = True) -> None:
    """Answer ``problem`` as problem+json, by default with ``Connection: close``: the server then stops taking in a
    body that will not be read (else it reads and discards the rest to keep the connection)."""
    # Rendered as the app's own problem answers are (Starlette's JSONResponse), byte for byte.
    body = json.dumps(problem.body(path), ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    headers = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in problem.headers.items()]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": problem.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BodyLimit:
    """The ASGI layer: at most ``max_bytes`` of request body per request, less where a route tightens it."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        budget = _Budget(self.max_bytes)
        declared = _declared_length(scope)
        if declared is not None and declared > budget.limit:
            await send_problem(send, budget.problem, path)
            return
        scope.setdefault("state", {})[_STATE_KEY] = budget
        started = False

        async def counted() -> Message:
            if budget.exceeded:
                raise BodyTooLarge
            message = await receive()
            if message["type"] == "http.request":
                budget.received += len(message.get("body", b""))
                if budget.received > budget.limit:
                    budget.exceeded = True
                    raise BodyTooLarge
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if budget.exceeded:
                return  # whatever the app answers to the refused body (FastAPI makes it a 400): ours goes out instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except BodyTooLarge:
            pass
        if budget.exceeded and not started:
            await send_problem(send, budget.problem, path)


async def read_body(request: Request, limit: int, problem: Problem | None = None) -> bytes:
    """The body of a route that takes at most ``limit`` bytes (less than the app's limit), answered ``problem`` (else
    the layer's 413) when it is larger: refused on its declared length before reading, else the moment the bytes read
    pass ``limit``.

    Without the :class:`BodyLimit` layer (an app built for a test) the count here enforces the same limit.
    """
    budget = request.scope.get("state", {}).get(_STATE_KEY)
    declared = request.headers.get("content-length", "")
    if isinstance(budget, _Budget):
        budget.tighten(limit, problem)
        if (declared.isdigit() and int(declared) > budget.limit) or budget.received > budget.limit:
            budget.exceeded = True
            raise BodyTooLarge
    refused = problem or body_too_large(limit)
    if declared.isdigit() and int(declared) > limit:
        raise refused
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise refused
        chunks.append(chunk)
    return b"".join(chunks)
