"""Typed settings for every metalake process, read from the environment (prefix ``METALAKE_``, nesting ``__``).

A process reads the environment and, if ``METALAKE_ENV_FILE`` names one, that file (real variables win); it discovers
nothing on disk. The operator tooling (``ops``) points itself and the processes it starts at a checkout's local stack
by setting ``METALAKE_STACK__DIR``, ``METALAKE_ENV_FILE`` (``.stack/stack.env``, where the stack writes the
addresses it started) and the stack's paths (``ops.stack.paths``). Elsewhere every path must be set explicitly;
addresses default to loopback (development only: production sets each one).
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, Field, PlainValidator, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from metalake.lake_uri import LakeRoot, S3Path, parse_lake_root
from metalake.secret_files import SecretFilesSource


class StackPorts(BaseModel):
    """Loopback ports of the local stack; every one can be moved if something else holds it."""

    kafka: int = 9092
    kafka_controller: int = 9093
    # The broker's second listener, SASL_SSL (SCRAM-SHA-512, the stack's CA): the PLAINTEXT one stays the default.
    kafka_sasl_ssl: int = 9094
    ferretdb: int = 27017
    trino: int = 8080
    postgres: int = 55432
    # A Spark standalone cluster, started only on request (``metalake stack up spark-worker``).
    spark_master: int = 7077
    spark_master_ui: int = 8090
    spark_worker: int = 7078
    spark_worker_ui: int = 8091
    # Prometheus (ops/stack/services/prometheus.py), and the health servers (/readyz, /metrics) the stack gives the
    # processes it runs (``health.ports.<process>`` wins when set).
    prometheus: int = 9090
    enrichment_health: int = 9101
    propagation_health: int = 9102
    outbound_health: int = 9103
    access_health: int = 9104
    lake_worker_health: int = 9105
    # Jaeger (ops/stack/services/jaeger.py): OTLP/HTTP in, the query API and UI, and the query service's gRPC port.
    jaeger_otlp: int = 4318
    jaeger_query: int = 16686
    jaeger_query_grpc: int = 16685


class SeaweedFSPorts(BaseModel):
    """Loopback ports of the local stack's SeaweedFS (started for a lake on S3): its S3 API and the master, volume
    and filer servers behind it, each with a gRPC port ``grpc_offset`` above its HTTP port (SeaweedFS's rule)."""

    s3: int = 8333
    master: int = 9333
    volume: int = 8381
    filer: int = 8888
    grpc_offset: int = 10000


class StackSettings(BaseModel):
    """The local stack (operator tooling). ``dir`` is set by ``ops`` for a checkout's stack and read only by the
    tooling: no deployable path defaults into it (``ops.stack.paths`` sets the lake, checkpoint, Spark and rules-file
    paths for the processes it starts). Addresses left unset are derived from ``host`` and ``ports`` (loopback)."""

    dir: Path | None = None
    ports: StackPorts = StackPorts()
    seaweedfs: SeaweedFSPorts = SeaweedFSPorts()
    host: str = "127.0.0.1"
    start_timeout_s: float = 180.0
    stop_timeout_s: float = 30.0
    # What the local Spark worker offers its executors.
    spark_worker_cores: int = Field(default=2, ge=1)
    spark_worker_memory: str = "2g"
    # Traces of the processes the stack runs, exported to the stack's Jaeger (stack.env sets the exporter and its
    # endpoint; docs/operations.md#traces). False: no exporter is set and Jaeger is not started by default.
    tracing: bool = True


KafkaSecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
KafkaSaslMechanism = Literal["SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "PLAIN"]


class KafkaPrincipalSettings(BaseModel):
    """The Kafka principal each process kind authenticates as (SCRAM: its ``kafka.sasl_username``; OAUTHBEARER: its
    ``kafka.oauth_client_id``, the token's ``sub``), named without the ``User:`` type. ``metalake kafka acls`` grants
    each what its process reads and writes (``ops/cli/kafka_acls.py``); every instance of a kind shares it."""

    api: str = "metalake-api"
    connect: str = "metalake-connect"
    stream: str = "metalake-stream"
    propagation: str = "metalake-propagation"
    outbound: str = "metalake-outbound"
    access: str = "metalake-access"
    lake: str = "metalake-lake"

    @field_validator("*")
    @classmethod
    def _a_name(cls, value: str) -> str:
        name = value.removeprefix("User:")
        # '*' would be Kafka's wildcard principal (everyone); blanks and ',' cannot be one principal's name.
        if not name or name == "*" or any(c.isspace() or c == "," for c in name):
            raise ValueError("a Kafka principal name: not empty, not '*', no blank or ','")
        return name


class KafkaSettings(BaseModel):
    """Every Kafka client's settings (librdkafka and the streaming job's Java client: ``metalake.kafka.config``
    maps them). PLAINTEXT by default (the local stack's tests); production sets SASL_SSL with SCRAM or OAUTHBEARER
    (OIDC client credentials) and the CA that signed the brokers' certificates. Topics the platform creates get
    ``topic_replication_factor`` replicas and ``min.insync.replicas`` = ``topic_min_insync_replicas`` (1/1: one local
    broker; a production cluster: 3/2, so a write acknowledged by ``acks=all`` survives the loss of a broker)."""

    bootstrap_servers: str | None = None
    client_id: str = "metalake"
    delivery_timeout_ms: int = 30_000
    topic_partitions: int = 3
    topic_replication_factor: int = Field(default=1, ge=1)
    topic_min_insync_replicas: int = Field(default=1, ge=1)
    security_protocol: KafkaSecurityProtocol = "PLAINTEXT"
    sasl_mechanism: KafkaSaslMechanism = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    # PEM file of the CA(s) that signed the brokers' certificates (unset: the system's trust store).
    ssl_ca_location: Path | None = None
    # Client certificate (mutual TLS), PEM. The streaming job's Java client reads one file holding the key followed by
    # its certificate chain: point both settings at such a bundle when the job needs a client certificate.
    ssl_certificate_location: Path | None = None
    ssl_key_location: Path | None = None
    ssl_key_password: SecretStr | None = None
    # OAUTHBEARER: tokens from an OIDC provider's token endpoint (client credentials grant).
    oauth_token_endpoint_url: str | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: SecretStr | None = None
    oauth_scope: str | None = None
    # The principal of each process kind, for the ACLs `metalake kafka acls` derives and applies.
    principals: KafkaPrincipalSettings = Field(default_factory=KafkaPrincipalSettings)

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSettings:
        if self.topic_min_insync_replicas > self.topic_replication_factor:
            raise ValueError(
                "kafka.topic_min_insync_replicas exceeds kafka.topic_replication_factor: no acks=all write could "
                "ever succeed"
            )
        if not self.security_protocol.startswith("SASL_"):
            return self
        if self.sasl_mechanism == "OAUTHBEARER":
            wanted = {
                "oauth_token_endpoint_url": self.oauth_token_endpoint_url,
                "oauth_client_id": self.oauth_client_id,
                "oauth_client_secret": self.oauth_client_secret,
            }
        else:
            wanted = {"sasl_username": self.sasl_username, "sasl_password": self.sasl_password}
        missing = [f"kafka.{name}" for name, value in wanted.items() if not value]
        if missing:
            raise ValueError(
                f"kafka.security_protocol={self.security_protocol} with kafka.sasl_mechanism={self.sasl_mechanism} "
                f"needs {', '.join(missing)}"
            )
        return self


class MongoSettings(BaseModel):
    uri: str | None = None
    server_selection_timeout_ms: int = 10_000
    # How long a write that must not be skipped (the job's projection) waits for MongoDB to come back before it fails
    # (metalake.mongo.while_unreachable): a restart of FerretDB or a failover must not fail the job's batches.
    outage_wait_s: float = 300.0


class TrinoResourceGroupSettings(BaseModel):
    """Trino's resource groups for tenants' queries (the local stack renders them: ops/stack/resource_groups.py): each
    tenant (all its users together) runs at most ``tenant_max_running`` queries and queues ``tenant_max_queued`` more
    (then Trino refuses: QUERY_QUEUE_FULL); all tenants together ``tenants_*``. ``query_max_execution_s`` is Trino's
    ``query.max-execution-time``: no tenant query runs longer (tenants' users may not raise it; the service users
    may, per session)."""

    tenant_max_running: int = Field(default=2, gt=0)
    tenant_max_queued: int = Field(default=10, ge=0)
    tenant_memory_percent: int = Field(default=25, gt=0, le=100)
    tenants_max_running: int = Field(default=12, gt=0)
    tenants_max_queued: int = Field(default=200, ge=0)
    tenants_memory_percent: int = Field(default=70, gt=0, le=100)
    query_max_execution_s: int = Field(default=600, gt=0)


class TrinoJwtSettings(BaseModel):
    """Trino's JWT authenticator (people and tenants' tools; docs/serving.md). Unset values follow ``api.``: the
    JWKS of the API's issuer (``<api issuer>/.well-known/jwks.json``, or the external issuer's ``jwks_url``), its
    issuer and its audience. ``user_claim`` names the claim that holds the Trino user: metalake's own tokens of a
    tenant client carry ``trino_user`` (``tenant.<id>``, or ``tenant.<id>.pii`` with the ``pii:read`` scope); an
    external issuer's claims are not metalake's to keep consistent: with ``user_from`` ``auto`` (the default) Trino
    then takes the user from the issuer's tenant claim (``api.tenant_claim``), as ``tenant.<id>``, so a token's Trino
    user can never name another tenant than its tenant claim (no ``.pii`` or ``.admin`` user through such tokens);
    ``user_claim`` trusts the issuer to put the same tenant in both (``user_mapping_pattern`` optionally takes the user
    out of the claim, a regex with one group)."""

    enabled: bool = True
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    user_claim: str = Field(default="trino_user", min_length=1)
    user_mapping_pattern: str | None = None
    user_from: Literal["auto", "user_claim", "tenant_claim"] = "auto"


class TrinoSettings(BaseModel):
    """The Trino coordinator and how metalake's processes connect to it (docs/serving.md, docs/configuration.md).

    ``https`` on: clients speak TLS, verify the server against ``ca_file`` (unset: the system's trust store) and
    authenticate: the platform's service users (``user`` and ``access.service_users``) with the password
    ``passwords[<user>]`` (Trino's password file); tenants' queries run as the platform user impersonating the
    tenant's Trino user. ``https`` off is the plain, unauthenticated protocol (a benchmark's reference only).
    ``shared_secret`` is Trino's ``internal-communication.shared-secret`` (read by the stack that renders Trino's
    configuration, never by a client)."""

    host: str | None = None
    port: int | None = None
    user: str = "metalake"
    catalog: str = "lake"
    https: bool = True
    ca_file: Path | None = None
    passwords: dict[str, SecretStr] = Field(default_factory=dict)
    shared_secret: SecretStr | None = None
    jwt: TrinoJwtSettings = Field(default_factory=TrinoJwtSettings)
    resource_groups: TrinoResourceGroupSettings = Field(default_factory=TrinoResourceGroupSettings)

    @property
    def http_scheme(self) -> str:
        return "https" if self.https else "http"

    @property
    def base_url(self) -> str:
        return f"{self.http_scheme}://{self.host}:{self.port}"


class LakeS3Settings(BaseModel):
    """The object store of a lake whose root is ``s3a://bucket/prefix`` (Spark's s3a, Trino's native S3 file system
    and delta-rs all use these). ``endpoint`` is the S3 API's base URL (unset: AWS's own, by ``region``); an
    S3-compatible server (SeaweedFS, Ceph) usually needs ``path_style``. The keys are an access key pair with read
    and write rights on the bucket; unset, each engine falls back to its default AWS credential chain."""

    endpoint: str | None = None
    region: str = "us-east-1"
    path_style: bool = True
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    # Connections Spark's s3a keeps to the store (its default, 500, is sized for clusters, not one driver).
    max_connections: int = Field(default=64, gt=0)
    # Spark's s3a jars (hadoop-aws and the AWS SDK bundle; deploy/local/fetch/spark-s3.sh), added to a session only
    # when the lake is on S3.
    spark_jars_dir: Path | None = None
    # How long metalake's own S3 requests (listing and deleting a tenant's objects, the bucket probes of the lake
    # commands) wait for an answer; a DeleteObjects of 1000 keys can take seconds on a loaded store.
    request_timeout_s: float = Field(default=30.0, gt=0)


class LakeWriterLeaseSettings(BaseModel):
    """The single-writer rule of a lake on S3 (``processors.enrichment.single_writer``): a Spark writer of a Delta
    table there holds the table's lease while it commits. ``ttl_s``: how long a dead holder blocks the others (keep
    it well above JVM pauses and clock skew); ``wait_s``: how long a writer waits for a held lease before it fails
    (the streaming job behind a long maintain, a command behind the job's batch); ``poll_s``: how often it asks."""

    ttl_s: float = Field(default=60.0, gt=0)
    wait_s: float = Field(default=1800.0, ge=0)
    poll_s: float = Field(default=0.5, gt=0)


class LakeSettings(BaseModel):
    """``root``: a local folder or ``s3a://bucket/prefix`` (``metalake.lake_uri``; the ``s3`` section then says how to
    reach it). ``checkpoint_root`` stays a local folder whatever the root: the streaming job's checkpoint needs an
    atomic rename, which S3 does not have (docs/configuration.md)."""

    root: Annotated[LakeRoot | None, PlainValidator(parse_lake_root)] = None
    checkpoint_root: Path | None = None
    s3: LakeS3Settings = Field(default_factory=LakeS3Settings)
    writer_lease: LakeWriterLeaseSettings = Field(default_factory=LakeWriterLeaseSettings)


class SparkSettings(BaseModel):
    """The streaming job. The lake query (both event topics into Delta) runs every ``trigger_interval`` at most;
    the projection queries (one per topic class into MongoDB) every ``projection_trigger_interval``, so a catalog
    change reaches MongoDB without waiting for the lake's commits."""

    master: str = "local[2]"
    trigger_interval: str = "1 second"
    max_offsets_per_trigger: int = 50_000
    projection_trigger_interval: str = "100 milliseconds"
    projection_max_offsets_per_trigger: int = 5_000
    # Tenants of a projection batch written to MongoDB at once (a thread each; one tenant's writes stay in order).
    projection_workers: int = Field(default=4, ge=1)
    # Delta's spark.databricks.delta.merge.materializeSource for the lake query's MERGEs (auto: Delta's default).
    merge_materialize_source: Literal["auto", "none", "all"] = "auto"
    shuffle_partitions: int = 2
    driver_memory: str = "2g"
    # The address the driver binds and advertises (local masters: loopback; a cluster needs one its executors reach).
    driver_host: str = "127.0.0.1"
    # Where the driver listens when it is not ``driver_host`` (a container: 0.0.0.0, advertising the pod's address).
    driver_bind_address: str | None = None
    # Fixed driver ports for a cluster behind a firewall (unset: Spark picks free ones).
    driver_port: int | None = None
    block_manager_port: int | None = None
    # Executors on a cluster (unset: Spark's defaults; a local master runs them in the driver).
    executor_memory: str | None = None
    executor_cores: int | None = None
    cores_max: int | None = None
    # The Python the executors run (spark.pyspark.python): it must hold metalake's dependencies (`metalake[spark]`).
    # Unset: this process's interpreter, right for local masters and for workers that share its environment.
    executor_python: str | None = None
    # Ship metalake's own packages to the executors as a zip (spark.submit.pyFiles, as spark-submit --py-files does),
    # so workers run the driver's code version. Unset: on for any master but ``local``.
    ship_code: bool | None = None
    # The shared secret of a cluster that authenticates its RPC (standalone ``spark.authenticate``): passed in a
    # properties file only the job's user can read, never on a command line.
    auth_secret: SecretStr | None = None
    # Any other Spark configuration (spark.kubernetes.*, spark.eventLog.*...); keys must start with ``spark.``.
    conf: dict[str, str] = Field(default_factory=dict)
    # Extra JVM options of the driver (GC, JIT, diagnostics), appended to the ones metalake sets there itself
    # (spark.driver.extraJavaOptions in ``conf`` would be replaced by those).
    driver_java_options: str = ""
    jars_dir: Path | None = None
    # Spark's local dir, warehouse and Derby home (default: the stack's data/spark, else the system temp folder).
    scratch_dir: Path | None = None
    query_name: str = "metalake-pooled"

    @field_validator("conf")
    @classmethod
    def _spark_keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = sorted(k for k in value if not k.startswith("spark."))
        if bad:
            raise ValueError(f"keys must start with 'spark.': {', '.join(bad)}")
        if "spark.authenticate.secret" in value:
            raise ValueError("set the secret as spark.auth_secret (kept off command lines), not in spark.conf")
        return value

    @property
    def is_local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")


class EnrichmentSettings(BaseModel):
    """Automatic PII classification of columns (processors.enrichment.classify): on/off, and each tenant's own
    words for personal data, e.g. ``METALAKE_ENRICHMENT__PII_TERMS='{"acme": ["kundennr", "iban"]}'``."""

    auto_classify: bool = True
    pii_terms: dict[str, list[str]] = Field(default_factory=dict)


class TelemetrySettings(BaseModel):
    service_name: str = "metalake"
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"
    traces_exporter: Literal["none", "console", "otlp"] = "none"
    metrics_exporter: Literal["none", "console", "otlp"] = "none"
    otlp_endpoint: str | None = None
    # The bearer token of every process's ``GET /metrics`` (Prometheus' text format, metalake.telemetry.exposition);
    # unset: the route answers 404, so metrics are off unless an operator chose a token for the scraper.
    metrics_token: SecretStr | None = None


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


class OutboundSettings(BaseModel):
    """The outbound runtime (``metalake outbound run``): the destinations (Slack, Jira, Teams, Freshdesk, webhooks) fed
    by ``metalake.changes``.

    Short retries happen in the process (exponential backoff, Retry-After honoured up to ``retry_after_max_s``);
    what still fails goes to the retry topic with a due time, and after ``retry_topic_max_attempts`` to the DLQ.
    ``ssrf_allow`` lists networks (CIDR) a destination may resolve to although the SSRF guard refuses them (tests
    allow ``127.0.0.0/8``). ``allow_base_url_override`` lets a subscription point Slack/Jira at another base URL.
    ``ledger_retention_s`` bounds the delivery ledger (docs/outbound.md, "Ledger retention").
    """

    group_id: str = "metalake-outbound"
    retry_group_id: str = "metalake-outbound-retry"
    # How soon Kafka hands a dead runtime's partitions to its successor (librdkafka's session.timeout.ms).
    session_timeout_ms: int = Field(default=45_000, ge=6_000)
    batch_size: int = Field(default=100, gt=0)
    poll_timeout_s: float = Field(default=0.5, gt=0)
    # Records of a batch with different keys (assets) are delivered in parallel; one key's stay in order.
    workers: int = Field(default=8, ge=1)
    subscriptions_ttl_s: float = Field(default=10.0, ge=0)
    short_attempts: int = Field(default=3, ge=1)
    backoff_initial_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=5.0, ge=0)
    retry_after_max_s: float = Field(default=10.0, ge=0)
    retry_initial_s: float = Field(default=5.0, ge=0)
    retry_max_s: float = Field(default=300.0, ge=0)
    retry_topic_max_attempts: int = Field(default=12, ge=1)
    http_timeout_s: float = Field(default=10.0, gt=0)
    # Wall-clock bound of one delivery (all its requests and short retries): a receiver trickling its answer is cut
    # here and the change goes to the retry topic, so the batch (other tenants' changes) is not held (docs/outbound.md).
    delivery_deadline_s: float = Field(default=30.0, gt=0)
    slack_base_url: str = "https://slack.com/api/"
    allow_base_url_override: bool = False
    ssrf_allow: list[str] = Field(default_factory=list)
    # How long a delivery-ledger step outlives its last write (and an anchor the delivered removal of its tag): it
    # must cover every redelivery of a change (the retry topic's window, a consumer group replaying after a restart).
    ledger_retention_s: float = Field(default=7 * 86_400, gt=0)
    # Where the server has no TTL indexes (FerretDB 1.x), the runtime deletes expired ledger documents this often.
    ledger_prune_interval_s: float = Field(default=3_600, gt=0)
    # A subscription's test send not picked up within this (the runtime was down) is reported failed, not sent late.
    test_expiry_s: float = Field(default=300.0, gt=0)
    # How far the downstream impact of a Monte Carlo incident is walked for messages and webhook bodies (lineage
    # levels, and assets listed at most): one projection query per level, per incident delivered.
    impact_max_depth: int = Field(default=5, ge=0, le=50)
    impact_max_assets: int = Field(default=100, ge=0, le=10_000)

    @model_validator(mode="after")
    def _retention_covers_retries(self) -> OutboundSettings:
        window = self.retry_max_s * self.retry_topic_max_attempts
        if self.ledger_retention_s < window:
            raise ValueError(
                f"ledger_retention_s ({self.ledger_retention_s:g}) is shorter than the retry topic's window "
                f"(retry_max_s x retry_topic_max_attempts = {window:g} s): a retried change could post twice"
            )
        return self


class IssuerProfile(BaseModel):
    """What an external issuer's access tokens look like, where they differ from RFC 9068 (``api.issuer_profiles``).

    The defaults are RFC 9068's: ``typ`` is ``at+jwt`` (or ``application/at+jwt``) and the scopes are the
    space-separated string ``scope``. Okta and Keycloak send ``typ: JWT`` (or none) and a ``scp`` array: say so for
    that issuer alone.
    """

    # Accepted header ``typ`` values (compared without case); ``allow_missing_typ`` accepts a header without one.
    token_types: list[str] = Field(default_factory=lambda: ["at+jwt", "application/at+jwt"], min_length=1)
    allow_missing_typ: bool = False
    # The claim holding the scopes and its shape: a space-separated string, a JSON array of strings, or either.
    scope_claim: str = Field(default="scope", min_length=1)
    scope_format: Literal["string", "list", "string_or_list"] = "string"


class TenantQuotas(BaseModel):
    """How many live objects of each kind one tenant may hold (``api/quotas.py``; 409 ``quota-exceeded`` beyond):
    active API clients, write keys not revoked, connectors, subscriptions, share links not yet pruned. The query
    engines' cap is ``enforcement.max_engines_per_tenant``."""

    clients: int = Field(default=50, gt=0)
    write_keys: int = Field(default=50, gt=0)
    connectors: int = Field(default=100, gt=0)
    subscriptions: int = Field(default=100, gt=0)
    share_links: int = Field(default=1000, gt=0)


class ApiSettings(BaseModel):
    """The admin API (``metalake api``): its OAuth 2 authorization server, token validation and rate limits.

    ``issuer`` defaults to ``http://<host>:<port>``. ``key_encryption_key`` seals the private signing keys stored in
    the control plane; without it the API validates tokens but cannot issue any. ``external_issuer`` makes an external
    OIDC provider the only trusted issuer (its JWKS comes from its discovery document). See docs/api.md.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8000, gt=0, lt=65536)
    issuer: str | None = None
    audience: str = "metalake-api"
    token_lifetime_s: int = Field(default=900, gt=0, le=86_400)
    # How long POST .../subscriptions/{name}/test waits for the outbound runtime's outcome before answering 202.
    subscription_test_wait_s: float = Field(default=5.0, ge=0, le=30)
    signing_alg: Literal["RS256", "ES256"] = "RS256"
    key_encryption_key: SecretStr | None = None
    external_issuer: str | None = None
    # Per external issuer (its exact ``iss``): the token shape it sends, if not RFC 9068's. Never for the built-in one.
    issuer_profiles: dict[str, IssuerProfile] = Field(default_factory=dict)
    tenant_claim: str = "tenant"
    leeway_s: int = Field(default=30, ge=0, le=300)
    jwks_min_refresh_s: float = Field(default=1.0, ge=0)
    jwks_max_age_s: float = Field(default=300.0, gt=0)
    client_cache_ttl_s: float = Field(default=10.0, ge=0)
    secret_overlap_s: int = Field(default=86_400, ge=0, le=30 * 86_400)
    rate_limit_per_s: float = Field(default=20.0, gt=0)
    rate_limit_burst: int = Field(default=100, gt=0)
    # Every request of one tenant's clients together, besides each client's own bucket: creating clients does not
    # multiply what a tenant may take from a process.
    tenant_rate_limit_per_s: float = Field(default=50.0, gt=0)
    tenant_rate_limit_burst: int = Field(default=200, gt=0)
    quotas: TenantQuotas = Field(default_factory=TenantQuotas)
    # Audit rows are committed per table in one Delta commit every audit_flush_s (0: each row before its response),
    # or at once when audit_batch_rows wait; past audit_buffer_max waiting, requests commit their own row.
    audit_flush_s: float = Field(default=0.5, ge=0, le=60)
    audit_batch_rows: int = Field(default=500, gt=0)
    audit_buffer_max: int = Field(default=10_000, gt=0)
    # POST /oauth/token per peer address, before any secret check: bounds a flood of made-up client ids from one host.
    token_peer_rate_per_s: float = Field(default=10.0, gt=0)
    token_peer_burst: int = Field(default=50, gt=0)
    # POST /oauth/token failures (unknown client, wrong secret) per (claimed client id, peer address): a client is never
    # locked out by wrong secrets sent for its id from another address.
    token_failure_rate_per_s: float = Field(default=1.0, gt=0)
    token_failure_burst: int = Field(default=10, gt=0)
    # Heavy work (dead-letter listings, audit reads, Snowflake scripts, connector offsets, propagation dry runs) runs on
    # a pool per kind, never on the pool every route shares: this many threads each, at most work_per_tenant requests
    # of one tenant at once (429 beyond, 503 when the kind's pool is full; api/workpool.py).
    work_workers: int = Field(default=4, gt=0, le=100)
    work_per_tenant: int = Field(default=2, gt=0)
    # Token checks run on their own threads; this many more wait for one, beyond that 503 at once.
    token_check_workers: int = Field(default=8, gt=0, le=200)
    token_check_queue: int = Field(default=256, ge=0)
    # POST /oauth/token's secret checks (scrypt, 16 MiB and ~60 ms each) run on this many threads of their own; this
    # many more wait for one, beyond that 503 at once: a token flood from many addresses holds neither the pool
    # every route shares nor more than workers x 16 MiB.
    token_secret_workers: int = Field(default=4, gt=0, le=64)
    token_secret_queue: int = Field(default=64, ge=0)
    # Every request body, read or not by its route, stops here (413); routes may take less (the token form: 8 KiB).
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)
    # Background work (tenant (de)provisioning, erasures) runs under a lease per item, resumed at startup and every
    # resume_interval_s when its runner died (lease expired) or never started (older than resume_grace_s).
    lease_ttl_s: float = Field(default=60.0, gt=0)
    lease_wait_s: float = Field(default=300.0, ge=0)
    resume: bool = True
    resume_interval_s: float = Field(default=60.0, gt=0)
    resume_grace_s: float = Field(default=120.0, ge=0)
    # Which registered launcher (the ``metalake.launchers`` entry points) runs dedicated tenants' streaming queries.
    job_launcher: str = "local"
    # A person's edits of an asset (PATCH /v1/tenants/{tenant}/assets, docs/edits.md): the longest description, the
    # most owners, the longest owner, the most edited properties one asset holds and the longest property value.
    # The event schemas' own bounds (65536, 100, 320, 8192) are the ceilings.
    edit_description_max: int = Field(default=16_384, gt=0, le=65_536)
    edit_owners_max: int = Field(default=50, gt=0, le=100)
    edit_owner_max: int = Field(default=320, gt=0, le=320)
    edit_properties_max: int = Field(default=50, gt=0, le=200)
    edit_property_value_max: int = Field(default=2048, gt=0, le=8192)

    @property
    def issuer_url(self) -> str:
        return self.issuer or f"http://{self.host}:{self.port}"

    @field_validator("issuer_profiles")
    @classmethod
    def _profiles_for_the_external_issuer_only(
        cls, profiles: dict[str, IssuerProfile], info: ValidationInfo
    ) -> dict[str, IssuerProfile]:
        # Our own tokens are RFC 9068's: a profile must not loosen the checks of the issuer this API runs itself.
        # A field validator, so an error quotes only this field (never the key encryption key beside it).
        strays = sorted(set(profiles) - {info.data.get("external_issuer")})
        if strays:
            raise ValueError(f"issuer_profiles names issuers that are not the external issuer: {', '.join(strays)}")
        return profiles


class SecretsSettings(BaseModel):
    """Tenants' third-party secrets at rest (``metalake.sealing``; docs/configuration.md): connector passwords,
    webhook signing secrets, Slack and Jira tokens, webhook HMAC keys, sealed with AES-256-GCM under a key derived
    from ``key_encryption_key`` (default: ``api.key_encryption_key``, from which a separate key is derived). Every
    process that stores or uses them reads it (API, connector worker, outbound runtime). To rotate: set the new key,
    move the old one to ``previous_key_encryption_keys`` (still opened), run ``metalake secrets reseal``, then drop
    it. ``schema_key`` keys tenants' Trino schema names (``tenants.trino_schemas``; default: the current key-encryption
    key, from which a separate key is derived): set it to keep the names when that key rotates."""

    key_encryption_key: SecretStr | None = None
    previous_key_encryption_keys: list[SecretStr] = Field(default_factory=list)
    schema_key: SecretStr | None = None


class ErasureSettings(BaseModel):
    """GDPR erasures: the bounded queue the admin API fills and the lake worker (``metalake lake worker``) drains.

    The API refuses a request (429) once ``queue_max`` erasures of all tenants, or ``per_tenant_max`` of one tenant,
    are unfinished, asking the client to retry after ``retry_after_s``. A worker runs at most ``concurrency`` erases
    at a time (each a Spark driver of ``spark.driver_memory``), stops one that runs longer than ``timeout_s`` (it
    fails), and holds a lease of ``lease_ttl_s`` on each: a crashed worker's erasures are claimed again once it
    expires. It looks for queued erasures every ``poll_s``.
    """

    queue_max: int = Field(default=50, gt=0)
    per_tenant_max: int = Field(default=3, gt=0)
    retry_after_s: int = Field(default=60, gt=0)
    concurrency: int = Field(default=1, gt=0, le=16)
    timeout_s: float = Field(default=3600.0, gt=0)
    lease_ttl_s: float = Field(default=60.0, gt=0)
    poll_s: float = Field(default=2.0, gt=0)


class AccessSettings(BaseModel):
    """Trino access rules generated from the control plane (``metalake access run|sync``; docs/serving.md).

    ``rules_file`` is the file Trino's file-based access control reloads (required by the access processor; the local
    stack sets its Trino's).
    ``service_users`` keep full access besides ``trino.user``. ``pii_tags`` are fnmatch patterns of the tags whose
    columns are masked for a tenant's users without the PII role. A column of a table in the tenant's Trino schema
    has the URN ``urn:metalake:trino:<trino_instance>/<catalog>/<schema>/<table>/<column>``.
    ``protective_tags`` are fnmatch patterns of tags that filter rows in customers' engines (consent columns,
    docs/enforcement.md): taking one off or stopping it spreading needs the PII grant, as for ``pii_tags``; each
    registered engine's ``consent_tag`` counts too (control/auth/protective.py).
    """

    rules_file: Path | None = None
    service_users: list[str] = Field(default_factory=lambda: ["metalake-tests", "bench"])
    pii_tags: list[str] = Field(default_factory=lambda: ["PII", "PII.*", "GDPR", "GDPR.*"])
    protective_tags: list[str] = Field(default_factory=lambda: ["consent"])
    mask_style: Literal["null", "redact", "hash"] = "redact"
    trino_instance: str = "metalake"
    group_id: str = "metalake-access"
    resync_interval_s: float = Field(default=300.0, gt=0)


class SqlSettings(BaseModel):
    """The SQL endpoint and share links of the admin API: every query stops at ``max_rows`` rows or ``timeout_s``."""

    max_rows: int = Field(default=10_000, gt=0)
    timeout_s: float = Field(default=30.0, gt=0)
    share_default_ttl_s: int = Field(default=86_400, gt=0)
    share_max_ttl_s: int = Field(default=30 * 86_400, gt=0)
    # Trino calls (SQL and share links) run on their own pool of this many threads, not on the pool every route
    # shares; a tenant holds at most max_concurrent_per_tenant of them (over it: 429 at once, never queued).
    workers: int = Field(default=16, gt=0, le=1000)
    max_concurrent_per_tenant: int = Field(default=4, gt=0)
    # Share link reads (public: no token): per link, and per peer address across links (token buckets, per process).
    share_rate_per_s: float = Field(default=1.0, gt=0)
    share_burst: int = Field(default=10, gt=0)
    share_peer_rate_per_s: float = Field(default=5.0, gt=0)
    share_peer_burst: int = Field(default=30, gt=0)


class PropagationSettings(BaseModel):
    """Tag propagation along lineage (``metalake propagation run``; docs/propagation.md): its consumer group on
    ``metalake.changes`` and the guardrails of every closure (hops, edges followed per asset, assets reached, time)."""

    group_id: str = "metalake-propagation"
    batch_size: int = Field(default=500, gt=0)
    poll_timeout_s: float = Field(default=1.0, gt=0)
    max_depth: int = Field(default=10, ge=1, le=1000)
    max_fanout: int = Field(default=1000, ge=1)
    max_reached: int = Field(default=100_000, ge=1)
    time_budget_s: float = Field(default=5.0, gt=0)
    # A dry-run loads the lineage within its reach, never the whole tenant; past this many edges it is refused (422)
    # rather than held in the API's memory.
    dry_run_max_edges: int = Field(default=50_000, ge=1)


class FaultSettings(BaseModel):
    """Fault points for the tests that kill processes mid-flight (``METALAKE_FAULTS__*``); all off by default.

    ``kill_after_delta``/``kill_after_mongo`` name a batch id at which the streaming job SIGKILLs itself after that
    lake batch's Delta commits (before its offsets) or that projection batch's MongoDB writes (before its changes are
    published); ``lake_only`` keeps the projection queries from starting, so MongoDB stays behind the lake.
    ``pause_after_publish`` names a file the propagation processor writes after its first batch that published, then
    waits, before committing, to be killed.
    """

    kill_after_delta: int | None = None
    kill_after_mongo: int | None = None
    lake_only: bool = False
    pause_after_publish: Path | None = None


class HealthPorts(BaseModel):
    """The port of each long-running process's health server (``metalake.http.health``); 0 or unset: none. Two
    processes on one host need two ports: set each instance's own variable."""

    enrichment: int | None = Field(default=None, ge=0, lt=65536)
    propagation: int | None = Field(default=None, ge=0, lt=65536)
    outbound: int | None = Field(default=None, ge=0, lt=65536)
    access: int | None = Field(default=None, ge=0, lt=65536)
    lake_worker: int | None = Field(default=None, ge=0, lt=65536)


