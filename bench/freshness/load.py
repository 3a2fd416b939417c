"""The soak's paced mixed load (``soak.load.Load``: ingest API batches and Monte Carlo incident webhooks), telling the
probes what Kafka acknowledged (a 2xx of the ingest API or of the webhook means the events are durable in Kafka), and
an edit of an asset's description through the admin API every ``EDIT_EVERY_S`` (its 202 means the same).

Sampled per kind: one in ``every`` of the asset upserts (the bulk of the load), every event of the rarer kinds."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from soak.catalog import table_urn
from soak.load import Load, _sleep_until
from soak.tenants import Fleet
from tenant_isolation_setup import admin_session

from freshness import probes
from freshness.probes import Probe
from ops.demo.api_client import ApiError
from ops.settings import Settings

EDIT_EVERY_S = 4.0


class Sampler:
    """Keeps one probe in ``every[kind]`` (1 when not named) and hands it to each of ``sinks``; counts what it saw."""

    def __init__(self, every: dict[str, int], sinks: Sequence[Callable[[Probe], None]]) -> None:
        self.every, self.sinks = every, sinks
        self.seen: Counter[str] = Counter()
        self.kept: list[Probe] = []
        self._lock = threading.Lock()  # the load's loop and the edits' thread both offer

    def offer(self, candidates: Iterable[Probe]) -> None:
        for probe in candidates:
            with self._lock:
                n = self.seen[probe.kind]
                self.seen[probe.kind] += 1
                keep = n % self.every.get(probe.kind, 1) == 0
                if keep:
                    self.kept.append(probe)
            if keep:
                for sink in self.sinks:
                    sink(probe)


class ProbedLoad(Load):
    def __init__(self, settings: Settings, fleet: Fleet, rate: float, seed: int, sampler: Sampler) -> None:
        super().__init__(f"http://{settings.connect.host}:{settings.connect.port}", fleet, rate, seed)
        self.settings, self.sampler = settings, sampler
        self.edits: Counter[str] = Counter()
        self._rng = random.Random(seed)

    async def run(self) -> None:
        await asyncio.gather(super().run(), self._edit_loop())

    async def _post(self, url: str, body: bytes, headers: dict[str, str], ids: list[str]) -> dict[str, Any] | None:
        answer = await super()._post(url, body, headers, ids)
        if answer is not None:
            self.sampler.offer(acked(url, body, answer, time.monotonic()))
        return answer

    async def _edit_loop(self) -> None:
        start, tick = time.monotonic(), 0
        while not self.stop.is_set():
            tick += 1
            await _sleep_until(start + tick * EDIT_EVERY_S, self.stop)
            tenant = self.fleet.tenants[tick % len(self.fleet.tenants)].id
            held = self.catalogs[tenant]
            tables = [u for n in range(held.tables) if (u := table_urn(n)) in held.newest]
            if tables and not self.stop.is_set():
                await asyncio.to_thread(self._edit, tenant, self._rng.choice(tables))

    def _edit(self, tenant: str, urn: str) -> None:
        """A person's new description of a table Kafka took (refused while the projection has not shown it yet)."""
        body = {"urn": urn, "description": f"edited by the platform benchmark at {time.time():.3f}"}
        try:
            with admin_session(self.settings) as api:
                doc = api.json("PATCH", f"/v1/tenants/{tenant}/assets", json=body, expect=(202,))
        except ApiError as exc:
            self.edits[f"refused {exc.status}"] += 1
            return
        now = time.monotonic()
        self.edits["accepted"] += 1
        edits = ({"urn": urn, "aspect": c["aspect"], "version": int(c["version"])} for c in doc["changes"])
        self.sampler.offer(probes.keyed(probes.EDITS, tenant, now, e, e["version"]) for e in edits)


def acked(url: str, body: bytes, answer: dict[str, Any], at: float) -> list[Probe]:
    """The probes of one acknowledged request: an ingest batch (its accepted events) or a Monte Carlo incident."""
    if "/webhooks/" in url:
        return probes.incident(url.rstrip("/").rsplit("/", 1)[1], at, body)
    accepted = {r["id"] for r in answer["results"] if r["status"] == "accepted"}
    return [p for e in json.loads(body) if e["id"] in accepted for p in probes.of_event(e["tenantid"], at, e)]
