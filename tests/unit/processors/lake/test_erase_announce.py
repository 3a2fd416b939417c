"""The erase announces itself on metalake.changes with the URN's hash only; when Kafka cannot confirm it, the erase
still succeeds and its report says the propagation processor must be restarted."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import pytest

from metalake.events import CloudEvent
from metalake.kafka import EventProducer, PublishError
from metalake.settings import KafkaSettings
from ops.settings import Settings
from processors.lake.erase import RESTART_PROCESSOR, EraseReport, announce, erase
from processors.lake.errors import LakeUsageError
from processors.lake.scope import erase_target
from tenants.naming import CHANGES_TOPIC, names_for

URN = "urn:metalake:postgres:prod/shop/public/customers"
ERASURE = "0b6f1c1e-3f4a-4d2b-9a8e-5c7d6e5f4a3b"


class Recording:
    def __init__(self, fail: Exception | None = None) -> None:
        self.sent: list[tuple[str, CloudEvent]] = []
        self.fail = fail

    def publish(self, events: Sequence[CloudEvent], topic_for: Callable[[CloudEvent], str]) -> object:
        if self.fail is not None:
            raise self.fail
        self.sent.extend((topic_for(e), e) for e in events)
        return None


def _announce(publisher: object, lines: list[str], children: bool = False) -> EraseReport:
    target = erase_target("acme", URN, children)
    report = EraseReport(target.target_hash, ERASURE)
    announce(publisher, names_for("acme", "/tmp/lake"), target, report, lines.append)  # type: ignore[arg-type]
    return report


def test_the_announcement_names_the_tenant_the_erasure_and_a_hash() -> None:
    publisher, lines = Recording(), list[str]()
    report = _announce(publisher, lines, children=True)
    assert report.propagation_notified and lines == []
    [(topic, event)] = publisher.sent
    assert topic == CHANGES_TOPIC
    assert (event.type, event.tenantid, event.id) == ("io.metalake.asset.erased.v1", "acme", ERASURE)
    assert event.data["urn_sha256"] == report.target_hash and event.data["include_children"] is True
    assert "customers" not in event.value().decode() + repr(event.headers())


def test_a_failed_announcement_is_reported_not_raised() -> None:
    lines: list[str] = []
    report = _announce(Recording(PublishError("1 event(s) not confirmed by Kafka within 35s", True)), lines)
    assert report.propagation_notified is False
    assert lines == [f"erase acme: WARNING: {RESTART_PROCESSOR}"]
    assert "restart" in RESTART_PROCESSOR


def test_kafka_unreachable_gives_a_report_not_an_error() -> None:
    # A real producer against a port nothing listens on: delivery times out and the erase goes on.
    settings = Settings(kafka=KafkaSettings(bootstrap_servers="127.0.0.1:9", delivery_timeout_ms=1000))
    lines: list[str] = []
    started = time.monotonic()
    with EventProducer(settings) as producer:
        report = _announce(producer, lines)
    assert report.propagation_notified is False and len(lines) == 1
    assert time.monotonic() - started < 30


def test_an_erasure_id_that_is_not_a_uuid_is_refused_before_anything_is_deleted() -> None:
    # Spark and MongoDB are never reached: the id is checked first (None stands in for both).
    target = erase_target("acme", URN)
    with pytest.raises(LakeUsageError, match="--erasure-id must be a UUID"):
        erase(None, None, Settings(), names_for("acme", "/tmp/lake"), target, "dpo", erasure_id="42")  # type: ignore[arg-type]