class HealthSettings(BaseModel):
    """The processors' health servers: ``/healthz`` (the loop polled within ``stall_after_s``) and ``/readyz`` (each
    dependency answers within ``check_timeout_s``). ``host`` is the address they bind: loopback by default; a
    cluster's probes reach the pod's address (``0.0.0.0``). They say nothing secret: states and exception classes."""

    host: str = "127.0.0.1"
    ports: HealthPorts = Field(default_factory=HealthPorts)
    check_timeout_s: float = Field(default=2.0, gt=0, le=30)
    # Longer than the slowest batch a processor handles between two polls (an access resync, a large closure).
    stall_after_s: float = Field(default=300.0, gt=0)


def _env_files() -> tuple[Path, ...]:
    explicit = os.environ.get("METALAKE_ENV_FILE")
    return (Path(explicit),) if explicit else ()


class DeadLetterSettings(BaseModel):
    """Listing, inspecting and replaying dead letters through the admin API (``control.deadletters``).

    A listing reads the shared DLQ topics from their newest records back: at most ``scan_max_records`` per topic and
    request (older letters are left out, and the answer says so), so one tenant's listing costs a bounded read
    whatever the topics hold. A letter's payload is shown up to ``payload_max_bytes`` (bigger: its size and hash
    only). A replay that started and did not finish within ``replay_claim_s`` (the API died) may be claimed again.
    """

    scan_max_records: int = Field(default=20_000, gt=0, le=1_000_000)
    payload_max_bytes: int = Field(default=16_384, gt=0, le=1_048_576)
    replay_claim_s: float = Field(default=120.0, gt=0)
    # How long a read of the DLQ topics may take before the listing answers 503 (Kafka slow or down).
    read_timeout_s: float = Field(default=10.0, gt=0)


