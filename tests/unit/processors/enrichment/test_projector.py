"""The projection writer's batch-level steps: tenants written on the worker pool, one publish per batch routing
changes to ``metalake.changes`` and automatic tags to each tenant's priority topic, a failed tenant failing the batch
before anything is announced."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer
from ops.settings import Settings
from processors.enrichment.commits import StepTimer
from processors.enrichment.health import IncidentIndex
from processors.enrichment.parse import ParsedRow
from processors.enrichment.projector import ProjectionWriter, _Written
from tenants.naming import CHANGES_TOPIC


class RecordingProducer:
    def __init__(self) -> None:
        self.calls: list[list[tuple[str, str]]] = []

    def publish(self, events: Sequence[CloudEvent], topic_for: Callable[[CloudEvent], str]) -> list[Any]:
        self.calls.append([(e.type, topic_for(e)) for e in events])
        return []


def _writer(tmp_path: Path, producer: RecordingProducer, workers: int = 3) -> ProjectionWriter:
    settings = Settings.model_validate(
        {
            "lake": {"root": tmp_path / "lake", "checkpoint_root": tmp_path / "ck"},
            "spark": {"projection_workers": workers},
        }
    )
    mongo = cast(MongoClient[dict[str, Any]], None)  # never reached: _write is replaced where it would be
    return ProjectionWriter(settings, "q", mongo, cast(EventProducer, producer), IncidentIndex())


def _column(name: str) -> dict[str, Any]:
    return {
        "kind": "column",
        "name": name,
        "urn": f"urn:metalake:pg:prod/db/s/t/{name}",
        "version": 3,
        "deleted": False,
    }


def test_one_publish_per_batch_routes_changes_and_auto_tags(tmp_path: Path) -> None:
    producer = RecordingProducer()
    writer = _writer(tmp_path, producer)
    change = new_event(
        "io.metalake.asset.upserted.v1",
        "acme",
        {"urn": _column("email")["urn"], "version": 3, "kind": "column", "name": "email"},
        source="/t",
    )
    written = {
        "acme": _Written([change], [_column("email")], "acme.priority"),
        "beta": _Written([], [_column("plain_count")], "beta.priority"),
    }
    writer._announce(written, StepTimer())
    writer.close()
    assert len(producer.calls) == 1
    (sent,) = producer.calls
    assert sent[0] == ("io.metalake.asset.upserted.v1", CHANGES_TOPIC)
    assert ("io.metalake.classification.added.v1", "acme.priority") in sent
    assert all(topic != "beta.priority" for _, topic in sent)  # no rule tags "plain_count"


def test_tenants_are_written_on_the_pool_and_a_failure_fails_the_batch(tmp_path: Path) -> None:
    writer = _writer(tmp_path, RecordingProducer(), workers=3)
    threads: set[str] = set()
    order: dict[str, list[str]] = {}

    def write(tenant: str, rows: list[ParsedRow], traces: Mapping[str, str]) -> _Written:
        threads.add(threading.current_thread().name)
        order[tenant] = [r.event_id or "" for r in rows]
        if tenant == "broken":
            raise RuntimeError("MongoDB away")
        return _Written([], [], f"{tenant}.priority")

    writer._write = write  # type: ignore[method-assign]
    rows = {t: [cast(ParsedRow, _Row(f"{t}-{i}")) for i in range(3)] for t in ("t-a", "t-b", "t-c")}
    written = writer._write_all(rows)
    assert sorted(written) == ["t-a", "t-b", "t-c"]
    assert order["t-a"] == ["t-a-0", "t-a-1", "t-a-2"]  # one tenant's rows stay in order
    assert all(name.startswith("q-tenant") for name in threads)
    with pytest.raises(RuntimeError, match="MongoDB away"):
        writer._write_all({**rows, "broken": []})
    writer.close()


class _Row:
    """The fields of a parsed row the writer's batch step reads."""

    def __init__(self, event_id: str) -> None:
        self.event_id = event_id
        self.traceparent = None
