"""The worker app: what receives data and its health, with problem+json answers; no management routes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from connectors.runtime.bodies import read_limited
from connectors.runtime.worker import create_app
from metalake.http.problems import MEDIA_TYPE, install_problem_handlers
from tests._support.runtime_fakes import World


def _limited_app() -> FastAPI:
    app = FastAPI()
    install_problem_handlers(app)

    @app.post("/limited")
    async def limited(request: Request) -> dict[str, int]:
        return {"size": len(await read_limited(request, 10))}

    return app


def test_body_limit_counts_the_bytes_read() -> None:
    client = TestClient(_limited_app())
    assert client.post("/limited", content=b"x" * 10).json() == {"size": 10}
    assert client.post("/limited", content=b"x" * 11).status_code == 413

    def chunked() -> Iterator[bytes]:
        yield b"x" * 6
        yield b"x" * 6

    response = client.post("/limited", content=chunked())
    assert response.status_code == 413 and response.json()["field"] == "body"


def test_the_worker_starts_without_any_token_and_serves_no_management_routes(world: World) -> None:
    # Connectors and write keys are managed through the admin API only; the worker's routes receive data.
    with TestClient(create_app(world.settings, runtime=world.runtime)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        for method, path in [
            ("GET", "/connectors"),
            ("GET", "/connector-plugins"),
            ("PUT", "/connectors/acme/hook"),
            ("POST", "/tenants/acme/write-keys"),
        ]:
            response = client.request(method, path)
            assert response.status_code in (404, 405), (method, path)
            assert response.headers["content-type"] == MEDIA_TYPE


def test_readyz_names_the_dependency_that_is_down(world: World) -> None:
    def down() -> None:
        raise ConnectionRefusedError("mongodb://worker:hunter2@db:27017")

    healthy = {"mongo": lambda: None, "kafka": lambda: None}
    with TestClient(create_app(world.settings, runtime=world.runtime, checks=healthy)) as client:
        response = client.get("/readyz")
        assert (response.status_code, response.json()) == (
            200,
            {
                "status": "ready",
                "checks": {
                    "mongo": "ok",
                    "kafka": "ok",
                },
            },
        )
    with TestClient(create_app(world.settings, runtime=world.runtime, checks={**healthy, "mongo": down})) as client:
        response = client.get("/readyz")
        assert response.status_code == 503
        assert response.json() == {
            "status": "not-ready",
            "checks": {"mongo": "down: ConnectionRefusedError", "kafka": "ok"},
        }
        assert "hunter2" not in response.text


def test_the_worker_bounds_every_body_unread(world: World) -> None:
    # The body limit layer answers before any route or token check: a declared length over the worker's largest
    # route limit is refused without reading, wherever it is sent.
    limit = max(world.settings.connect.webhook_max_body_bytes, world.settings.connect.ingest_max_body_bytes)
    with TestClient(create_app(world.settings, runtime=world.runtime)) as client:
        for path in ("/v1/events", "/webhooks/test-hook/acme", "/no/such/route"):
            response = client.post(path, content=b"x" * (limit + 1))
            assert response.status_code == 413, path
            assert response.json()["type"] == "/problems/body-too-large" and response.headers["connection"] == "close"


def test_the_ingest_api_checks_credentials_before_reading_the_body(world: World) -> None:
    # The ingest route takes no body parameter, so its credential dependency runs before anything reads the body: a
    # caller without a write key or token is refused with none of its (endless, chunked) body taken.
    app = create_app(world.settings, runtime=world.runtime)
    taken = 0

    async def receive() -> dict[str, Any]:
        nonlocal taken
        taken += 65536
        return {"type": "http.request", "body": b"[" * 65536, "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/events",
        "raw_path": b"/v1/events",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 401 and taken == 0
