"""The one body limit of both HTTP services: refused on the declared length unread, counted while streamed, tightened
by a route, and answered by the layer whatever the app made of the refused body."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel

from metalake.http.bodies import BodyLimit, read_body
from metalake.http.problems import Problem, install_problem_handlers


class _Item(BaseModel):
    name: str


def _app(limit: int) -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=limit)

    @app.post("/model")
    async def model(item: _Item) -> dict[str, str]:  # FastAPI reads and parses this body before the handler runs
        return {"name": item.name}

    @app.post("/raw")
    async def raw(request: Request) -> dict[str, int]:
        return {"size": len(await read_body(request, 100))}

    @app.post("/custom")
    async def custom(request: Request) -> dict[str, int]:
        return {"size": len(await read_body(request, 100, Problem(413, "form-too-large", "too big", field="form")))}

    return app


class _Stream:
    def __init__(self, size: int, chunk: int) -> None:
        self.size, self.chunk, self.consumed = size, chunk, 0

    async def __call__(self) -> dict[str, Any]:
        if self.consumed >= self.size:
            return {"type": "http.disconnect"}
        part = b"x" * min(self.chunk, self.size - self.consumed)
        self.consumed += len(part)
        return {"type": "http.request", "body": part, "more_body": self.consumed < self.size}


def _call(app: FastAPI, path: str, body: _Stream, length: int | None = None) -> tuple[int, dict[str, Any], str]:
    headers = [(b"content-type", b"application/json")]
    headers.append(
        (b"content-length", str(length).encode()) if length is not None else (b"transfer-encoding", b"chunked")
    )
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, body, send))
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, sent  # one answer: the app's own answer to a refused body never goes out
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers_out = {k.decode(): v.decode() for k, v in starts[0]["headers"]}
    return starts[0]["status"], json.loads(payload), headers_out.get("connection", "")


def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    body = _Stream(10_000, 1000)
    status, problem, connection = _call(_app(1000), "/model", body, length=10_000)
    assert (status, problem["type"], problem["field"], body.consumed) == (413, "/problems/body-too-large", "body", 0)
    assert problem["detail"] == "the request body exceeds the limit of 1000 bytes" and connection == "close"


def test_a_streamed_body_is_refused_once_past_the_limit_even_where_fastapi_parses_it() -> None:
    # FastAPI turns a failure while reading a model's body into a 400: the layer's 413 goes out instead.
    body = _Stream(1_000_000, 100)
    status, problem, _ = _call(_app(1000), "/model", body)
    assert (status, problem["type"]) == (413, "/problems/body-too-large")
    assert body.consumed == 1100
    # Under the limit the route gets its body (here not JSON: FastAPI's 422).
    status, problem, _ = _call(_app(1000), "/model", _Stream(1000, 100))
    assert (status, problem["type"]) == (422, "/problems/invalid-request")


def test_a_route_tightens_the_limit_with_its_own_answer() -> None:
    app = _app(1000)
    assert _call(app, "/raw", _Stream(100, 30))[:2] == (200, {"size": 100})
    body = _Stream(500, 30)
    status, problem, _ = _call(app, "/raw", body)
    assert (status, problem["detail"], body.consumed) == (413, "the request body exceeds the limit of 100 bytes", 120)
    body = _Stream(500, 30)
    assert _call(app, "/raw", body, length=500)[0] == 413 and body.consumed == 0
    body = _Stream(500, 30)
    status, problem, _ = _call(app, "/custom", body)
    assert (status, problem["type"], problem["field"], body.consumed) == (413, "/problems/form-too-large", "form", 120)
