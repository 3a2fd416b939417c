"""Kafka stopped for 30 s, then MongoDB (FerretDB) for 60 s, while events flow: a dedicated streaming job recovers
by itself from each, nothing lost or doubled.

These outages stop the stack's Kafka and FerretDB (everybody's): the test runs once, last (the file sorts after the
other fault tests), and restarts each in a ``finally`` block whatever happens. Both outages hit one job run: a job's
start is half a minute of this 2-core machine, and the second outage starts from the state the first one left.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import TenantNames, names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.streamjob import (
    Job,
    delta_record_counts,
    mongo_assets,
    newest_states,
    publish_confirmed,
    wait_for_event_ids,
    wait_for_events,
)
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

KAFKA_OUTAGE_S = 30
MONGO_OUTAGE_S = 60


@pytest.fixture
def dedicated(settings: Settings, stack: StackManager, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, settings.lake_root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    yield names


class Producer(threading.Thread):
    """Publishes a few events every half second, each batch confirmed by Kafka (retried while Kafka is away)."""

    def __init__(self, settings: Settings, names: TenantNames) -> None:
        super().__init__(daemon=True)
        self.settings, self.names = settings, names
        self.published: list[CloudEvent] = []
        self.retries = 0
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def _batch(self, n: int) -> list[CloudEvent]:
        out = []
        for i in range(n, n + 4):
            kind = "table" if i % 4 == 0 else "column"
            path = (f"t{i // 4}",) if kind == "table" else (f"t{i // 4}", f"c{i % 4}")
            urn = asset_urn("postgres", "outage", "db", "public", *path)
            data = {"urn": urn, "version": 1, "kind": kind, "name": path[-1]}
            out.append(new_event("io.metalake.asset.upserted.v1", self.names.tenant_id, data, source="/tests/faults"))
        return out

    def run(self) -> None:
        try:
            with EventProducer(self.settings) as producer:
                while not self.halt.is_set():
                    batch = self._batch(len(self.published))
                    self.retries += publish_confirmed(producer, batch, self.names, deadline_s=240) - 1
                    self.published.extend(batch)
                    time.sleep(0.5)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            self.error = exc


def _outage(stack: StackManager, service: str, seconds: float, job: Job) -> float:
    """Stop ``service`` for ``seconds`` (the job must live through it), start it again; when it was back."""
    stack.down([service])
    try:
        time.sleep(seconds)
        assert job.alive, f"the job died while {service} was down:\n{job.tail()}"
    finally:
        stack.up([service])
    return time.monotonic()


def _restarts(job: Job) -> int:
    return job.tail(10**8).count('"event": "stream.query_restarting"')


def _flowing_again(producer: Producer, what: str) -> None:
    before = len(producer.published)
    wait_for(f"events published after {what}", lambda: len(producer.published) > before + 40, timeout_s=120)


def test_kafka_down_30s_then_mongodb_down_60s_while_events_flow_the_job_recovers_by_itself(
    settings: Settings,
    stack: StackManager,
    dedicated: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    """A dedicated job runs while a producer publishes continuously; Kafka is stopped for 30 s and started again,
    then FerretDB for 60 s.

    Proven: the same job process (never restarted by the test) picks up the events published before, during (held
    and retried by the producer) and after each outage: every published event is in ``events``, every Kafka record
    once, with MongoDB equal to the published assets. (The producer's retry of a batch whose confirmation Kafka's
    shutdown lost puts those events in Kafka twice: ``events`` is history keyed by Kafka delivery, so they are two
    rows there, and one state everywhere else.) A batch in flight during Kafka's outage fails (its changes publish
    times out) and the job restarts that query from its checkpoint (``main.py``): the replayed batch is idempotent in
    Delta (transaction ids) and in MongoDB (version-guarded upserts). While MongoDB is away no query restarts: the
    projection's batch waits for it (``metalake.mongo.while_unreachable``).
    """
    tenant = dedicated.tenant_id
    job = Job(tenant, tmp_path / "job.log")
    producer = Producer(settings, dedicated)
    try:
        job.wait_ready()
        producer.start()
        wait_for_events(trino_cursor, dedicated, 20, timeout_s=120, job=job)
        before = len(producer.published)
        kafka_back = _outage(stack, "kafka", KAFKA_OUTAGE_S, job)
        _flowing_again(producer, "Kafka's outage")
        in_delta = wait_for_event_ids(trino_cursor, dedicated, len(producer.published), timeout_s=180, job=job)
        kafka_recovered_s = time.monotonic() - kafka_back
        assert in_delta[0] == in_delta[1], in_delta  # no Kafka record twice
        restarts_before = _restarts(job)
        mongo_back = _outage(stack, "ferretdb", MONGO_OUTAGE_S, job)
        _flowing_again(producer, "MongoDB's outage")
        producer.halt.set()
        producer.join(timeout=120)
        assert producer.error is None, producer.error
        published = producer.published
        counts = wait_for_event_ids(trino_cursor, dedicated, len(published), timeout_s=180, job=job)
        expected = newest_states(published)
        wait_for("MongoDB caught up", lambda: mongo_assets(mongo, dedicated) == expected, timeout_s=180)
        mongo_recovered_s = time.monotonic() - mongo_back
        assert job.alive, job.tail()
    finally:
        producer.halt.set()
        job.stop()
    restarts = _restarts(job)
    # The projection waited for MongoDB (mongo.outage_wait_s) instead of failing its batches and restarting.
    assert '"event": "mongo.unreachable"' in job.tail(10**8), job.tail()
    assert restarts == restarts_before, f"queries restarted during MongoDB's outage:\n{job.tail()}"
    print(
        f"{len(published)} events ({before} before Kafka's outage), {producer.retries} publish retries; "
        f"all in Delta {kafka_recovered_s:.0f}s after Kafka was back, MongoDB caught up {mongo_recovered_s:.0f}s "
        f"after FerretDB was back; queries restarted in-process {restarts} time(s); "
        f"{counts[1] - counts[2]} event(s) in Kafka twice (the producer's retries)"
    )
    assert counts[0] == counts[1] and counts[2] == len(published), counts
    ids = trino_rows(trino_cursor, f'SELECT event_id FROM "{schema_of(dedicated)}".events')
    assert {r[0] for r in ids or []} == {e.id for e in published}
    rows, records, event_ids = delta_record_counts(trino_cursor, dedicated)
    assert rows == records and event_ids == len(published)
