"""Freshness per event, exactly: from its Kafka record timestamp to the moment the store's commit that holds it
returned (``metalake_freshness_seconds{store, query}``), and the job's dead letters in ``metalake_events_total``.

Delta: an event counts when the commit that makes it readable returns, its state table's MERGE (an asset, a tag, an
incident...) or, for a type with no state table, the ``events`` append; the lake query learns the Kafka timestamps
from the batch's one aggregate (per state table and millisecond, the resolution Kafka stamps records with), so no
record comes to the driver. MongoDB: when the tenant's projection writes returned, for the events a state collection
takes.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime

from metalake.telemetry.metrics import EVENTS, FRESHNESS
from processors.enrichment.state import STATE_SPECS

DELTA, MONGODB = "delta", "mongodb"
#: What a query does, the ``query`` label of its metrics: its name ends with it (``<job>-lake``, ...). Not the whole
#: name, which names a dedicated tenant's job after the tenant.
ROLES = ("mongo-priority", "mongo-bulk", "lake")
SOURCE = "enrichment"
PROJECTED_TYPES = frozenset(t for spec in STATE_SPECS for t in spec.types)


def query_label(query_name: str) -> str:
    """The role a query's name ends with, else the name (a test's or a benchmark's own query)."""
    return next((role for role in ROLES if query_name.endswith(f"-{role}")), query_name)


def record_counts(kafka_ms: Iterable[tuple[int, int]], store: str, query: str) -> None:
    """``(Kafka timestamp in ms, events)`` pairs, committed now."""
    committed_ms = time.time() * 1000
    ages = ((max(0.0, committed_ms - ms) / 1000, count) for ms, count in kafka_ms)
    FRESHNESS.observe_many(ages, {"store": store, "query": query})


def record_times(kafka_times: Iterable[datetime | None], store: str, query: str) -> None:
    """Each event's Kafka timestamp, committed now."""
    committed = time.time()
    ages = ((max(0.0, committed - stamp.timestamp()), 1) for stamp in kafka_times if stamp is not None)
    FRESHNESS.observe_many(ages, {"store": store, "query": query})


def count_dead_letters(count: int, reason: str) -> None:
    """Records the job wrote to a ``_dlq`` table; ``reason`` is ``invalid`` (the row says why) or ``unrouted``."""
    if count:
        EVENTS.add(count, {"source": SOURCE, "outcome": "dead_lettered", "reason": reason})
