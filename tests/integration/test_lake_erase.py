"""GDPR erase on the real stack, for a pooled tenant (its rows of the shared tables): the URN (and its columns) leaves
every Delta table, the disk and MongoDB; other assets stay; the audit row names a hash, never the URN. Also out of
other assets' rows: edges to it and tags that propagated from or through it. URNs hold the tenant id, so no other
test's rows of the shared tables spell them (test_lake_drop erases a URN two tenants share)."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from control.connectors.offsets import OffsetStore
from control.erased import ERASED_URNS
from metalake.kafka import EventProducer, RawRecord
from metalake.urn import asset_urn
from ops.settings import Settings
from processors.enrichment.tables import TABLES
from processors.lake.erase import erase
from processors.lake.scope import erase_target
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE, DELTA_TABLES, LakeTable, TenantNames, names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.kafka_tail import Record, mark, of_tenant, read_since
from tests._support.lakeit import event, lake_spark, publish, upsert
from tests._support.outbound_runtime import caught_up, start_groups_at_end
from tests._support.pipeline_procs import PropagationProcess
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration
__all__ = ["lake_spark"]


@dataclass(frozen=True)
class Urns:
    """The assets of one tenant's erase test: the table to erase, its column, a lookalike and another table."""

    table: str
    column: str
    lookalike: str
    other: str

    @classmethod
    def of(cls, tenant: str) -> Urns:
        def urn(name: str) -> str:
            return asset_urn("postgres", tenant, "shop", "public", name)

        # notes: not a name the automatic classifier tags: its events would arrive after the erase and bring it back.
        # customers_archive shares the table's prefix without being a child.
        return cls(urn("customers"), f"{urn('customers')}/notes", urn("customers_archive"), urn("orders"))

    @property
    def pattern(self) -> str:
        """The table's URN not followed by a character that would make it another name (a child's "/" matches)."""
        return re.escape(self.table) + r"(?![A-Za-z0-9_%.~-])"


def _poison_body(asset: str) -> bytes:
    """A dead letter's value naming ``asset`` as written (not through json.dumps, which would escape a backslash)."""
    return ('{"asset":"' + asset + '","note":"customer"}').encode()


def _seed(settings: Settings, tenant: str) -> None:
    u = Urns.of(tenant)
    TABLE, COLUMN, LOOKALIKE, OTHER = u.table, u.column, u.lookalike, u.other
    incident = "com.montecarlodata.incident.opened.v1"
    publish(
        settings,
        [
            upsert(tenant, TABLE, kind="table", name="customers", description="who bought"),
            upsert(tenant, COLUMN, kind="column", name="notes", data_type="text"),
            upsert(tenant, LOOKALIKE, kind="table", name="customers_archive"),
            upsert(tenant, OTHER, kind="table", name="orders"),
            event(tenant, "io.metalake.classification.added.v1", urn=COLUMN, version=1, tag="PII", source="human"),
            event(tenant, "io.metalake.classification.added.v1", urn=OTHER, version=1, tag="GOLD", source="human"),
            event(tenant, "io.metalake.lineage.edge.added.v1", urn=OTHER, upstream=COLUMN, version=1),
            event(tenant, "io.metalake.lineage.edge.added.v1", urn=OTHER, upstream=LOOKALIKE, version=1),
            event(tenant, incident, urn=TABLE, version=1, incident_id="inc-1", status="opened"),
            event(tenant, incident, urn=OTHER, version=1, incident_id="inc-2", status="opened"),
        ],
    )

    # A poison record keyed by the URN: it lands in the tenant's _dlq with raw_key "<tenant>:<urn>".
    def headers() -> list[tuple[str, bytes]]:
        return [
            ("content-type", b"application/json"),
            ("ce_specversion", b"1.0"),
            ("ce_id", str(uuid.uuid4()).encode()),
            ("ce_source", b"/tests/lake"),
            ("ce_type", b"io.metalake.asset.upserted.v1"),
            ("ce_tenantid", tenant.encode()),
        ]

    value = json.dumps({"urn": TABLE, "kind": "table"}).encode()
    # Poison records keyed by something else: one whose body names the table (slashes JSON-escaped, as some
    # producers write them), which the erase must find in the raw bytes, and one naming only the lookalike, which stays.
    body, lookalike = _poison_body(TABLE.replace("/", "\\/")), _poison_body(LOOKALIKE)
    key = f"{tenant}:unrelated".encode()
    with EventProducer(settings) as producer:
        producer.publish_raw(
            [
                RawRecord("metalake.events.priority", "bad", f"{tenant}:{TABLE}".encode(), value, headers()),
                RawRecord("metalake.events.priority", "bad-body", key, body, headers()),
                RawRecord("metalake.events.priority", "bad-lookalike", key, lookalike, headers()),
            ]
        )


