"""What the lake query's driver learns of a micro-batch: one small aggregate of its parsed rows (tenants, buckets,
valid and dead-letter counts, which state tables have rows, the Kafka timestamps for freshness)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# (tenant_id, tenant_bucket, valid, state_table, count): one group of a batch's parsed rows.
Group = tuple[str | None, int | None, bool, str | None, int]
# The same with the records' Kafka timestamp in ms before the count: what the driver collects (freshness).
TimedGroup = tuple[str | None, int | None, bool, str | None, int | None, int]


@dataclass(frozen=True)
class BatchSummary:
    """What the driver learns of a batch: one small aggregate of the parsed rows."""

    tenants: frozenset[str]
    buckets: frozenset[int]
    valid: int
    dead: int
    unrouted: int
    state_tables: frozenset[str]
    groups: tuple[Group, ...] = ()
    timed: tuple[TimedGroup, ...] = ()

    @classmethod
    def of(cls, parsed: DataFrame) -> BatchSummary:
        # Kafka stamps records in ms: grouping by it too keeps the freshness exact, bounded by the batch's records.
        kafka_ms = F.unix_millis("kafka_time").alias("kafka_ms")
        rows = parsed.groupBy("tenant_id", "tenant_bucket", "valid", "state_table", kafka_ms).count().collect()
        return cls.from_timed(
            tuple(
                (r["tenant_id"], r["tenant_bucket"], bool(r["valid"]), r["state_table"], r["kafka_ms"], r["count"])
                for r in rows
            )
        )

    @classmethod
    def from_timed(cls, timed: tuple[TimedGroup, ...]) -> BatchSummary:
        counts: dict[tuple[str | None, int | None, bool, str | None], int] = {}
        for tenant, bucket, valid, table, _, n in timed:
            key = (tenant, bucket, valid, table)
            counts[key] = counts.get(key, 0) + n
        summary = cls.from_groups(tuple((*key, n) for key, n in counts.items()))
        return replace(summary, timed=timed)

    def kafka_ms(self, state_table: str | None) -> list[tuple[int, int]]:
        """(Kafka timestamp in ms, count) of the batch's valid events of ``state_table`` (None: of no state table)."""
        return [(ms, n) for t, _, v, s, ms, n in self.timed if t and v and s == state_table and ms is not None]

    @classmethod
    def from_groups(cls, groups: tuple[Group, ...]) -> BatchSummary:
        return cls(
            tenants=frozenset(t for t, _, _, _, _ in groups if t),
            buckets=frozenset(b for _, b, _, _, _ in groups if b is not None),
            valid=sum(n for _, _, v, _, n in groups if v),
            dead=sum(n for t, _, v, _, n in groups if not v and t),
            unrouted=sum(n for t, _, _, _, n in groups if not t),
            state_tables=frozenset(s for _, _, _, s, _ in groups if s),
            groups=groups,
        )

    def records_of(self, tenants: frozenset[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for tenant, _, _, _, n in self.groups:
            if tenant in tenants:
                counts[tenant] = counts.get(tenant, 0) + n
        return counts

    def without(self, tenants: frozenset[str]) -> BatchSummary:
        """The summary of the batch once the records of ``tenants`` are left out (their buckets too, if no other
        tenant of the batch shares them: the MERGEs then prune to the buckets actually written)."""
        if self.timed:
            return BatchSummary.from_timed(tuple(g for g in self.timed if g[0] not in tenants))
        return BatchSummary.from_groups(tuple(g for g in self.groups if g[0] not in tenants))


def kept_rows(tenant_column: Column, dropped: frozenset[str]) -> Column:
    """The rows a batch keeps: those of no dropped tenant, unrouted ones (no tenant) included."""
    return tenant_column.isNull() | ~tenant_column.isin(*sorted(dropped))


__all__ = ["BatchSummary", "Group", "TimedGroup", "kept_rows"]
