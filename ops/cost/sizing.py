"""The sizing rules of ``metalake cost``: how much of each resource a workload needs.

Each measured rule names the section of docs/benchmarks.md it comes from; the others say they are assumptions
(docs/cost.md lists both). The benchmarks ran on a shared 2 vCPU VM with every service on it, so the per-core
rates are low (a production node runs one thing): the bill errs high.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """What the operator says about the platform (the command's options)."""

    tenants: int
    events_per_day: float
    assets: float
    dedicated: int = 0
    # How long the `events` history stays in Delta (the lifecycle of vacuumed files aside).
    retention_days: int = 365
    sql_queries_per_tenant_hour: float = 60.0

    def __post_init__(self) -> None:
        if self.tenants < 1:
            raise ValueError("tenants must be at least 1")
        if not 0 <= self.dedicated <= self.tenants:
            raise ValueError("dedicated must be between 0 and the number of tenants")
        if self.events_per_day < 0 or self.assets < 0 or self.sql_queries_per_tenant_hour < 0:
            raise ValueError("events per day, assets and queries must not be negative")
        if self.retention_days < 1:
            raise ValueError("retention must be at least a day")

    @property
    def pooled(self) -> int:
        return self.tenants - self.dedicated


@dataclass(frozen=True)
class Sizing:
    """Per-unit rates. Measured ones cite docs/benchmarks.md; assumptions say so."""

    # "Issue 10's goals, measured": the job alone, 771 / 777 events/s into Delta at 50 / 200 tenants (MongoDB 966 /
    # 809) on 2 vCPU that Kafka, FerretDB and Trino shared: 771 / 2.
    job_events_per_vcpu_s: float = 385.0
    # The same section: the job as benchmarked, `local[2]` on 2 vCPU; a job never gets less.
    job_min_vcpu: float = 2.0
    # Assumption: events arrive unevenly; the busiest hour carries this multiple of the day's average rate.
    peak_to_average: float = 3.0
    # "One tenant flooding, another tenant's ingest and SQL": one connector worker process accepted 84,000
    # OpenLineage events in a 20 s round (run A) while serving the victim: 4,200 events/s per worker (one core).
    connector_events_per_vcpu_s: float = 4200.0
    # Assumption: the other processes' requests (Helm chart defaults): API 2 x 0.5, lake worker 1, propagation 0.5,
    # outbound 0.5, access 0.25, and at least 2 connector workers of 1 vCPU (two zones).
    processes_fixed_vcpu: float = 3.25
    connector_min_vcpu: float = 2.0
    # "Bytes per asset and per event" (2026-11-29): the pooled state tables (assets, classifications,
    # lineage_edges, incidents, propagated_tags) per asset, and the `events` table per event, in Delta on disk.
    delta_bytes_per_asset: float = 188.0
    delta_bytes_per_event: float = 31.0
    # Assumption: files a MERGE replaced stay until VACUUM (7 days), this fraction on top of the live state.
    delta_replaced_fraction: float = 0.25
    # "Bytes per asset and per event": a tenant's `assets` collection, document plus its indexes (FerretDB on
    # PostgreSQL: 1,490 + 1,310 bytes at 1,000 tables).
    mongo_bytes_per_asset: float = 2800.0
    # Assumption: one guarded upsert (a ~1.5 KB document) is one 4 KB write I/O of DocumentDB's log.
    mongo_io_per_event: float = 1.0
    # Assumption: the instance's memory holds this fraction of the stored documents and indexes (the hot set).
    mongo_memory_fraction: float = 0.25
    # "Trino over HTTPS with JWT against plain HTTP": a tenant's query took 69-111 ms on the 2 vCPU VM; counted as a
    # full vCPU for 0.1 s, and workers kept half busy at the peak.
    trino_vcpu_s_per_query: float = 0.1
    trino_target_utilisation: float = 0.5
    # Assumption: a CloudEvent in Kafka (headers + JSON data) is about 1 KB; topics keep 7 days, 3 replicas.
    kafka_bytes_per_event: float = 1000.0
    kafka_retention_days: float = 7.0
    kafka_replication: int = 3
    # Assumption: a kafka.m5.large broker takes 10 MB/s of producer traffic (before replication).
    kafka_mb_s_per_broker: float = 10.0
    # "Issue 10's goals, measured": a lake batch takes ~7-12 s whatever its size, so a job commits about every 10 s.
    lake_batch_s: float = 10.0
    # Assumption: per lake batch, PUT-class requests (data files, the log's commit, LISTs of _delta_log) and GETs.
    s3_puts_per_batch: float = 30.0
    s3_gets_per_batch: float = 20.0
    # Assumption: a tenant's query lists the log and reads a few files.
    s3_lists_per_query: float = 2.0
    s3_gets_per_query: float = 20.0


DEFAULT_SIZING = Sizing()
