"""The connector worker's section (``METALAKE_CONNECT__*``), read by the worker and by the control plane's connector
code (offsets topic, schedules, source access)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from metalake.settings import KernelSettings


class ConnectSettings(BaseModel):
    """The connector worker (``metalake connect run``): bind address, request limits, crawl and cache timings.

    The worker has no management routes: connectors and write keys are managed through the admin API.
    """

    host: str = "127.0.0.1"
    port: int = 8083
    webhook_max_body_bytes: int = Field(default=1024 * 1024, gt=0)
    ingest_max_body_bytes: int = Field(default=5 * 1024 * 1024, gt=0)
    ingest_max_events: int = Field(default=1000, gt=0)
    # How long a request may wait for Kafka to confirm before the worker answers 503 (the sender then retries).
    publish_timeout_ms: int = Field(default=10_000, gt=0)
    retry_after_s: int = Field(default=30, gt=0)
    # Events one tenant may publish through this worker's HTTP sources (ingest API, OpenLineage), per second on
    # average with bursts up to the burst; past it, 429 with Retry-After and nothing accepted. The worker, Kafka and
    # the streaming job are shared: without it one tenant's bulk posts slow every other tenant's ingest.
    tenant_events_per_s: float = Field(default=1000.0, gt=0)
    tenant_events_burst: int = Field(default=10_000, gt=0)
    # Checked once the credential names the tenant, before the body is read (connectors.runtime.admission): requests
    # of one tenant in the worker's HTTP sources at once, past which 429 (one tenant's slow or large requests would
    # take the threads every tenant shares); and the bytes of body counted as one event when the budget above is
    # charged up front (an estimate: the events a body produced settle the charge, also when it is refused).
    tenant_max_in_flight: int = Field(default=8, gt=0)
    tenant_event_bytes: int = Field(default=1024, gt=0)
    # Parsing and mapping a body of at least parse_offload_min_bytes runs in a pool of parse_workers processes
    # (connectors.runtime.offload; 0: on the worker's threads), a tenant in at most parse_per_tenant of them at once
    # (its others wait their turn): one tenant's large bodies can take no more than its share of the pool, and no
    # time from the interpreter that serves every other tenant's requests.
    parse_workers: int = Field(default=2, ge=0)
    parse_per_tenant: int = Field(default=1, gt=0)
    parse_offload_min_bytes: int = Field(default=16_384, ge=0)
    source_batch_size: int = Field(default=1000, gt=0)
    offsets_load_timeout_s: float = Field(default=30.0, gt=0)
    # The compacted offsets topic: how long a superseded offset record (e.g. one an erase rewrote or tombstoned) may
    # stay. Kafka compacts only closed segments, so the old record is gone within about segment.ms +
    # max.compaction.lag.ms; a tombstone (its key only) stays delete.retention.ms longer. Applied at topic creation
    # and to an existing topic by `metalake stack up` and the offsets store.
    offsets_segment_ms: int = Field(default=3_600_000, ge=60_000)
    offsets_max_compaction_lag_ms: int = Field(default=3_600_000, ge=60_000)
    offsets_delete_retention_ms: int = Field(default=3_600_000, ge=60_000)
    # How long the webhook path may reuse a connector's control-plane record and secrets (0: read them every time).
    lookup_cache_ttl_s: float = Field(default=2.0, ge=0)
    # A crawl holds a lease on its connector, renewed every third of this; a crawler that died frees it after this.
    crawl_lease_s: float = Field(default=60.0, gt=0)
    # How long a handled webhook delivery is remembered, so its redelivery publishes nothing: it must outlive the
    # senders' retries, and a captured delivery replayed later (Monte Carlo signs no timestamp: an old "opened"
    # would reopen a resolved incident). A record is a hash and a few fields, so 400 days, not a week. The records
    # expire by a TTL index, or where the server has none (FerretDB 1.x) the worker deletes expired ones every
    # ``webhook_delivery_prune_interval_s``.
    webhook_delivery_retention_s: float = Field(default=400 * 86_400, gt=0)
    webhook_delivery_prune_interval_s: float = Field(default=3_600, gt=0)
    # After a webhook signing secret's rotation, how long the previous one still verifies (unless the rotation asks
    # for another overlap or the previous one is revoked): long enough to update the sender, not forever.
    webhook_secret_overlap_s: int = Field(default=86_400, ge=0, le=30 * 86_400)
    # Networks (CIDR) a source connector's host may resolve to although the SSRF guard (metalake.net.ssrf) refuses
    # them: empty in production; the local stack and its tests allow loopback, where their PostgreSQL listens.
    ssrf_allow: list[str] = Field(default_factory=list)
    # Whether a source may let a crawl in without asking for a password (trust, peer, ident, certificate-only): off,
    # so a tenant cannot borrow the worker's own network identity; the local stack's PostgreSQL uses trust auth.
    allow_passwordless_sources: bool = False
    # The CA bundle (PEM file) a source connector's verified TLS trusts (PostgreSQL's sslmode verify-full, the
    # default): a private CA or a cloud's (RDS, Cloud SQL). Unset: the system's trusted CAs.
    source_tls_ca_file: str | None = None
    # Folders of the worker's file system a file-reading connector (dbt artifacts) may read, each tenant only inside
    # its own sub-folder <root>/<tenant id>/: empty (the default) refuses every local path.
    artifact_roots: list[str] = Field(default_factory=list)
    # The most one artifact a file-reading connector reads may weigh (a local file or an s3:// object), whatever its
    # configuration asks: the worker holds it whole while a child process parses it (docs/connectors/dbt.md says why
    # 64 MiB: a big project's manifest, tests and macros included).
    artifact_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    # The address space (RLIMIT_AS) of the child process that parses one artifact: a parse that needs more is refused
    # (too-large) instead of growing the worker every tenant's connectors share. About 8x the artifact for dbt's JSON.
    artifact_parse_memory_bytes: int = Field(default=1024 * 1024 * 1024, ge=64 * 1024 * 1024)
    # Dead letters one connector may publish per dead_letter_window_s; more are counted and dropped (with a log line),
    # so a replayed webhook delivery in endless variants cannot flood the DLQ topic.
    dead_letter_cap: int = Field(default=1000, ge=1)
    dead_letter_window_s: float = Field(default=3_600, gt=0)
    # OpenLineage in (POST /api/v1/lineage): a Spark event with its plan facets may run to megabytes; one event may
    # become this many metalake events at most (assets, columns, edges), so one request cannot flood the topics.
    openlineage_max_body_bytes: int = Field(default=5 * 1024 * 1024, gt=0)
    openlineage_max_events: int = Field(default=10_000, gt=0)
    # Scheduled crawls (a source connector's `schedule: {interval_s}`): the shortest interval the API accepts (tests
    # lower it), how often a worker looks for due crawls, how many it runs at once (more due ones wait for the next
    # look, or for another worker), and whether this worker runs them at all.
    schedule_min_interval_s: int = Field(default=300, ge=1)
    schedule_poll_s: float = Field(default=5.0, gt=0)
    schedule_max_concurrent: int = Field(default=2, ge=1)
    scheduler_enabled: bool = True


class ConnectorControlSettings(KernelSettings):
    """What the control plane's connector code reads with the kernel's (the offsets topic): ``connect``."""

    connect: ConnectSettings = ConnectSettings()
