"""The erasure queue's section (``METALAKE_ERASURE__*``): filled by the admin API, drained by the lake worker."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