def _tenant_frame(spark: SparkSession, place: LakeTable) -> DataFrame:
    frame = spark.read.format("delta").load(str(place.path))
    return frame if place.predicate is None else frame.where(place.predicate)


def _files_with_rows(spark: SparkSession, names: TenantNames, pattern: str) -> set[Path]:
    """The data files that hold a row of the tenant naming an erased URN, in any column (all cast to text)."""
    found: set[Path] = set()
    for spec in TABLES:
        frame = _tenant_frame(spark, names.table(spec.name))
        text = F.concat_ws("\u0001", *(F.col(c).cast("string") for c in frame.columns))
        matching = frame.where(F.regexp_like(text, F.lit(pattern)))
        hits = matching.select(F.input_file_name().alias("f")).distinct().collect()
        found |= {Path(r["f"].removeprefix("file:")) for r in hits}
    return found


def _delta_counts(spark: SparkSession, names: TenantNames, tables: Iterable[str]) -> dict[str, int]:
    return {t: _tenant_frame(spark, names.table(t)).count() for t in tables}


def _folders(names: TenantNames) -> set[Path]:
    """Where the tenant's tables live: the shared tables' folder and its own (audit) for a pooled tenant."""
    return {names.table(t).path.parent for t in DELTA_TABLES}


def _grep(names: TenantNames, glob: str, pattern: str) -> list[Path]:
    """Files whose raw bytes name an erased URN (the lookalike, which only shares a prefix, does not count)."""
    needle = re.compile(pattern.encode())
    return [p for folder in _folders(names) for p in folder.rglob(glob) if needle.search(p.read_bytes())]


