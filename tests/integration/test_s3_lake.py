"""The lake on S3: the local stack's SeaweedFS (started here if the session has none: ``metalake stack up
seaweedfs``). A dedicated tenant's streaming job, with ``lake.root`` at ``s3a://<bucket>/<prefix>``, writes its events
to Delta in the bucket through Spark's s3a; Trino reads them back through its native S3 file system; the tenant's
``audit`` table takes delta-rs appends and reads on the same store, several writers at once included. One extra job,
stopped at the end; the session's pooled job and local-folder lake are left as they are."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from control.audit import AuditQuery, append, audit_row, ensure_table, read
from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.lake_uri import delta_rs_uri
from metalake.s3 import lake_storage_options
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.lake_catalog import register_tables
from tenants.naming import TenantNames, names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.s3it import s3_lake_settings
from tests._support.streamjob import Job, publish_confirmed, wait_for_events
from tests._support.trinoschema import schema_of

pytestmark = [pytest.mark.integration, pytest.mark.s3]


@pytest.fixture(scope="module")
def s3_settings(settings: Settings, stack: StackManager) -> Settings:
    return s3_lake_settings(settings, stack, "it")


@pytest.fixture
def on_s3(s3_settings: Settings, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, s3_settings.lake_root, dedicated=True)
    ensure_topics(s3_settings, [names.priority_topic, names.bulk_topic])
    yield names


def _tables(tenant: str, n: int) -> list[CloudEvent]:
    return [
        new_event(
            "io.metalake.asset.upserted.v1",
            tenant,
            {
                "urn": asset_urn("postgres", "s3", "db", "public", f"t{i}"),
                "version": 1,
                "kind": "table",
                "name": f"t{i}",
            },
            source="/tests/s3",
        )
        for i in range(n)
    ]


def test_the_stream_job_writes_delta_on_s3_and_trino_reads_it_back(
    s3_settings: Settings, settings: Settings, on_s3: TenantNames, trino_cursor: Any, tmp_path: Path
) -> None:
    tenant = on_s3.tenant_id
    events = _tables(tenant, 5)
    with EventProducer(s3_settings) as producer:
        publish_confirmed(producer, events, on_s3)
    job = Job(tenant, tmp_path / "job.log", env={"METALAKE_LAKE__ROOT": str(s3_settings.lake_root)})
    try:
        job.wait_ready(timeout_s=240)
        assert wait_for_events(trino_cursor, on_s3, len(events), timeout_s=240, job=job) == (len(events), len(events))
        schema = schema_of(on_s3)
        wait_for(
            "every asset in Delta on S3",
            lambda: trino_rows(trino_cursor, f'SELECT count(*) FROM "{schema}".assets') == [(len(events),)] or None,
            timeout_s=120,
        )
    finally:
        job.stop()
    # The table's files are objects of the bucket; nothing of the tenant went to the local-folder lake.
    storage = lake_storage_options(s3_settings)
    events_table = DeltaTable(delta_rs_uri(on_s3.delta_path("events")), storage_options=storage)
    prefix = on_s3.delta_path("events").uri("s3") + "/"
    files = events_table.file_uris()
    assert files and all(f.startswith(prefix) for f in files)
    assert events_table.to_pyarrow_table().num_rows == len(events)
    local_root = settings.lake_root
    assert isinstance(local_root, Path) and not (local_root / tenant).exists()


def test_the_audit_table_on_s3_takes_concurrent_appends_and_trino_reads_it(
    s3_settings: Settings, on_s3: TenantNames, trino_cursor: Any
) -> None:
    storage = lake_storage_options(s3_settings)
    path = on_s3.delta_path("audit")
    assert ensure_table(path, storage) is True
    assert ensure_table(path, storage) is False
    # Several writers at once (the API's instances, the lake worker): each delta-rs commit claims its version with a
    # conditional PUT, so a loser retries on the next version instead of overwriting the winner's commit.
    writers, rows_each = 3, 4
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            for i in range(rows_each):
                append(path, [audit_row(f"writer-{w}", "connector.create", f"c{w}-{i}", "done")], storage)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    rows = read(path, AuditQuery(limit=100), storage)
    assert len(rows) == writers * rows_each
    assert {r.actor for r in rows} == {f"writer-{w}" for w in range(writers)}
    table = DeltaTable(delta_rs_uri(path), storage_options=storage)
    assert table.version() == writers * rows_each  # version 0 is the creation; one commit per append, none lost
    register_tables(s3_settings, on_s3, ("audit",))
    count = trino_rows(trino_cursor, f'SELECT count(*) FROM "{schema_of(on_s3)}".audit')
    assert count == [(writers * rows_each,)]
