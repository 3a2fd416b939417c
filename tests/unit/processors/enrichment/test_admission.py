"""The job drops the events of tenants being deleted or deleted: one control-plane lookup per micro-batch, the lake
batch's summary without them, the projection batch without them, both counted; a failed lookup falls back to the
last answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from pymongo import MongoClient
from pymongo.errors import ServerSelectionTimeoutError
from pyspark.sql import DataFrame

from metalake.events import new_event
from metalake.kafka import EventProducer
from ops.settings import Settings
from processors.enrichment import admission
from processors.enrichment.admission import TenantAdmission
from processors.enrichment.health import IncidentIndex
from processors.enrichment.parse import ParsedRow
from processors.enrichment.projector import ProjectionWriter, _Written
from processors.enrichment.summary import BatchSummary


class Lookups:
    def __init__(self, refused: set[str]) -> None:
        self.refused = refused
        self.calls: list[frozenset[str]] = []
        self.fail = False

    def __call__(self, tenants: frozenset[str]) -> set[str]:
        self.calls.append(tenants)
        if self.fail:
            raise ServerSelectionTimeoutError("control plane away")
        return self.refused


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts: dict[str, int] = {}

    def add(amount: int, attributes: dict[str, str]) -> None:
        # No tenant label (bounded series at 10,000 tenants): the log line names the tenant.
        assert attributes == {"reason": "tenant-deleted"}
        counts["tenant-deleted"] = counts.get("tenant-deleted", 0) + amount

    monkeypatch.setattr(admission.dropped_records, "add", add)
    return counts


def test_one_lookup_per_batch_and_the_last_answer_when_it_fails() -> None:
    lookups = Lookups({"gone", "not-in-batch"})
    gate = TenantAdmission(lookups)
    assert gate.refused(["acme", "gone", "acme"]) == frozenset({"gone"})
    assert lookups.calls == [frozenset({"acme", "gone"})]
    assert gate.refused([]) == frozenset() and len(lookups.calls) == 1  # no tenants, no lookup
    lookups.fail = True
    # MongoDB away: what was refused stays refused; a tenant never looked up is written.
    assert gate.refused(["acme", "gone", "new"]) == frozenset({"gone"})


def test_the_lake_summary_leaves_the_dropped_tenants_out() -> None:
    summary = BatchSummary.from_groups(
        (
            ("acme", 3, True, "assets", 5),
            ("acme", 3, False, None, 1),
            ("gone", 7, True, "assets", 4),
            ("gone", 7, False, None, 2),
            (None, None, False, None, 1),
        )
    )
    assert summary.valid == 9 and summary.dead == 3 and summary.unrouted == 1
    assert summary.records_of(frozenset({"gone"})) == {"gone": 6}
    kept = summary.without(frozenset({"gone"}))
    assert kept.tenants == frozenset({"acme"}) and kept.buckets == frozenset({3})
    assert (kept.valid, kept.dead, kept.unrouted) == (5, 1, 1)  # the unrouted dead letter stays
    assert kept.state_tables == frozenset({"assets"})


def _raw(tenant: str, offset: int) -> dict[str, Any]:
    event = new_event(
        "io.metalake.asset.upserted.v1",
        tenant,
        {"urn": f"urn:metalake:pg:prod/db/s/t{offset}", "version": 1, "kind": "table", "name": f"t{offset}"},
        source="/tests",
    )
    return {
        "key": event.key,
        "value": event.value(),
        "headers": list(event.headers()),
        "topic": "metalake.events.priority",
        "partition": 0,
        "offset": offset,
        "timestamp": datetime.now(UTC),
    }


class Batch:
    """The part of a Kafka micro-batch DataFrame the projection writer reads."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self._rows = rows

    def select(self, *columns: str) -> Batch:
        return self

    def collect(self) -> list[dict[str, Any]]:
        return self._rows


def test_the_projection_writes_no_document_of_a_dropped_tenant(tmp_path: Path, counted: dict[str, int]) -> None:
    settings = Settings.model_validate({"lake": {"root": tmp_path / "lake", "checkpoint_root": tmp_path / "ck"}})
    lookups = Lookups({"gone"})
    mongo = cast(MongoClient[dict[str, Any]], None)  # never reached: _write is replaced
    producer = cast(EventProducer, None)
    writer = ProjectionWriter(settings, "q", mongo, producer, IncidentIndex(), admission=TenantAdmission(lookups))
    written: dict[str, int] = {}

    def write(tenant: str, rows: list[ParsedRow], traces: Mapping[str, str]) -> _Written:
        written[tenant] = len(rows)
        return _Written([], [], f"{tenant}.priority")

    announce: Callable[..., None] = lambda written, timer: None  # noqa: E731
    writer._write = write  # type: ignore[method-assign]
    writer._announce = announce  # type: ignore[method-assign]
    batch = Batch([_raw("acme", 1), _raw("gone", 2), _raw("gone", 3), _raw("acme", 4)])
    writer(cast(DataFrame, batch), 1)
    writer.close()
    assert written == {"acme": 2}
    assert lookups.calls == [frozenset({"acme", "gone"})]
    assert counted == {"tenant-deleted": 2}
