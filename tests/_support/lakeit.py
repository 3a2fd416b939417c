"""Helpers for the lake command tests: publishing events for a fresh tenant and one shared Spark session."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from metalake.events import CloudEvent, new_event, spec_for
from metalake.kafka import EventProducer
from ops.settings import Settings
from tenants.naming import names_for

SOURCE = "/tests/lake"


def event(tenant: str, event_type: str, **data: Any) -> CloudEvent:
    return new_event(event_type, tenant, data, source=SOURCE)


def upsert(tenant: str, urn: str, version: int = 1, **data: Any) -> CloudEvent:
    return event(tenant, "io.metalake.asset.upserted.v1", urn=urn, version=version, **data)


def publish(settings: Settings, events: list[CloudEvent]) -> None:
    def topic_for(e: CloudEvent) -> str:
        return names_for(e.tenantid, settings.lake_root).topic(spec_for(e.type).topic_class(e.data))

    with EventProducer(settings) as producer:
        assert len(producer.publish(events, topic_for)) == len(events)


def drop_tenant(tenant: str) -> dict[str, Any]:
    """``python -m processors.lake drop --yes --tenant T`` as deprovisioning runs it; its JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", "processors.lake", "drop", "--yes", "--tenant", tenant],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(scope="session")
def lake_spark(settings: Settings) -> Iterator[SparkSession]:
    """One local Spark session for every lake test of the run (each costs seconds and about 1 GB)."""
    from processors.lake.sparkio import lake_session

    spark = lake_session(settings, "metalake-lake-tests")
    yield spark
    spark.stop()


__all__ = ["drop_tenant", "event", "lake_spark", "publish", "upsert"]
