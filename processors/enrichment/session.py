"""The SparkSession every job uses: local jars by path (no Ivy), Delta enabled, scratch space where settings say."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from metalake.java import find_java
from metalake.kafka.config import java_system_properties
from metalake.settings import Settings


class SparkSetupError(RuntimeError):
    """Spark cannot start here; the message says what to install or run."""


def _jars(jars_dir: Path) -> list[str]:
    jars = sorted(str(p) for p in jars_dir.glob("*.jar"))
    if not any("delta-spark" in j for j in jars) or not any("spark-sql-kafka" in j for j in jars):
        raise SparkSetupError(
            f"the Delta and Kafka connector jars are missing from {jars_dir}; run: metalake stack up stream "
            "(or bash deploy/local/fetch/spark.sh with STACK_DIR and REPO_DIR set)"
        )
    return jars


def build_spark(settings: Settings, app_name: str) -> SparkSession:
    if "JAVA_HOME" not in os.environ:
        # Spark 4.2 runs on Java 17 or 21; a newer default JDK on the machine would fail in odd places.
        os.environ["JAVA_HOME"] = str(find_java(17, 21, env_var="METALAKE_SPARK_JAVA_HOME").parent.parent)
    # Bind the driver where settings say (loopback by default): the host name may resolve elsewhere.
    os.environ.setdefault("SPARK_LOCAL_IP", settings.spark.driver_host)
    # Python workers must run this interpreter (the venv that has metalake installed), not `python3` on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if settings.spark.jars_dir is None:
        raise SparkSetupError("settings.spark.jars_dir is unset: set METALAKE_SPARK__JARS_DIR (the Delta/Kafka jars)")
    scratch = settings.spark.scratch_dir or Path(tempfile.gettempdir()) / "metalake-spark"
    scratch.mkdir(parents=True, exist_ok=True)
    # System properties the Kafka source's Java client needs (the OIDC token endpoint it may call, for OAUTHBEARER):
    # on the executors too, where the source's consumers run on a cluster.
    kafka_jvm = [f"-D{key}={value}" for key, value in java_system_properties(settings.kafka).items()]
    spark = (
        SparkSession.builder.appName(app_name)
        .master(settings.spark.master)
        .config("spark.jars", ",".join(_jars(settings.spark.jars_dir)))
        .config("spark.driver.memory", settings.spark.driver_memory)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.shuffle.partitions", str(settings.spark.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        # The console progress bar writes "\r[Stage ...]" into the job's log, on the lines of its JSON records.
        .config("spark.ui.showConsoleProgress", "false")
        # The streaming job's queries submit jobs at once: FAIR pools keep the projection's small jobs from queueing
        # behind the lake query's MERGEs (each query names its pool).
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.driver.host", settings.spark.driver_host)
        .config("spark.driver.bindAddress", settings.spark.driver_host)
        .config("spark.local.dir", str(scratch / "tmp"))
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.driver.extraJavaOptions", " ".join([f"-Dderby.system.home={scratch / 'derby'}", *kafka_jvm]))
        .config(map={"spark.executor.extraJavaOptions": " ".join(kafka_jvm)} if kafka_jvm else {})
        # Trino 476 reads these tables: keep to table features it supports (no deletion vectors by default).
        .config("spark.databricks.delta.properties.defaults.enableDeletionVectors", "false")
        # Delta rebuilds table state (to read the txnAppId/txnVersion pairs) with this many tasks; the default 50
        # turns every idempotent commit of a small metadata batch into a 3 s job on two cores (measured: 1 -> ~0.9 s).
        .config("spark.databricks.delta.snapshotPartitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark
