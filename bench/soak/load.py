"""The soak's load: ``rate`` events/s through the public intake, spread over the tenants, as a well-behaved client
sends them. Every ``PERIOD_S`` each tenant gets its share as one ``POST /v1/events`` batch (``catalog``); a Monte
Carlo incident webhook goes to one tenant after the other every ``INCIDENT_EVERY_S``. A request that is not answered
(refused connection, timeout, 5xx, 429) is sent again, the same body, until it is: an answer lost after Kafka took
the events means a resend repeats them (the ingest API says so), so such ids are kept apart (``ambiguous``) to tell a
client's resend from a platform's duplicate at the end."""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from ops.demo import montecarlo
from soak.catalog import SCHEMA, TenantCatalog
from soak.tenants import Fleet, Tenant

PERIOD_S = 2.0  # each tenant's batch every 2 s: 25 requests/s at 200 events/s over 50 tenants
INCIDENT_EVERY_S = 2.0
GIVE_UP_S = 900.0  # a batch not accepted after 15 min of resends is counted unsent (never expected anywhere)
MAX_IN_FLIGHT = 64
#: Requests waiting beyond this many: the intake is behind, and the load stops piling up more (the events it would
#: have sent are counted ``skipped``), so the accepted rate is what the platform took, not a backlog sent later.
MAX_QUEUED = 200


@dataclass
class Tally:
    """What the load did; ``ids`` per tenant are the accepted event ids (what must be in Delta once each)."""

    accepted: int = 0
    rejected: int = 0
    unsent: int = 0
    skipped: int = 0
    resends: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    ids: dict[str, list[str]] = field(default_factory=dict)
    ambiguous: set[str] = field(default_factory=set)
    incidents: dict[str, list[str]] = field(default_factory=dict)  # tenant -> accepted Monte Carlo incident ids
    reject_reasons: Counter[str] = field(default_factory=Counter)
    refusals: dict[int, str] = field(default_factory=dict)  # status -> the first answer's text


class Load:
    def __init__(self, connect_base: str, fleet: Fleet, rate: float, seed: int) -> None:
        self.base, self.fleet, self.rate = connect_base, fleet, rate
        self.catalogs = {t.id: TenantCatalog(t.id, random.Random(seed + i)) for i, t in enumerate(fleet.tenants)}
        self.tally = Tally(ids={t.id: [] for t in fleet.tenants}, incidents={t.id: [] for t in fleet.tenants})
        self.stop = asyncio.Event()
        self._gate = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self._http = httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=MAX_IN_FLIGHT))

    async def run(self) -> None:
        """Until ``stop``: a tick every PERIOD_S (not drifting), then wait for what is in flight."""
        loops = [self._ingest_loop(), self._incident_loop()]
        await asyncio.gather(*loops)
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._http.aclose()

    @property
    def queued(self) -> int:
        return len(self._tasks)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ingest_loop(self) -> None:
        share = self.rate * PERIOD_S / len(self.fleet.tenants)
        owed = {t.id: 0.0 for t in self.fleet.tenants}
        start = time.monotonic()
        tick = 0
        while not self.stop.is_set():
            for tenant in self.fleet.tenants:
                owed[tenant.id] += share
                batch: list[dict[str, Any]] = []
                while owed[tenant.id] >= 1:
                    drawn = self.catalogs[tenant.id].draw()
                    batch += drawn
                    owed[tenant.id] -= len(drawn)
                if batch and len(self._tasks) >= MAX_QUEUED:
                    self.tally.skipped += len(batch)
                elif batch:
                    self._spawn(self._send_batch(tenant, batch))
            tick += 1
            await _sleep_until(start + tick * PERIOD_S, self.stop)

    async def _incident_loop(self) -> None:
        start, tick = time.monotonic(), 0
        while not self.stop.is_set():
            tenant = self.fleet.tenants[tick % len(self.fleet.tenants)]
            if self.catalogs[tenant.id].tables:
                self._spawn(self._send_incident(tenant))
            tick += 1
            await _sleep_until(start + tick * INCIDENT_EVERY_S, self.stop)

    async def _send_batch(self, tenant: Tenant, batch: list[dict[str, Any]]) -> None:
        body = json.dumps(batch).encode()
        headers = {"authorization": f"Bearer {tenant.write_key}", "content-type": "application/json"}
        answer = await self._post(f"{self.base}/v1/events", body, headers, [e["id"] for e in batch])
        if answer is None:
            self.tally.unsent += len(batch)
            return
        accepted = {r["id"] for r in answer["results"] if r["status"] == "accepted"}
        for r in answer["results"]:
            if r["status"] != "accepted":
                self.tally.reject_reasons[str((r.get("error") or {}).get("field"))] += 1
        self.catalogs[tenant.id].accepted([e for e in batch if e["id"] in accepted])
        self.tally.ids[tenant.id].extend(accepted)
        self.tally.accepted += len(accepted)
        self.tally.rejected += len(batch) - len(accepted)

    async def _send_incident(self, tenant: Tenant) -> None:
        table = f"t{random.randrange(self.catalogs[tenant.id].tables)}"
        incident = montecarlo.incident(SCHEMA, table, f"{table}: 0 rows in the last hour", str(uuid.uuid4()))
        url = f"{self.base}/webhooks/{montecarlo.SLUG}/{tenant.id}"
        headers = montecarlo.signed_headers(tenant.mc_secret, incident.body)
        if await self._post(url, incident.body, headers, []) is not None:
            self.tally.incidents[tenant.id].append(incident.incident_id)

    async def _post(self, url: str, body: bytes, headers: dict[str, str], ids: list[str]) -> dict[str, Any] | None:
        """The answer's JSON once a 2xx comes; None after GIVE_UP_S of resends."""
        deadline = time.monotonic() + GIVE_UP_S
        first = True
        while time.monotonic() < deadline:
            if not first:
                self.tally.resends += 1
            first = False
            async with self._gate:
                delay = await self._attempt(url, body, headers, ids)
            if delay is None or isinstance(delay, dict):
                return delay
            await asyncio.sleep(delay)
        return None

    async def _attempt(
        self, url: str, body: bytes, headers: dict[str, str], ids: list[str]
    ) -> dict[str, Any] | float | None:
        """One request: its JSON on a 2xx, how long to wait before the next (Retry-After, or 1 s) on a transient
        failure, None on a refusal no resend can change (counted by status, its text kept for the report)."""
        try:
            resp = await self._http.post(url, content=body, headers=headers)
        except httpx.ConnectError:
            self.tally.statuses["connect-error"] += 1
            return 1.0
        except httpx.HTTPError as exc:  # sent, maybe taken: a resend may repeat these events in Kafka
            self.tally.statuses[type(exc).__name__] += 1
            self.tally.ambiguous.update(ids)
            return 1.0
        self.tally.statuses[str(resp.status_code)] += 1
        if resp.is_success:
            doc: dict[str, Any] = resp.json()
            return doc
        if resp.status_code not in (429, 500, 502, 503, 504):
            self.tally.refusals.setdefault(resp.status_code, resp.text[:300])
            return None
        if resp.status_code >= 500:  # Kafka may hold them all the same: the ingest API says a resend may repeat
            self.tally.ambiguous.update(ids)
        return float(resp.headers.get("retry-after") or 1.0)


async def _sleep_until(when: float, stop: asyncio.Event) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, when - time.monotonic()))
    except TimeoutError:
        return
