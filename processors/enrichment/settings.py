"""The streaming job's sections: Spark (``METALAKE_SPARK__*``) and automatic classification
(``METALAKE_ENRICHMENT__*``)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from metalake.settings import KernelSettings
from processors.settings import FaultSettings


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
    # The lake batch's commits (events, dead letters, one MERGE per state table) that run at once, each in a thread
    # (``fanout``); 1: one after the other. The health MERGE always follows the assets and incidents MERGEs. 1 by
    # default until side by side is shown to pay: on a busy 2-core machine the commits are CPU-bound, and two rounds
    # of bench/batch_kinds.py disagreed (docs/benchmarks.md).
    commit_parallelism: int = Field(default=1, ge=1)
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

    @model_validator(mode="after")
    def _scratch_default(self) -> SparkSettings:
        self.scratch_dir = self.scratch_dir or Path(tempfile.gettempdir()) / "metalake-spark"
        return self

    @property
    def is_local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")


class EnrichmentSettings(BaseModel):
    """Automatic PII classification of columns (processors.enrichment.classify): on/off, and each tenant's own
    words for personal data, e.g. ``METALAKE_ENRICHMENT__PII_TERMS='{"acme": ["kundennr", "iban"]}'``."""

    auto_classify: bool = True
    pii_terms: dict[str, list[str]] = Field(default_factory=dict)


class StreamSettings(KernelSettings):
    """What the streaming job (``metalake stream run``) and the lake commands on its tables read."""

    spark: SparkSettings = SparkSettings()
    enrichment: EnrichmentSettings = EnrichmentSettings()
    faults: FaultSettings = FaultSettings()
