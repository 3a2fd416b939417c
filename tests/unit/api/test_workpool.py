"""Heavy work runs on bounded pools per kind with a per-tenant cap, and token checks on their own threads: one
tenant saturating dead-letter listings (Kafka scans) gets 429 at once beyond its share, while another tenant's token
check and a cheap route answer promptly, even with Starlette's shared pool as small as this test makes it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread
import httpx
import pytest
from fastapi import FastAPI

from api.deps import TenantReader
from api.problems import Problem
from api.routes.deadletters import dead_letters
from api.services.dead_letters.service import Listed
from api.workpool import WorkPool
from control.auth.settings import ApiSettings
from ops.settings import Settings
from tests._support.api_app import bearer, build_app


async def _until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_a_tenant_over_its_share_is_refused_at_once_and_a_full_pool_answers_503() -> None:
    async def scenario() -> None:
        pool = WorkPool("audit", workers=3, per_tenant=2)
        release, started = threading.Event(), threading.Semaphore(0)

        def hold() -> str:
            started.release()
            assert release.wait(10)
            return threading.current_thread().name

        held = [asyncio.ensure_future(pool.run(t, hold)) for t in ("acme", "acme", "globex")]
        await _until(lambda: pool.active("acme") == 2 and pool.active("globex") == 1)
        began = time.monotonic()
        with pytest.raises(Problem) as over:
            await pool.run("acme", hold)
        assert over.value.status == 429 and over.value.headers["Retry-After"] == "1"
        assert over.value.body()["kind"] == "audit" and over.value.body()["limit"] == 2
        with pytest.raises(Problem) as full:
            await pool.run("initech", hold)
        assert full.value.status == 503 and full.value.body()["type"] == "/problems/work-busy"
        assert time.monotonic() - began < 1.0  # refused at once, never queued
        # A caller that stops waiting does not free its slot before its work has ended.
        held[0].cancel()
        await asyncio.sleep(0.05)
        assert pool.active("acme") == 2
        release.set()
        names = await asyncio.gather(*held[1:])
        assert all(n.startswith("work-audit") for n in names)
        await _until(lambda: pool.active("acme") == 0 and pool.active("globex") == 0)
        assert await pool.run("acme", lambda: 7) == 7
        pool.shutdown()

    asyncio.run(scenario())


class _BlockingLetters:
    """A dead-letter listing that holds its thread until released, as a slow Kafka scan does."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.running = 0

    def page(self, *args: Any) -> Listed:
        self.running += 1
        assert self.release.wait(10)
        return Listed(letters=[], truncated=False, resume=None)


def _app(letters: _BlockingLetters) -> FastAPI:
    app, _ = build_app(Settings(api=ApiSettings(work_workers=4, work_per_tenant=2)))
    app.dependency_overrides[dead_letters] = lambda: letters

    @app.get("/v1/tenants/{tenant}/cheap")
    def cheap(tc: TenantReader) -> dict[str, str]:
        return {"tenant": tc.tenant}

    return app


async def _with_client(app: FastAPI, body: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    # Starlette's shared pool, made as small as the heavy requests that would fill it without their own pool.
    anyio.to_thread.current_default_thread_limiter().total_tokens = 2
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        await body(client)


def test_one_tenant_saturating_dead_letter_listings_leaves_others_answering_promptly() -> None:
    letters = _BlockingLetters()

    async def body(client: httpx.AsyncClient) -> None:
        url = "/v1/tenants/acme/dead-letters"
        held = [asyncio.ensure_future(client.get(url, headers=bearer("acme"))) for _ in range(2)]
        await _until(lambda: letters.running == 2)
        began = time.monotonic()
        over = await asyncio.wait_for(client.get(url, headers=bearer("acme")), 5)
        assert over.status_code == 429 and over.headers["Retry-After"] == "1"
        assert over.headers["content-type"] == "application/problem+json"
        assert over.json()["type"] == "/problems/work-concurrency-limit"
        # Another tenant's token check and cheap route are not behind acme's scans.
        cheap = await asyncio.wait_for(client.get("/v1/tenants/globex/cheap", headers=bearer("globex")), 5)
        assert cheap.status_code == 200 and cheap.json() == {"tenant": "globex"}
        refused = await asyncio.wait_for(
            client.get("/v1/tenants/globex/cheap", headers={"Authorization": "Bearer x"}), 5
        )
        assert refused.status_code == 401
        assert time.monotonic() - began < 5
        letters.release.set()
        assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]

    try:
        asyncio.run(_with_client(_app(letters), body))
    finally:
        letters.release.set()


def test_token_checks_do_not_wait_for_the_shared_pool() -> None:
    """Whatever holds every thread of Starlette's pool, a request's token is still checked (and refused) at once."""
    release = threading.Event()

    async def body(client: httpx.AsyncClient) -> None:
        hogs = [asyncio.ensure_future(anyio.to_thread.run_sync(release.wait, 10)) for _ in range(2)]
        await asyncio.sleep(0.05)
        refused = await asyncio.wait_for(
            client.get("/v1/tenants/globex/cheap", headers={"Authorization": "Bearer x"}), 5
        )
        assert refused.status_code == 401 and refused.json()["type"] == "/problems/invalid-token"
        release.set()
        await asyncio.gather(*hogs)

    try:
        asyncio.run(_with_client(_app(_BlockingLetters()), body))
    finally:
        release.set()


def test_a_subscription_test_send_waits_on_its_own_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test send waits seconds for the outbound runtime's outcome: on its own pool, not Starlette's."""
    from api.routes import subscriptions as routes
    from api.services.events import event_publisher

    threads: list[str] = []

    def send(*args: Any) -> dict[str, Any]:
        threads.append(threading.current_thread().name)
        return {"status": "delivered", "detail": "ok", "refs": {}}

    monkeypatch.setattr(routes, "_test_send", send)
    app, _ = build_app()
    for dependency in (routes.subscription_store, routes.destinations, routes.test_outcomes, event_publisher):
        app.dependency_overrides[dependency] = lambda: None

    async def body(client: httpx.AsyncClient) -> None:
        sent = await client.post("/v1/tenants/acme/subscriptions/ops/test", headers=bearer("acme"))
        assert sent.status_code == 200, sent.text

    asyncio.run(_with_client(app, body))
    assert threads and threads[0].startswith("work-subscription-test")
