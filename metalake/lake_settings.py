"""Where the lake lives and how to reach its object store (``METALAKE_LAKE__*``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field, PlainValidator, SecretStr

from metalake.lake_uri import LakeRoot, parse_lake_root


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
