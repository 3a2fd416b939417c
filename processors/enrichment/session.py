"""The SparkSession every job uses: local jars by path (no Ivy), Delta enabled, scratch space where settings say."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from metalake.java import find_java
from metalake.kafka.config import java_system_properties
from metalake.lake_settings import LakeS3Settings
from processors.enrichment.settings import StreamSettings
from processors.enrichment.shipping import code_archive


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


def _s3a_jars(settings: StreamSettings) -> list[str]:
    """Spark's s3a jars, for a lake on S3 only (the AWS SDK bundle is ~690 MB: a local lake starts without it)."""
    if not settings.lake_on_s3:
        return []
    jars_dir = settings.lake.s3.spark_jars_dir
    jars = sorted(str(p) for p in jars_dir.glob("*.jar")) if jars_dir is not None else []
    if not any("hadoop-aws" in j for j in jars):
        raise SparkSetupError(
            f"lake.root is on S3 but Spark's s3a jars are missing from {jars_dir} (lake.s3.spark_jars_dir); run: "
            "metalake stack up stream (or bash deploy/local/fetch/spark-s3.sh with STACK_DIR and REPO_DIR set)"
        )
    return jars


def s3a_conf(s3: LakeS3Settings) -> dict[str, str]:
    """Hadoop's s3a settings for the lake's store, without its keys (:func:`s3a_secrets`). Delta picks its log store
    by the path's scheme: for s3a the single-driver S3 log store, safe only while one driver writes a table
    (docs/production.md)."""
    conf = {
        "spark.hadoop.fs.s3a.endpoint.region": s3.region,
        "spark.hadoop.fs.s3a.path.style.access": "true" if s3.path_style else "false",
        "spark.hadoop.fs.s3a.connection.maximum": str(s3.max_connections),
        # The key pair of the settings, else the default AWS chain (environment, profile, instance role).
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            if s3.access_key_id is not None
            else "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
        ),
    }
    if s3.endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = s3.endpoint
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false" if s3.endpoint.startswith("http://") else "true"
    return conf


def s3a_secrets(s3: LakeS3Settings) -> dict[str, str]:
    """The s3a key pair as Spark properties: they go to the owner-only properties file (:func:`secret_properties`),
    like the cluster's RPC secret, never onto the ``spark-submit`` command line."""
    if s3.access_key_id is None or s3.secret_access_key is None:
        return {}
    return {
        "spark.hadoop.fs.s3a.access.key": s3.access_key_id.get_secret_value(),
        "spark.hadoop.fs.s3a.secret.key": s3.secret_access_key.get_secret_value(),
    }


def cluster_conf(settings: StreamSettings, scratch: Path) -> dict[str, str]:
    """What a cluster needs beyond a local master: executor sizes, fixed ports, the executors' Python, metalake's
    code shipped as a zip, and the user's own ``spark.conf`` (which wins). The RPC secret is not here: see
    :func:`secret_properties`."""
    spark = settings.spark
    out: dict[str, str] = {"spark.pyspark.python": spark.executor_python or sys.executable}
    optional = {
        "spark.executor.memory": spark.executor_memory,
        "spark.executor.cores": spark.executor_cores,
        "spark.cores.max": spark.cores_max,
        "spark.driver.port": spark.driver_port,
        "spark.blockManager.port": spark.block_manager_port,
    }
    out.update({k: str(v) for k, v in optional.items() if v is not None})
    if spark.ship_code if spark.ship_code is not None else not spark.is_local:
        out["spark.submit.pyFiles"] = str(code_archive(scratch / "code"))
    if spark.auth_secret is not None and not spark.is_local:
        # A local master has no RPC between hosts to protect (and Spark makes its own secret for it). With the
        # secret, RPC and block transfers are also encrypted (AES), as the cluster's daemons require.
        out["spark.authenticate"] = "true"
        out["spark.network.crypto.enabled"] = "true"
    out.update(spark.conf)
    return out


# Which ``--properties-file`` in PYSPARK_SUBMIT_ARGS metalake put there, in this process or in the parent that started
# it (children inherit the environment): that one is replaced, any other is the operator's own.
PROPERTIES_FILE_VARIABLE = "METALAKE_SPARK_PROPERTIES_FILE"


def secret_properties(settings: StreamSettings, scratch: Path) -> None:
    """Hand the cluster's RPC secret and the lake's S3 keys to the JVM in a properties file only this user can read:
    PySpark passes the builder's settings to ``spark-submit`` as ``--conf`` arguments, which every user of the host
    sees in ``ps``."""
    secret = settings.spark.auth_secret
    properties: dict[str, str] = {}
    if secret is not None and not settings.spark.is_local:
        properties["spark.authenticate.secret"] = secret.get_secret_value()
    if settings.lake_on_s3:
        properties.update(s3a_secrets(settings.lake.s3))
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS")
    inherited = os.environ.pop(PROPERTIES_FILE_VARIABLE, None)
    if inherited is not None and submit_args is not None:
        # Not this session's secrets: a parent's (another lake, another master) or an earlier session's.
        submit_args = submit_args.replace(f"--properties-file {inherited} ", "")
        os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args
    if not properties:
        return
    submit_args = submit_args or "pyspark-shell"
    if "--properties-file" in submit_args:
        raise SparkSetupError(
            "PYSPARK_SUBMIT_ARGS names a --properties-file and metalake has secrets for Spark: Spark takes one "
            f"properties file; put {', '.join(sorted(properties))} in yours and unset METALAKE_SPARK__AUTH_SECRET "
            "(and METALAKE_LAKE__S3__ACCESS_KEY_ID / __SECRET_ACCESS_KEY for the lake's keys)"
        )
    path = scratch / "secret.properties"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        # java.util.Properties: a backslash in a value starts an escape.
        out.writelines(f"{key} {value.replace(chr(92), chr(92) * 2)}\n" for key, value in properties.items())
    os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {path} {submit_args}"
    os.environ[PROPERTIES_FILE_VARIABLE] = str(path)


def driver_java_options(settings: StreamSettings, scratch: Path, kafka_jvm: list[str]) -> str:
    """The driver's JVM options: Derby's home in the scratch folder, the Kafka client's system properties, then the
    operator's own (``spark.driver_java_options``), last so that they win where the JVM takes the last one."""
    return " ".join(
        [f"-Dderby.system.home={scratch / 'derby'}", *kafka_jvm, *settings.spark.driver_java_options.split()]
    )


def build_spark(settings: StreamSettings, app_name: str) -> SparkSession:
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
    secret_properties(settings, scratch)
    builder = SparkSession.builder
    s3a = s3a_conf(settings.lake.s3) if settings.lake_on_s3 else {}
    for key, value in {**s3a, **cluster_conf(settings, scratch)}.items():
        builder = builder.config(key, value)
    spark = (
        builder.appName(app_name)
        .master(settings.spark.master)
        .config("spark.jars", ",".join([*_jars(settings.spark.jars_dir), *_s3a_jars(settings)]))
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
        .config("spark.driver.bindAddress", settings.spark.driver_bind_address or settings.spark.driver_host)
        .config("spark.local.dir", str(scratch / "tmp"))
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.driver.extraJavaOptions", driver_java_options(settings, scratch, kafka_jvm))
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