def test_erase_removes_the_asset_and_its_columns_everywhere_and_audits_a_hash(
    settings: Settings,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    lake_spark: SparkSession,
) -> None:
    names = names_for(tenant, settings.lake_root)
    assert names.table("assets").shared
    u = Urns.of(tenant)
    TABLE, LOOKALIKE, OTHER = u.table, u.lookalike, u.other
    db = mongo[names.mongo_database]
    _seed(settings, tenant)
    wait_for("the assets in MongoDB", lambda: db["assets"].count_documents({}) == 4 or None)
    wait_for("the incidents in MongoDB", lambda: db["incidents"].count_documents({}) == 2 or None)
    wait_for("the edges in MongoDB", lambda: db["lineage"].count_documents({}) == 2 or None)
    wait_for("the tags in MongoDB", lambda: db["classifications"].count_documents({}) == 2 or None)
    schema = schema_of(names)
    dead_letters = f'SELECT count(*) FROM "{schema}"."_dlq"'
    # 300 s: on a loaded 2-core machine the job's lake batches took over 120 s (make test, 2026-11-30).
    wait_for(
        "the dead letters in Trino", lambda: trino_rows(trino_cursor, dead_letters) == [(3,)] or None, timeout_s=300
    )
    old_files = _files_with_rows(lake_spark, names, u.pattern)
    assert old_files, "the seeded rows are on disk before the erase"
    # A crawler's offsets: the table's own (tombstoned by the erase) and one naming it as an upstream (rewritten).
    offsets = OffsetStore(settings)
    offsets.store(
        tenant,
        "pg",
        {
            '{"table":"customers"}': {"urn": TABLE, "columns": ["notes"], "upstreams": []},
            '{"table":"orders"}': {"urn": OTHER, "columns": ["id"], "upstreams": [TABLE]},
        },
    )

    lines: list[str] = []
    target = erase_target(tenant, TABLE, include_children=True)
    # A short grace: only this test writes the tenant now (the production default spares files younger than 60 s).
    report = erase(lake_spark, mongo, settings, names, target, "dpo@it", lines.append, grace_s=5)

    # Delta: every table, including the events (subject, upstream in data) and the _dlq (raw key, raw body).
    assert report.propagation_notified
    assert report.delta_rows == {
        "events": 5,  # two upserts, the tag on the column, the edge from the column, the incident
        "assets": 2,
        "classifications": 1,
        "lineage_edges": 1,
        "incidents": 1,
        "propagated_tags": 0,  # no propagation processor ran here: the last test covers them
        "asset_edits": 0,  # nobody edited these assets (an edit's rows are erased like the rest)
        "_dlq": 2,  # keyed by the table, and the body naming it; not the lookalike's
    }
    assert sorted(report.vacuumed) == sorted(f"_pooled/{t}" for t, n in report.delta_rows.items() if n)
    assert report.mongo_documents == {
        "assets": 2,
        "classifications": 1,
        "lineage": 1,
        "incidents": 1,
        "propagated_tags": 0,
        "asset_edits": 0,
    }
    assert _files_with_rows(lake_spark, names, u.pattern) == set()
    assert report.offsets == {"rewritten": 1, "tombstoned": 1}
    assert offsets.load(tenant, "pg") == {'{"table":"orders"}': {"urn": OTHER, "columns": ["id"], "upstreams": []}}
    offsets.forget_tenant(tenant)
    offsets.close()
    # Physically gone: the files that held the rows are deleted, and no data file holds the URN's bytes.
    assert not any(f.exists() for f in old_files)
    assert _grep(names, "*.parquet", u.pattern) == []
    # The Delta log records the DELETE predicates as hashes and Kafka positions: no commit file spells the URN.
    assert _grep(names, "*.json", u.pattern) == []
    dlq_log = "\n".join(p.read_text() for p in (names.table("_dlq").path / "_delta_log").glob("*.json"))
    assert "kafka_offset" in dlq_log and tenant in dlq_log  # the IN as "= <offset>" terms, the tenant predicate
    assert re.search(u.pattern, dlq_log) is None
    kept = _tenant_frame(lake_spark, names.table("_dlq")).collect()
    assert [bytes(r["raw_value"]) for r in kept] == [_poison_body(LOOKALIKE)]

    # Other assets stay, in Delta (read through Trino) and in MongoDB.
    assets = trino_rows(trino_cursor, f'SELECT urn FROM "{schema}".assets ORDER BY urn')
    assert assets == [(LOOKALIKE,), (OTHER,)]
    edges = trino_rows(trino_cursor, f'SELECT upstream, urn FROM "{schema}".lineage_edges')
    assert edges == [(LOOKALIKE, OTHER)]
    assert sorted(d["_id"] for d in db["assets"].find()) == [LOOKALIKE, OTHER]
    assert [d["_id"] for d in db["classifications"].find()] == [f"{OTHER}|GOLD"]
    assert [d["_id"] for d in db["lineage"].find()] == [f"{LOOKALIKE}|{OTHER}"]
    assert [d["incident_id"] for d in db["incidents"].find()] == ["inc-2"]

    # The audit row: who, what, a hash of the target and counts; no erased value anywhere in the table's files.
    rows = lake_spark.read.format("delta").load(str(names.delta_path("audit"))).collect()
    assert len(rows) == 1
    row = rows[0].asDict()
    assert (row["actor"], row["action"], row["result"]) == ("dpo@it", "erase.asset_and_children", "done")
    assert row["target_hash"] == hashlib.sha256(TABLE.encode()).hexdigest()
    assert json.loads(row["counts"])["delta.events"] == 5
    # The erased set the admin API filters the Kafka DLQ topics by (their letters cannot be deleted): a hash only.
    erased = mongo[CONTROL_DATABASE][ERASED_URNS].find_one({"tenant": tenant})
    assert erased is not None and (erased["target_hash"], erased["include_children"]) == (row["target_hash"], True)
    assert TABLE not in str(erased)
    assert not any(urn in str(v) for v in row.values() for urn in (TABLE, u.column))
    assert not any(b"customers" in p.read_bytes() for p in names.delta_path("audit").rglob("*") if p.is_file())

    # Erasing again finds nothing and says so.
    again = erase(lake_spark, mongo, settings, names, target, "dpo@it", grace_s=5)
    assert set(again.delta_rows.values()) == {0} and again.vacuumed == []


