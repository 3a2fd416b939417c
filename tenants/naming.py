"""Every physical name metalake uses for a tenant: topics, lake folders, MongoDB databases, Trino table names.

Nothing else formats a tenant id into a name, but for the Trino schema, which is keyed so that it cannot be guessed
from the id (``tenants.trino_schemas``). Tenant ids match ``[a-z][a-z0-9-]{2,39}``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

from metalake.lake_uri import LakeRoot
from metalake.tenancy import TENANT_ID_PATTERN, InvalidTenantId, validate_tenant_id

__all__ = [
    "TENANT_ID_PATTERN",
    "InvalidTenantId",
    "LakeTable",
    "TenantNames",
    "names_for",
    "pooled_table_path",
    "tenant_bucket",
    "trino_user",
    "validate_tenant_id",
]

PRIORITY_TOPIC = "metalake.events.priority"
BULK_TOPIC = "metalake.events.bulk"
CHANGES_TOPIC = "metalake.changes"
# Test sends of outbound subscriptions: requested by the admin API, delivered by the outbound runtime.
OUTBOUND_TESTS_TOPIC = "metalake.outbound.tests"
# Source offsets of pull connectors (compacted): key = connector instance + source partition.
CONNECT_OFFSETS_TOPIC = "metalake.connect.offsets"
CONTROL_DATABASE = "metalake_control"
# Every dedicated tenant's topic starts so (``TenantNames.topic``): one prefixed ACL covers all tenants, new ones too.
DEDICATED_TOPIC_PREFIX = "metalake.tenant."

# Stages with a dead-letter topic; the streaming job dead-letters into each tenant's `_dlq` table instead.
Stage = Literal["connectors", "outbound"]
TopicClass = Literal["priority", "bulk"]

# Delta tables of a tenant, by logical name. `_dlq` keeps its leading underscore: it is not catalog data.
DELTA_TABLES = (
    "events",
    "assets",
    "lineage_edges",
    "classifications",
    "incidents",
    "propagated_tags",
    "asset_edits",
    "audit",
    "_dlq",
)

# Pooled tenants share one Delta table per kind of data under ``<lake root>/_pooled/<table>`` (a leading underscore:
# no tenant id can take the folder), with the tenant as two columns: ``tenant_id`` and ``tenant_bucket``. The tables
# are partitioned by the bucket, so a tenant's reads, MERGEs and deletes touch the files of its bucket only (about
# 1/POOLED_BUCKETS of the table) and a micro-batch commits once per table whatever its number of tenants. The bucket
# count is part of the data: it never changes for a lake. ``audit`` stays per tenant (written by the API with delta-rs).
POOLED_DIR = "_pooled"
POOLED_BUCKETS = 16
POOLED_TABLES = tuple(t for t in DELTA_TABLES if t != "audit")
TENANT_COLUMNS = ("tenant_id", "tenant_bucket")
# The Trino schema that holds the shared tables; tenants read them only through the views in their own schema.
TRINO_POOLED_SCHEMA = "_pooled"


def tenant_bucket(tenant_id: str) -> int:
    """The partition of the pooled tables that holds a tenant's rows: crc32 of the id modulo ``POOLED_BUCKETS``
    (Spark's ``crc32`` gives the same number, so SQL can derive it too)."""
    return zlib.crc32(validate_tenant_id(tenant_id).encode()) % POOLED_BUCKETS


@overload
def pooled_table_path(lake_root: Path, table: str) -> Path: ...
@overload
def pooled_table_path(lake_root: LakeRoot, table: str) -> LakeRoot: ...
def pooled_table_path(lake_root: LakeRoot, table: str) -> LakeRoot:
    if table not in POOLED_TABLES:
        raise KeyError(f"{table!r} is not a pooled table; pooled: {', '.join(POOLED_TABLES)}")
    return lake_root / POOLED_DIR / table


@dataclass(frozen=True)
class LakeTable:
    """Where one tenant's rows of one logical table live: a whole table of its own (``tenant_id`` None), or its rows
    of a shared pooled table (``tenant_id`` and ``bucket`` set). Build with :meth:`TenantNames.table`."""

    name: str
    path: LakeRoot
    tenant_id: str | None = None
    bucket: int | None = None

    @property
    def shared(self) -> bool:
        return self.tenant_id is not None

    @property
    def predicate(self) -> str | None:
        """The SQL predicate (Spark and Trino) that selects the tenant's rows of a shared table, bucket first so
        partition pruning applies; None for a table of its own. Tenant ids are validated: no quoting needed."""
        if self.tenant_id is None:
            return None
        return f"tenant_bucket = {self.bucket} AND tenant_id = '{self.tenant_id}'"

    def where(self, predicate: str | None) -> str | None:
        """``predicate`` limited to the tenant's rows (None stays None for a table of its own)."""
        if self.predicate is None:
            return predicate
        return self.predicate if predicate is None else f"{self.predicate} AND ({predicate})"


def dlq_topic(stage: Stage) -> str:
    """One dead-letter topic per pipeline stage, shared by tenants (records carry the tenant in a header)."""
    return f"metalake.{stage}.dlq"


def retry_topic(stage: Literal["outbound"]) -> str:
    """Deliveries that failed their short in-process retries wait here for their due time (shared by tenants)."""
    return f"metalake.{stage}.retry"


@dataclass(frozen=True)
class TenantNames:
    """The physical names of one tenant. Build with :func:`names_for`."""

    tenant_id: str
    dedicated: bool
    lake_root: LakeRoot

    def topic(self, topic_class: TopicClass) -> str:
        if self.dedicated:
            return f"{DEDICATED_TOPIC_PREFIX}{self.tenant_id}.events.{topic_class}"
        return PRIORITY_TOPIC if topic_class == "priority" else BULK_TOPIC

    @property
    def priority_topic(self) -> str:
        return self.topic("priority")

    @property
    def bulk_topic(self) -> str:
        return self.topic("bulk")

    @property
    def partition_key_prefix(self) -> str:
        return f"{self.tenant_id}:"

    @property
    def lake_dir(self) -> LakeRoot:
        return self.lake_root / self.tenant_id

    def delta_path(self, table: str) -> LakeRoot:
        """The folder of a table of the tenant's own (a dedicated tenant's tables; every tenant's ``audit``). For a
        pooled tenant's data use :meth:`table`, which knows the shared tables."""
        if table not in DELTA_TABLES:
            raise KeyError(f"unknown Delta table {table!r}; known: {', '.join(DELTA_TABLES)}")
        return self.lake_dir / table

    def table(self, table: str) -> LakeTable:
        """Where the tenant's rows of ``table`` live: its own folder if dedicated (and for ``audit``), else its rows
        of the pooled table."""
        if self.dedicated or table == "audit":
            return LakeTable(table, self.delta_path(table))
        return LakeTable(table, pooled_table_path(self.lake_root, table), self.tenant_id, tenant_bucket(self.tenant_id))

    @property
    def mongo_database(self) -> str:
        return f"metalake_{self.tenant_id}"

    def trino_table(self, table: str) -> str:
        """The table's name inside the tenant's Trino schema (the Delta folder name)."""
        self.delta_path(table)
        return table

    def checkpoint_dir(self, checkpoint_root: Path, query_name: str) -> Path:
        return checkpoint_root / self.tenant_id / query_name


def names_for(tenant_id: str, lake_root: LakeRoot, *, dedicated: bool = False) -> TenantNames:
    return TenantNames(validate_tenant_id(tenant_id), dedicated, lake_root)


# A tenant's tables only its administrators read (the API keeps them to tenant:admin): the audit trail, and the
# dead letters, which hold raw payloads.
ADMIN_ONLY_TABLES = ("audit", "_dlq")


def trino_user(tenant_id: str, *, pii: bool = False, admin: bool = False) -> str:
    """The Trino user a tenant's queries run as; the ``.pii`` variants also see PII-tagged columns unmasked, the
    ``.admin`` ones also read :data:`ADMIN_ONLY_TABLES` (``tenant.<id>.admin``, ``tenant.<id>.admin.pii``).

    Tenant ids hold no '.', so ``tenant.<id>.pii`` or ``.admin`` never names another tenant's user.
    """
    return f"tenant.{validate_tenant_id(tenant_id)}" + (".admin" if admin else "") + (".pii" if pii else "")


def event_topics() -> tuple[str, str]:
    """The pooled event topics, in priority order."""
    return (PRIORITY_TOPIC, BULK_TOPIC)


def platform_audit_dir(lake_root: LakeRoot) -> LakeRoot:
    """The platform's own Delta ``audit`` table: tenant lifecycle actions, which must outlive a deleted tenant's
    data. A leading underscore, so no tenant id can take the folder."""
    return lake_root / "_platform" / "audit"


def unrouted_lake_dir(lake_root: LakeRoot) -> LakeRoot:
    """Where records with no valid tenant go (their `_dlq`): a name no tenant id can take."""
    return lake_root / "_unrouted"
