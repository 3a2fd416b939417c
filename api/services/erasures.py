"""GDPR erasures requested through the API: the API only queues them (``control.erasures``); the lake worker
(``metalake lake worker``, ``processors.lake.worker``) runs them where Spark work runs. The API never starts an erase.
"""

from __future__ import annotations

from api.context import ApiContext
from control.erasures import (
    ERASURES_COLLECTION,
    AlreadyQueued,
    ErasureQueue,
    ErasureRecord,
    ErasureState,
    ErasureStore,
    QueueFull,
    QueueLimits,
)
from tenants.naming import CONTROL_DATABASE

__all__ = [
    "ERASURES_COLLECTION",
    "AlreadyQueued",
    "ErasureQueue",
    "ErasureRecord",
    "ErasureState",
    "ErasureStore",
    "QueueFull",
    "queue",
]


def queue(ctx: ApiContext) -> ErasureQueue:
    """The queue with the limits of the settings."""
    settings = ctx.settings.erasure
    limits = QueueLimits(queue_max=settings.queue_max, per_tenant_max=settings.per_tenant_max)
    return ErasureQueue(ctx.mongo[CONTROL_DATABASE], limits)