def test_rows_stored_under_another_spelling_of_the_urn_are_erased_too(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], lake_spark: SparkSession
) -> None:
    """Issue 12, item 10: before every entry point canonicalised URNs, an asset ingested as ``.../jane doe's orders``
    was stored so, and erasing the canonical spelling found nothing. The erase now also finds the tenant's rows under
    any spelling of the URN (and the request may use any spelling)."""
    names = names_for(tenant, settings.lake_root)
    canonical = asset_urn("postgres", tenant, "shop", "public", "jane doe's orders")
    odd = canonical.replace("jane%20doe%27s%20orders", "jane doe's orders")
    assert odd != canonical
    other = asset_urn("postgres", tenant, "shop", "public", "orders")
    db = mongo[names.mongo_database]
    place = names.table("assets")
    publish(
        settings, [upsert(tenant, canonical, kind="table", name="x"), upsert(tenant, other, kind="table", name="y")]
    )
    wait_for("the assets in MongoDB", lambda: db["assets"].count_documents({}) == 2 or None)
    wait_for("the assets in Delta", lambda: _tenant_frame(lake_spark, place).count() == 2 or None)
    # What the job stored before: the same rows under the source's spelling, in Delta and in MongoDB.
    stored = _tenant_frame(lake_spark, place).where(F.col("urn") == canonical).withColumn("urn", F.lit(odd))
    stored.write.format("delta").mode("append").save(str(place.path))
    db["assets"].insert_one({"_id": odd, "urn": odd, "kind": "table", "name": "x"})

    report = erase(lake_spark, mongo, settings, names, erase_target(tenant, odd), "dpo@it", grace_s=5)

    assert report.target_hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert (report.delta_rows["assets"], report.mongo_documents["assets"]) == (2, 2)
    assert [r["urn"] for r in _tenant_frame(lake_spark, place).collect()] == [other]
    assert [d["_id"] for d in db["assets"].find()] == [other]


# A -> B -> C, PII on A: the propagation processor puts it on B (path A, B) and C (path A, B, C); then B is erased
# while the processor runs. Then C -> D and A -> D: a processor still holding B would carry the tag to D along
# A, B, C, D (naming B again); the one told of the erase reaches D along A, D only.
def _flow(tenant: str) -> tuple[str, str, str, str]:
    return tuple(asset_urn("postgres", tenant, "flow", "public", t) for t in ("source", "middle", "sink", "later"))  # type: ignore[return-value]


def _edge_change_into(tenant: str, urn: str) -> Callable[[Record], bool]:
    """The state change of a lineage edge into ``urn`` of ``tenant`` on metalake.changes."""

    def keep(record: Record) -> bool:
        if not of_tenant(tenant)(record) or record.value is None:
            return False
        data = json.loads(record.value)
        return bool(data.get("table") == "lineage_edges" and (data.get("key") or {}).get("urn") == urn)

    return keep


def _live_propagations(db: Any) -> dict[str, list[str]]:
    return {d["urn"]: d["path"] for d in db["propagated_tags"].find({"deleted": False})}