class EnforcementSettings(BaseModel):
    """PII enforced in customers' own query engines (docs/enforcement.md): the OPA decision endpoint of the admin API.

    A decision reads the tenant's tags of the table asked about at most once per ``cache_ttl_s`` (Trino asks several
    times per query), so a tag change is enforced within that delay; checked engine keys are kept as long (a deleted
    engine is refused within it). ``max_cached_tables`` bounds the cache; ``max_engines_per_tenant`` the
    registrations; ``max_catalogs`` the catalogs and ``max_principals`` the PII users and groups (and impersonators,
    operators) of one engine. A decision request names at most ``max_batch_resources`` resources and (column masks)
    ``max_tables_per_request`` tables. A key the API has not recently found valid costs its peer address one token
    of ``peer_rate_per_s``/``peer_burst`` before it is checked (429 beyond): a real engine's cached key is free.
    """

    cache_ttl_s: float = Field(default=1.0, ge=0, le=300)
    max_cached_tables: int = Field(default=10_000, gt=0)
    max_engines_per_tenant: int = Field(default=20, gt=0)
    max_catalogs: int = Field(default=50, gt=0)
    max_principals: int = Field(default=500, gt=0)
    max_batch_resources: int = Field(default=10_000, gt=0)
    max_tables_per_request: int = Field(default=8, gt=0)
    peer_rate_per_s: float = Field(default=20.0, gt=0)
    peer_burst: int = Field(default=100, gt=0)


