"""Crawls on a schedule: a source connector's ``schedule`` (an interval), and when each scheduled connector last ran.

A connector's ``schedule: {"interval_s": 3600}`` says: crawl every hour. The worker's scheduler
(``connectors.runtime.scheduler``) looks for due connectors; the next run of one is its last run's start plus the
interval, from ``metalake_control.connector_schedules`` (one document per scheduled connector), so a worker restart
neither forgets a run nor repeats one. A run is *claimed* before it starts by inserting its document in
``connector_schedule_runs``, keyed by the start of the run before it: two workers that read the same last run insert
the same key, and one of them wins. An insert is what FerretDB decides atomically; a conditional update or
find-and-modify is not (two workers both passed one in the integration test). The crawl's own lease
(``source_runner.crawl``) keeps a manual crawl and a scheduled one apart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from metalake.mongo import Doc, typed_collection

SCHEDULES = "connector_schedules"
# One document per claimed run (``<connector id>|<start of the run before it>``): the claim's atomic insert.
SCHEDULE_RUNS = "connector_schedule_runs"
# An interval longer than a year is a typo, not a schedule.
MAX_INTERVAL_S = 366 * 86_400


class Schedule(BaseModel):
    """When a source connector crawls on its own: every ``interval_s`` seconds (at least
    ``connect.schedule_min_interval_s``, checked when the connector is created or replaced)."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"example": {"interval_s": 3600}})

    interval_s: int = Field(ge=1, le=MAX_INTERVAL_S, description="Seconds between the starts of two crawls.")


class ScheduleDoc(TypedDict):
    """A scheduled connector's runs (``_id``: the connector id). Written by the worker that claims a run."""

    _id: str
    tenant: str
    name: str
    last_started_at: datetime | None
    worker_id: NotRequired[str]
    last_finished_at: NotRequired[datetime]
    # done | failed | unavailable | refused (another crawl of it ran) | error: what the last scheduled run ended as.
    last_outcome: NotRequired[str]
    last_records: NotRequired[int]
    last_error: NotRequired[str | None]


def _utc(value: datetime) -> datetime:
    # BSON dates come back naive (UTC) unless the client is tz-aware.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _started(doc: ScheduleDoc) -> datetime | None:
    value = doc.get("last_started_at")
    return _utc(value) if value is not None else None


def _ms(value: datetime) -> datetime:
    """What BSON keeps of a moment (milliseconds): the compare-and-set compares what was stored."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def next_run(last_started_at: datetime | None, interval_s: int, now: datetime) -> datetime:
    """When a connector whose last run started at ``last_started_at`` (None: never) runs next: at once if never."""
    if last_started_at is None:
        return now
    return _utc(last_started_at) + timedelta(seconds=interval_s)


class ScheduleStore:
    """The runs of scheduled connectors in ``metalake_control.connector_schedules``. Thread-safe."""

    def __init__(self, database: Database[Doc]) -> None:
        self._docs: Collection[ScheduleDoc] = typed_collection(database, SCHEDULES, ScheduleDoc)
        self._runs: Collection[Doc] = database[SCHEDULE_RUNS]

    def get(self, connector_id: str) -> ScheduleDoc | None:
        return self._docs.find_one({"_id": connector_id})

    def last_starts(self, connector_ids: list[str]) -> dict[str, datetime | None]:
        """When each of the connectors' last runs started (None or absent: never)."""
        docs = self._docs.find({"_id": {"$in": connector_ids}}, {"last_started_at": 1})
        return {d["_id"]: _started(d) for d in docs}

    def claim(
        self, connector_id: str, tenant: str, name: str, interval_s: int, now: datetime, worker: str
    ) -> datetime | None:
        """Take the connector's due run: its ``last_started_at`` becomes ``now`` and the moment is returned; None if
        it is not due (or another worker took it first)."""
        now = _ms(now)
        doc = self._docs.find_one({"_id": connector_id})
        last = _started(doc) if doc is not None else None
        if next_run(last, interval_s, now) > now:
            return None
        # The run that follows ``last`` has one key: inserting it is the claim. An insert is what FerretDB decides
        # atomically (the primary key); a conditional update or find-and-modify is not: two workers both passed
        # one in the integration test.
        slot = f"{connector_id}|{last.isoformat() if last is not None else 'first'}"
        try:
            self._runs.insert_one({"_id": slot, "connector": connector_id, "started_at": now, "worker_id": worker})
        except DuplicateKeyError:
            won = self._runs.find_one({"_id": slot})
            if won is not None:
                # The winner may have died before recording its start: record it for it (the same value whoever
                # writes it, and never backwards), so the schedule moves on instead of waiting for a dead claim.
                self._record_start(connector_id, tenant, name, _utc(won["started_at"]), str(won.get("worker_id")))
            return None
        self._record_start(connector_id, tenant, name, now, worker)
        if last is not None:  # the claims before the previous run can no longer be contended
            self._runs.delete_many({"connector": connector_id, "started_at": {"$lt": last}})
        return now

    def _record_start(self, connector_id: str, tenant: str, name: str, started_at: datetime, worker: str) -> None:
        fields = {"tenant": tenant, "name": name, "last_started_at": started_at, "worker_id": worker}
        older = {"$or": [{"last_started_at": None}, {"last_started_at": {"$lt": started_at}}]}
        try:
            self._docs.update_one({"_id": connector_id, **older}, {"$set": fields}, upsert=True)
        except DuplicateKeyError:
            pass  # the document exists with this start or a later one: nothing to record

    def finished(
        self, connector_id: str, started_at: datetime, outcome: str, records: int, error: str | None, now: datetime
    ) -> None:
        """Record how the run that started at ``started_at`` ended (a later run's claim is left alone)."""
        fields: dict[str, Any] = {
            "last_finished_at": _ms(now),
            "last_outcome": outcome,
            "last_records": records,
            "last_error": error,
        }
        self._docs.update_one({"_id": connector_id, "last_started_at": started_at}, {"$set": fields})

    def forget(self, connector_id: str) -> None:
        """The connector is gone: so is its schedule's history."""
        self._docs.delete_one({"_id": connector_id})
        self._runs.delete_many({"connector": connector_id})
