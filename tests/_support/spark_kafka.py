"""Spark's Kafka source and sink with the streaming job's own session and options, for
tests/integration/test_kafka_oauthbearer.py: ``python -m spark_kafka SOURCE_TOPIC BATCH_SINK STREAM_SINK CHECKPOINT``.

A process of its own, as the job is: ``build_spark`` hands the Kafka client's JVM system properties to the driver
only when it launches the JVM, and a pytest process may already hold one (the lake tests' session). The brokers and
their security come from the environment (``METALAKE_KAFKA__*``), as the job's do. One session:

1. reads SOURCE_TOPIC from the earliest offsets as a batch, with ``spark_kafka_options`` (the job's source options);
2. writes each record's value upper-cased, under its key, to BATCH_SINK through the batch sink with the same options;
3. streams SOURCE_TOPIC as the job does (``readStream``, ``availableNow``, a checkpoint in CHECKPOINT) into
   STREAM_SINK through the streaming sink, values prefixed ``stream:``;
4. reads SOURCE_TOPIC again with ``kafka.oauth_client_secret`` replaced by ``METALAKE_IT_FORGED_SECRET``: must fail.

Prints one JSON line: the values read, the allowed token URLs as the driver's JVM and a task's see them, and the
forged read's failure (the Java exception's class and message, or null if it got in).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from py4j.protocol import Py4JJavaError
from pydantic import SecretStr
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from metalake.kafka.config import JAVA_OAUTH_ALLOWED_URLS, spark_kafka_options
from ops.settings import Settings, get_settings
from processors.enrichment.session import build_spark


def _read(spark: SparkSession, settings: Settings, topic: str) -> Any:
    return (
        spark.read.format("kafka")
        .options(**spark_kafka_options(settings))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )


def _failure(error: Exception) -> dict[str, str]:
    if isinstance(error, Py4JJavaError):
        java = error.java_exception
        cause = java
        while cause.getCause() is not None and cause.getCause() != cause:
            cause = cause.getCause()
        return {
            "class": java.getClass().getName(),
            "root": cause.getClass().getName(),
            "message": str(java.getMessage()),
            "root_message": str(cause.getMessage()),
        }
    name, message = type(error).__name__, str(error)
    return {"class": name, "root": name, "message": message, "root_message": message}


def _executor_property(spark: SparkSession, name: str) -> str | None:
    """A JVM system property as a task sees it: the executor's JVM on a cluster (the driver's on a local master).
    ``reflect`` is nondeterministic, so Spark evaluates it in the task, not while planning on the driver."""
    row = spark.range(1).selectExpr(f"reflect('java.lang.System', 'getProperty', '{name}') AS value").first()
    return None if row is None else row["value"]


def main(argv: list[str]) -> int:
    source, batch_sink, stream_sink, checkpoint = argv
    settings = get_settings()
    spark = build_spark(settings, "it-spark-kafka-oauthbearer")
    try:
        frame = _read(spark, settings, source).selectExpr("key", "CAST(value AS STRING) AS value", "offset")
        rows = frame.orderBy("offset").collect()
        (
            frame.selectExpr("key", "upper(value) AS value")
            .write.format("kafka")
            .options(**spark_kafka_options(settings))
            .option("topic", batch_sink)
            .save()
        )
        stream = (
            spark.readStream.format("kafka")
            .options(**spark_kafka_options(settings))
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "concat('stream:', CAST(value AS STRING)) AS value")
            .writeStream.format("kafka")
            .options(**spark_kafka_options(settings))
            .option("topic", stream_sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        stream.awaitTermination()
        forged_kafka = settings.kafka.model_copy(
            update={"oauth_client_secret": SecretStr(os.environ["METALAKE_IT_FORGED_SECRET"])}
        )
        forged = settings.model_copy(update={"kafka": forged_kafka})
        failure: dict[str, str] | None = None
        try:
            _read(spark, forged, source).count()
        except (Py4JJavaError, PySparkException) as error:
            failure = _failure(error)
        jvm: Any = spark.sparkContext._jvm  # py4j gateway: PySpark exposes no public handle
        print(
            json.dumps(
                {
                    "values": [row["value"] for row in rows],
                    "keys": [bytes(row["key"]).decode() for row in rows],
                    "driver_allowed_urls": jvm.java.lang.System.getProperty(JAVA_OAUTH_ALLOWED_URLS),
                    "executor_allowed_urls": _executor_property(spark, JAVA_OAUTH_ALLOWED_URLS),
                    "forged": failure,
                }
            ),
            flush=True,
        )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
