"""The integration tests' lake on S3: the stack's SeaweedFS (started if the session has none), its test bucket, and
the s3a jars Spark needs (fetched once)."""

from __future__ import annotations

import secrets

from metalake.lake_uri import S3Path
from metalake.s3 import S3Client, S3Error
from ops.settings import Settings
from ops.stack.manager import StackManager

BUCKET = "metalake-it"


def s3_lake_settings(settings: Settings, stack: StackManager, prefix: str) -> Settings:
    """The session's settings with the lake root at a fresh ``<prefix>-<hex>`` folder of the test bucket."""
    # The lake commands' timeout: a bucket's creation right after SeaweedFS started takes seconds.
    client = S3Client.from_settings(settings.lake.s3, settings.lake.s3.request_timeout_s)
    try:
        client.list_buckets()
    except S3Error:
        stack.up(["seaweedfs"])
        client.list_buckets()
    client.create_bucket(BUCKET)
    jars = settings.lake.s3.spark_jars_dir
    if jars is None or not any(jars.glob("hadoop-aws-*.jar")):
        stack.context.run_fetch_script("spark-s3", "stream")
    out = settings.model_copy(deep=True)
    out.lake.root = S3Path.parse(f"s3a://{BUCKET}/{prefix}-{secrets.token_hex(4)}")
    return out
