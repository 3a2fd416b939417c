"""The Trino calls' own pool: a tenant at its cap is refused at once (429, Retry-After) while another tenant's query
still runs; a full pool answers 503; a slot is freed only after its step in flight and its clean-up; the rows of a
response are fetched on the pool's threads, never on Starlette's shared pool."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from starlette.requests import ClientDisconnect

from api.problems import Problem, install_problem_handlers
from api.routes.sql import run_query
from api.services.sqlquery import Column, Limits, RunningQuery
from api.services.trinopool import TrinoPool


def _slow(started: threading.Event, release: threading.Event) -> str:
    """A fake Trino call that holds its thread until released (a 30 s query, as long as the test wants)."""
    started.set()
    assert release.wait(10)
    return threading.current_thread().name


async def _until(condition: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_a_tenant_at_its_cap_is_refused_at_once_while_another_tenants_query_runs() -> None:
    async def scenario() -> None:
        pool = TrinoPool(workers=4, per_tenant=2)
        release = threading.Event()
        started = [threading.Event(), threading.Event()]
        slots = [pool.admit("acme"), pool.admit("acme")]
        running = [asyncio.ensure_future(s.run(_slow, e, release)) for s, e in zip(slots, started, strict=True)]
        await _until(lambda: all(e.is_set() for e in started))

        began = time.monotonic()
        with pytest.raises(Problem) as refused:
            pool.admit("acme")
        assert time.monotonic() - began < 0.1  # refused at once, not queued
        assert refused.value.status == 429
        assert refused.value.headers["Retry-After"] == "1"
        assert "2 queries" in refused.value.detail

        # Another tenant still gets a thread and an answer while acme's two queries hold theirs.
        other = pool.admit("globex")
        assert await asyncio.wait_for(other.run(lambda: "rows"), 2) == "rows"
        other.finish()
        assert pool.active("globex") == 0

        release.set()
        names = await asyncio.gather(*running)
        assert all(n.startswith("trino-call") for n in names)
        for slot in slots:
            slot.finish()
        await _until(lambda: pool.active("acme") == 0)
        pool.admit("acme").finish()  # a slot again
        pool.shutdown()

    asyncio.run(scenario())


def test_a_full_pool_answers_503_at_once() -> None:
    pool = TrinoPool(workers=2, per_tenant=2)
    held = [pool.admit("acme"), pool.admit("globex")]
    with pytest.raises(Problem) as refused:
        pool.admit("initech")
    assert refused.value.status == 503 and refused.value.headers["Retry-After"] == "1"
    for slot in held:
        slot.finish()
    pool.admit("initech").finish()
    pool.shutdown()


def test_a_slot_is_freed_after_its_step_in_flight_and_its_cleanup() -> None:
    """The client left (its task cancelled) while a fetch runs: the slot stays taken until the fetch ends and the
    clean-up (cancel the query, close the connection) ran, so the pool never runs more steps than threads."""

    async def scenario() -> None:
        pool = TrinoPool(workers=1, per_tenant=1)
        started, release = threading.Event(), threading.Event()
        cleaned: list[str] = []
        slot = pool.admit("acme")
        task = asyncio.ensure_future(slot.run(_slow, started, release))
        await _until(started.is_set)
        task.cancel()
        slot.finish(lambda: cleaned.append(threading.current_thread().name))
        slot.finish()  # idempotent
        await asyncio.sleep(0.05)
        assert pool.active("acme") == 1 and not cleaned
        with pytest.raises(Problem):
            pool.admit("acme")
        release.set()
        await _until(lambda: pool.active("acme") == 0)
        assert cleaned and cleaned[0].startswith("trino-call")
        with pytest.raises(RuntimeError):
            await slot.run(lambda: None)
        pool.shutdown()

    asyncio.run(scenario())


class _Cursor:
    def __init__(self, pages: list[list[list[Any]]]) -> None:
        self.pages = pages
        self.threads: set[str] = set()
        self.cancelled = False

    def fetchmany(self, n: int) -> list[list[Any]]:
        self.threads.add(threading.current_thread().name)
        return self.pages.pop(0) if self.pages else []

    def cancel(self) -> None:
        self.cancelled = True


class _Conn:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_responses_rows_are_fetched_on_the_pool_and_its_slot_freed_after_the_body() -> None:
    pool = TrinoPool(workers=2, per_tenant=1)
    cursor, conn = _Cursor([[[2]], [[3]]]), _Conn()
    limits = Limits(100, 30.0)
    start_threads: list[str] = []

    def start() -> RunningQuery:
        start_threads.append(threading.current_thread().name)
        return RunningQuery([Column("n", "integer")], cursor, conn, [[1]], limits, time.monotonic() + 30)

    app = FastAPI()
    install_problem_handlers(app)

    @app.get("/q")
    async def query() -> StreamingResponse:
        return await run_query(pool.admit("acme"), start, "json")

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.get("/q")
        assert answer.status_code == 200
        assert answer.json()["rows"] == [[1], [2], [3]]
        await _until(lambda: pool.active("acme") == 0)

    asyncio.run(scenario())
    assert start_threads[0].startswith("trino-call")
    assert cursor.threads and all(t.startswith("trino-call") for t in cursor.threads)
    assert conn.closed
    pool.shutdown()


def test_a_query_that_fails_to_start_frees_its_slot() -> None:
    pool = TrinoPool(workers=2, per_tenant=1)

    def start() -> RunningQuery:
        raise Problem(400, "sql-error", "bad SQL", field="sql")

    async def scenario() -> None:
        with pytest.raises(Problem):
            await run_query(pool.admit("acme"), start, "json")
        await _until(lambda: pool.active("acme") == 0)

    asyncio.run(scenario())
    pool.shutdown()


def test_a_client_gone_before_the_first_byte_frees_the_slot_and_cancels_the_query() -> None:
    """Starlette skips the background task on ClientDisconnect and the body never started: the response frees the
    slot itself."""
    pool = TrinoPool(workers=2, per_tenant=1)
    cursor, conn = _Cursor([[[2]]]), _Conn()

    def start() -> RunningQuery:
        return RunningQuery([Column("n", "integer")], cursor, conn, [[1]], Limits(100, 30.0), time.monotonic() + 30)

    async def gone(message: Any) -> None:
        raise OSError("client gone")

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    async def scenario() -> None:
        response = await run_query(pool.admit("acme"), start, "json")
        scope = {"type": "http", "asgi": {"spec_version": "2.4"}, "method": "GET", "path": "/q", "headers": []}
        with pytest.raises(ClientDisconnect):
            await response(scope, receive, gone)
        await _until(lambda: pool.active("acme") == 0)

    asyncio.run(scenario())
    assert cursor.cancelled and conn.closed
    pool.shutdown()
