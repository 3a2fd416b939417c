"""The worker's pool of parsing processes (connectors.runtime.offload): large bodies are parsed in another process,
a tenant in at most its share of the pool, a refusal crosses back as the same problem."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from connectors.openlineage.routes import Decoded, decode
from connectors.runtime.offload import Offload
from connectors.runtime.worker import create_app
from control.connectors.settings import ConnectSettings
from metalake.http.problems import Problem
from tests._support.runtime_fakes import WRITE_KEY, World

DBT = json.loads((Path(__file__).parents[1] / "openlineage" / "payloads" / "dbt_complete.json").read_text())
LIMITS = (1024 * 1024, 1000)


def _offload(workers: int = 2, per_tenant: int = 1, min_bytes: int = 100) -> Offload:
    # Two processes as the worker's default: the process's one pool of that size serves every test.
    offload = Offload(
        ConnectSettings(parse_workers=workers, parse_per_tenant=per_tenant, parse_offload_min_bytes=min_bytes)
    )
    offload.start()  # the processes' start is not what is timed below
    return offload


def test_a_large_body_is_parsed_in_another_process_a_small_one_here() -> None:
    offload = _offload()

    async def pids() -> tuple[int, int]:
        return await offload.run("acme", 100, os.getpid), await offload.run("acme", 99, os.getpid)

    pooled, here = asyncio.run(pids())
    assert pooled != os.getpid() and here == os.getpid()


def test_a_tenant_takes_no_more_than_its_share_of_the_pool() -> None:
    # Two processes, one per tenant: acme's second body waits for its first, globex's runs beside it at once.
    offload = _offload(workers=2, per_tenant=1)
    done: dict[str, float] = {}

    async def job(name: str, tenant: str, started: float) -> None:
        await offload.run(tenant, 1000, time.sleep, 0.8)
        done[name] = time.monotonic() - started

    async def main() -> None:
        started = time.monotonic()
        first = asyncio.create_task(job("acme-1", "acme", started))
        await asyncio.sleep(0)
        second = asyncio.create_task(job("acme-2", "acme", started))
        await asyncio.sleep(0.05)
        assert offload.waiting("acme") == 2
        await asyncio.gather(first, second, job("globex", "globex", started))

    asyncio.run(main())
    assert done["globex"] < done["acme-2"] - 0.4, done
    assert done["acme-2"] >= 1.6
    assert offload.waiting("acme") == 0 and offload.waiting("globex") == 0


def test_what_the_process_returns_and_refuses_comes_back() -> None:
    offload = _offload(min_bytes=1)
    body = json.dumps(DBT).encode()

    async def both() -> tuple[Decoded, Problem]:
        decoded = await offload.run("acme", len(body), decode, body, "application/json", None, "acme", LIMITS)
        with pytest.raises(Problem) as refused:
            await offload.run("acme", 9, decode, b"{not json", "application/json", None, "acme", LIMITS)
        return decoded, refused.value

    decoded, problem = asyncio.run(both())
    assert decoded.summary["accepted"] == len(decoded.encoded) == 12
    assert problem.status == 400 and problem.slug == "invalid-body" and problem.field == "body"


def test_the_route_through_the_pool_publishes_valid_events(world: World) -> None:
    settings = world.settings.model_copy(deep=True)
    settings.connect.parse_workers, settings.connect.parse_offload_min_bytes = 2, 0
    auth = {"Authorization": f"Bearer {WRITE_KEY}"}
    with TestClient(create_app(settings, runtime=_with(world, settings))) as client:
        accepted = client.post("/api/v1/lineage", json=DBT, headers=auth)
        broken = client.post("/api/v1/lineage", json={**DBT, "eventTime": "yesterday"}, headers=auth)
    assert accepted.status_code == 201 and accepted.json()["accepted"] == 12, accepted.text
    assert broken.status_code == 400 and broken.json()["field"] == "/eventTime", broken.text
    # The fake publisher reads each encoded record back as the streaming job does.
    assert len(world.publisher.routed) == 12 and {r.event.tenantid for r in world.publisher.routed} == {"acme"}


def _with(world: World, settings: Any) -> Any:
    import dataclasses

    return dataclasses.replace(world.runtime, settings=settings, admission=None, offload=None)
