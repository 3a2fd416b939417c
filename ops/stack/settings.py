"""The local stack's section (``METALAKE_STACK__*``): its folder, loopback host and ports, read by the operator
tooling only (``ops.settings.Settings`` derives the loopback addresses from them)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


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
    # The access processor's lake decisions, which Trino asks with access.mode=opa (processors/access/decisions.py).
    access_decisions: int = 9106
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