class SnowflakeMaskingSettings(BaseModel):
    """Generated Snowflake masking policies (``metalake masking snowflake-policies``, ``GET
    /v1/tenants/{tenant}/masking/snowflake``; docs/snowflake.md). Columns are those of ``snowflake`` URNs tagged with
    one of ``access.pii_tags``.

    ``pii_roles`` see PII in clear (``IS_ROLE_IN_SESSION``; spelled as Snowflake stores them, upper case unless
    created quoted); none: nobody does. ``mask_style`` is the masked text (``redact``: ``****``, ``hash``: SHA-256
    hex, ``null``); other types mask to NULL. ``policy_scope``: one policy per type in each schema, or in each
    database's ``policy_schema``. ``fold_lowercase``: an all-lower-case name valid unquoted is upper-cased (how
    Snowflake resolves a name a tool wrote unquoted). A request stops past ``max_columns`` tagged columns.
    """

    pii_roles: list[str] = Field(default_factory=list)
    mask_style: Literal["redact", "hash", "null"] = "redact"
    policy_scope: Literal["schema", "database"] = "schema"
    policy_schema: str = Field(default="METALAKE", pattern=r"^[^\x00-\x1f\x7f]{1,255}$")
    policy_prefix: str = Field(default="METALAKE_PII", pattern=r"^[A-Za-z_][A-Za-z0-9_$]{0,200}$")
    fold_lowercase: bool = True
    max_columns: int = Field(default=100_000, gt=0)