def test_erasing_a_lineage_hop_leaves_its_urn_in_no_row_of_any_table_or_collection(
    settings: Settings,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    lake_spark: SparkSession,
    tmp_path: Path,
) -> None:
    names = names_for(tenant, settings.lake_root)
    SOURCE, MIDDLE, SINK, LATER = _flow(tenant)
    db = mongo[names.mongo_database]
    edge = "io.metalake.lineage.edge.added.v1"
    publish(
        settings,
        [
            *(upsert(tenant, urn, kind="table", name=urn.rsplit("/", 1)[1]) for urn in (SOURCE, MIDDLE, SINK)),
            event(tenant, edge, urn=MIDDLE, upstream=SOURCE, version=1),
            event(tenant, edge, urn=SINK, upstream=MIDDLE, version=1),
            event(tenant, "io.metalake.classification.added.v1", urn=SOURCE, version=1, tag="PII", source="human"),
        ],
    )
    wait_for("the assets", lambda: db["assets"].count_documents({}) == 3 or None)
    wait_for("the edges", lambda: db["lineage"].count_documents({}) == 2 or None)
    wait_for("the tag", lambda: db["classifications"].count_documents({}) == 1 or None)

    # The processor reconciles the tenant at start: it propagates the tag committed before it ran.
    group = f"it-erase-propagation-{tenant}"
    start_groups_at_end(settings, {group: CHANGES_TOPIC})
    processor = PropagationProcess(tenant, tmp_path / "propagation.log", group)
    try:
        processor.wait_ready()
        expected = {MIDDLE: [SOURCE, MIDDLE], SINK: [SOURCE, MIDDLE, SINK]}
        wait_for("the propagated tags", lambda: _live_propagations(db) == expected or None, timeout_s=120)
        # MongoDB leads Delta (the job's projection queries write it apart from the lake query): erase once Delta
        # holds the rows too, or rows still in flight would land after the erase.
        held = {"assets": 3, "lineage_edges": 2, "propagated_tags": 2}
        wait_for("the rows in Delta", lambda: _delta_counts(lake_spark, names, held) == held or None, timeout_s=180)

        # The processor keeps running: the erase's announcement makes it reload the tenant from MongoDB.
        report = erase(lake_spark, mongo, settings, names, erase_target(tenant, MIDDLE), "dpo@it", grace_s=5)
        assert report.propagation_notified
        wait_for(
            "the processor to reload the tenant",
            lambda: processor.log.read_text().count('"propagation.tenant_loaded"') >= 2 or None,
            timeout_s=60,
        )
        # C -> D alone first (a batch holding both edges would hide a stale B behind the shorter path): once the
        # processor has consumed its change, nothing reaches D.
        marks = mark(settings, CHANGES_TOPIC)
        publish(settings, [event(tenant, edge, urn=LATER, upstream=SINK, version=2)])
        read_since(settings, CHANGES_TOPIC, marks, _edge_change_into(tenant, LATER), expect=1, timeout_s=120)
        wait_for("the processor to consume it", lambda: caught_up(settings, group, CHANGES_TOPIC) or None, timeout_s=60)
        # A -> D: proves the processor is alive and propagating; D's tag comes straight from A.
        publish(settings, [event(tenant, edge, urn=LATER, upstream=SOURCE, version=3)])
        wait_for("the tag on D", lambda: _live_propagations(db) == {LATER: [SOURCE, LATER]} or None, timeout_s=120)
    finally:
        processor.stop()
    assert processor.proc.returncode == 0, processor.tail()

    # B's own rows, the edges on either side of it, and both propagated tags: B's (it is the asset) and C's (its
    # path runs through B). Events: B's upsert, both edges, both propagations (a shared processor may add copies).
    counts = {t: n for t, n in report.delta_rows.items() if t != "events"}
    assert counts == {
        "assets": 1,
        "classifications": 0,
        "lineage_edges": 2,
        "incidents": 0,
        "propagated_tags": 2,
        "asset_edits": 0,
        "_dlq": 0,
    }
    assert report.delta_rows["events"] >= 5
    assert report.mongo_documents == {
        "assets": 1,
        "classifications": 0,
        "lineage": 2,
        "incidents": 0,
        "propagated_tags": 2,
        "asset_edits": 0,
    }
    assert {f"_pooled/{t}" for t in ("events", "assets", "lineage_edges", "propagated_tags")} <= set(report.vacuumed)

    # No row of any Delta table of the tenant (audit included) names B, in any column: no tag propagated after the
    # erase went through it (the events table keeps every propagation ever published).
    for table in DELTA_TABLES:
        frame = _tenant_frame(lake_spark, names.table(table))
        text = F.concat_ws("\u0001", *(F.col(c).cast("string") for c in frame.columns))
        assert frame.where(text.contains(MIDDLE)).count() == 0, table
    needle = MIDDLE.encode()
    assert [p for f in _folders(names) for p in f.rglob("*.parquet") if needle in p.read_bytes()] == []
    # Nor any document of any collection of the tenant's database.
    for collection in db.list_collection_names():
        holding = [d["_id"] for d in db[collection].find() if MIDDLE in json.dumps(d, default=str)]
        assert holding == [], collection

    # A keeps its tag (in Delta and MongoDB); A and C stay.
    assert [d["_id"] for d in db["classifications"].find()] == [f"{SOURCE}|PII"]
    tags = _tenant_frame(lake_spark, names.table("classifications")).collect()
    assert [(r["urn"], r["tag"], r["deleted"]) for r in tags] == [(SOURCE, "PII", False)]
    assert sorted(d["_id"] for d in db["assets"].find()) == sorted([SOURCE, SINK])
    assert [(d["urn"], d["path"]) for d in db["propagated_tags"].find()] == [(LATER, [SOURCE, LATER])]
    assert sorted((d["upstream"], d["urn"]) for d in db["lineage"].find()) == sorted([(SINK, LATER), (SOURCE, LATER)])
