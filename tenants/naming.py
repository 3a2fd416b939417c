"""Every physical name metalake uses for a tenant: topics, lake folders, MongoDB databases, Trino schemas.

Nothing else formats a tenant id into a name. Tenant ids match ``[a-z][a-z0-9-]{2,39}``; the hyphen is mapped to an
underscore where a target forbids it (Trino schemas), which stays injective because ids never contain underscores.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from metalake.tenancy import TENANT_ID_PATTERN, InvalidTenantId, validate_tenant_id

__all__ = [
    "TENANT_ID_PATTERN",
    "InvalidTenantId",
    "TenantNames",
    "names_for",
    "trino_user",
    "validate_tenant_id",
]

PRIORITY_TOPIC = "metalake.events.priority"
BULK_TOPIC = "metalake.events.bulk"
CHANGES_TOPIC = "metalake.changes"
# Source offsets of pull connectors (compacted): key = connector instance + source partition.
CONNECT_OFFSETS_TOPIC = "metalake.connect.offsets"
CONTROL_DATABASE = "metalake_control"

Stage = Literal["connectors", "enrichment", "outbound"]
TopicClass = Literal["priority", "bulk"]

# Delta tables of a tenant, by logical name. `_dlq` keeps its leading underscore: it is not catalog data.
DELTA_TABLES = (
    "events",
    "assets",
    "lineage_edges",
    "classifications",
    "incidents",
    "propagated_tags",
    "audit",
    "_dlq",
)


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
    lake_root: Path

    def topic(self, topic_class: TopicClass) -> str:
        if self.dedicated:
            return f"metalake.tenant.{self.tenant_id}.events.{topic_class}"
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
    def lake_dir(self) -> Path:
        return self.lake_root / self.tenant_id

    def delta_path(self, table: str) -> Path:
        if table not in DELTA_TABLES:
            raise KeyError(f"unknown Delta table {table!r}; known: {', '.join(DELTA_TABLES)}")
        return self.lake_dir / table

    @property
    def mongo_database(self) -> str:
        return f"metalake_{self.tenant_id}"

    @property
    def trino_schema(self) -> str:
        return self.tenant_id.replace("-", "_")

    def trino_table(self, table: str) -> str:
        """The table's name inside the tenant's Trino schema (the Delta folder name)."""
        self.delta_path(table)
        return table

    def checkpoint_dir(self, checkpoint_root: Path, query_name: str) -> Path:
        return checkpoint_root / self.tenant_id / query_name


def names_for(tenant_id: str, lake_root: Path, *, dedicated: bool = False) -> TenantNames:
    return TenantNames(validate_tenant_id(tenant_id), dedicated, lake_root)


def trino_user(tenant_id: str, *, pii: bool = False) -> str:
    """The Trino user a tenant's queries run as; the ``.pii`` variant also sees PII-tagged columns unmasked.

    Tenant ids hold no '.', so ``tenant.<id>.pii`` never names another tenant's user.
    """
    return f"tenant.{validate_tenant_id(tenant_id)}" + (".pii" if pii else "")


def event_topics() -> tuple[str, str]:
    """The pooled event topics, in priority order."""
    return (PRIORITY_TOPIC, BULK_TOPIC)


def platform_audit_dir(lake_root: Path) -> Path:
    """The platform's own Delta ``audit`` table: tenant lifecycle actions, which must outlive a deleted tenant's
    data. A leading underscore, so no tenant id can take the folder."""
    return lake_root / "_platform" / "audit"


def unrouted_lake_dir(lake_root: Path) -> Path:
    """Where records with no valid tenant go (their `_dlq`): a name no tenant id can take."""
    return lake_root / "_unrouted"