class Settings(BaseSettings):
    """Root settings. Service addresses left unset are derived from the stack's host and ports (loopback: for
    development); paths (lake, checkpoints, Spark jars, the access rules file) have no default but a temp folder
    for Spark's scratch space."""

    model_config = SettingsConfigDict(env_prefix="METALAKE_", env_nested_delimiter="__", extra="ignore")

    stack: StackSettings = StackSettings()
    kafka: KafkaSettings = KafkaSettings()
    mongo: MongoSettings = MongoSettings()
    trino: TrinoSettings = TrinoSettings()
    lake: LakeSettings = LakeSettings()
    spark: SparkSettings = SparkSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    enrichment: EnrichmentSettings = EnrichmentSettings()
    connect: ConnectSettings = ConnectSettings()
    propagation: PropagationSettings = PropagationSettings()
    api: ApiSettings = ApiSettings()
    outbound: OutboundSettings = OutboundSettings()
    secrets: SecretsSettings = SecretsSettings()
    access: AccessSettings = AccessSettings()
    erasure: ErasureSettings = ErasureSettings()
    sql: SqlSettings = SqlSettings()
    faults: FaultSettings = FaultSettings()
    health: HealthSettings = HealthSettings()
    dead_letters: DeadLetterSettings = DeadLetterSettings()
    enforcement: EnforcementSettings = EnforcementSettings()
    snowflake: SnowflakeMaskingSettings = SnowflakeMaskingSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # A secret setting's ``METALAKE_<SETTING>_FILE`` (metalake.secret_files) after its variable, before the file.
        files = SecretFilesSource(settings_cls)
        return init_settings, env_settings, files, dotenv_settings, file_secret_settings

    @model_validator(mode="after")
    def _derive_addresses(self) -> Settings:
        host, ports = self.stack.host, self.stack.ports
        self.kafka.bootstrap_servers = self.kafka.bootstrap_servers or f"{host}:{ports.kafka}"
        self.mongo.uri = self.mongo.uri or f"mongodb://{host}:{ports.ferretdb}/"
        self.trino.host = self.trino.host or host
        self.trino.port = self.trino.port or ports.trino
        self.lake.root = parse_lake_root(self.lake.root)
        self.lake.checkpoint_root = self.lake.checkpoint_root.resolve() if self.lake.checkpoint_root else None
        self.spark.scratch_dir = self.spark.scratch_dir or Path(tempfile.gettempdir()) / "metalake-spark"
        return self

    @property
    def kafka_bootstrap(self) -> str:
        return _required(self.kafka.bootstrap_servers, "kafka.bootstrap_servers")

    @property
    def mongo_uri(self) -> str:
        return _required(self.mongo.uri, "mongo.uri")

    @property
    def lake_root(self) -> LakeRoot:
        """The lake's root: a local folder or an S3 location (``metalake.lake_uri``)."""
        root = self.lake.root
        if root is None:
            return _required(root, "lake.root")
        return root

    @property
    def lake_on_s3(self) -> bool:
        return isinstance(self.lake.root, S3Path)

    @property
    def checkpoint_root(self) -> Path:
        return _required(self.lake.checkpoint_root, "lake.checkpoint_root")

    @property
    def access_rules_file(self) -> Path:
        """The Trino access rules file Trino reloads (``access.rules_file``)."""
        return _required(self.access.rules_file, "access.rules_file")

    @property
    def local_stack_dir(self) -> Path:
        """The local stack's folder, for what only exists there (the local launcher's run and log folders)."""
        return _required(self.stack.dir, "stack.dir")


_T = TypeVar("_T")


class SettingMissing(RuntimeError):
    """A setting this process needs has no value: named with its environment variable."""


def _required(value: _T | None, name: str) -> _T:
    if value is None:
        variable = "METALAKE_" + name.upper().replace(".", "__")
        raise SettingMissing(
            f"settings: {name} is unset; set {variable} (the local stack's tooling sets it for a checkout)"
        )
    return value


def load_settings() -> Settings:
    """Fresh settings from the environment and the stack's env file."""
    files = [f for f in _env_files() if f.is_file()]
    return Settings(_env_file=files or None)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings, read once."""
    return load_settings()
