"""CloudEvents for catalog rows: one crawl's URNs, version and source. Pure: no I/O.

Fields the schema bounds are clipped rather than refused, so one oversized comment cannot stop a crawl. Absent fields
mean "leave as is" to the stores, so ``description`` is always sent, ``null`` when the comment was removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from connectors.postgres.catalog import ColumnRow, DatabaseRow, SchemaRow, TableRow
from control.connectors.plugin import ConnectorContext
from metalake.events import CloudEvent, new_event
from metalake.urn import asset_urn

UPSERTED = "io.metalake.asset.upserted.v1"
DELETED = "io.metalake.asset.deleted.v1"
EDGE_ADDED = "io.metalake.lineage.edge.added.v1"
EDGE_REMOVED = "io.metalake.lineage.edge.removed.v1"

# relkind -> asset kind: ordinary, partitioned and foreign tables are tables; views and materialized views are views.
KINDS = {"r": "table", "p": "table", "f": "table", "v": "view", "m": "view"}
_MAX_DESCRIPTION = 65536
_MAX_TYPE = 1024
_MAX_TRANSFORMATION = 1024


def _clip(text: str | None, limit: int) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit]


@dataclass(frozen=True)
class EventFactory:
    """Builds the events of one crawl: every event carries ``version`` and ``ctx.source``."""

    ctx: ConnectorContext
    platform: str
    instance: str
    version: int

    def urn(self, *path: str) -> str:
        return asset_urn(self.platform, self.instance, *path)

    def _event(self, event_type: str, data: dict[str, Any]) -> CloudEvent:
        return new_event(event_type, self.ctx.tenant_id, {**data, "version": self.version}, source=self.ctx.source)

    def _upsert(self, urn: str, kind: str, name: str, description: str | None, **fields: Any) -> CloudEvent:  # noqa: ANN401
        data = {"urn": urn, "kind": kind, "name": name, "description": _clip(description, _MAX_DESCRIPTION), **fields}
        return self._event(UPSERTED, data)

    def database(self, urn: str, row: DatabaseRow) -> CloudEvent:
        properties = {"owner": row.owner, "encoding": row.encoding}
        return self._upsert(urn, "database", row.name, row.comment, properties=properties)

    def schema(self, urn: str, row: SchemaRow) -> CloudEvent:
        return self._upsert(urn, "schema", row.name, row.comment, properties={"owner": row.owner})

    def table(self, urn: str, row: TableRow) -> CloudEvent:
        properties = {"relkind": row.relkind, "owner": row.owner}
        if row.estimated_rows >= 0:  # -1: never vacuumed or analyzed, so PostgreSQL has no estimate
            properties["estimated_rows"] = str(row.estimated_rows)
        if row.is_partition:
            properties["partition"] = "true"
        return self._upsert(urn, KINDS[row.relkind], row.name, row.comment, properties=properties)

    def column(self, table_path: tuple[str, str, str], row: ColumnRow) -> CloudEvent:
        return self._upsert(
            self.urn(*table_path, row.name),
            "column",
            row.name,
            row.comment,
            data_type=_clip(row.data_type, _MAX_TYPE),
            properties={"ordinal": str(row.ordinal), "nullable": "false" if row.not_null else "true"},
        )

    def deleted(self, urn: str) -> CloudEvent:
        return self._event(DELETED, {"urn": urn})

    def edge_added(self, urn: str, upstream: str, constraint: str) -> CloudEvent:
        return self._event(
            EDGE_ADDED, {"urn": urn, "upstream": upstream, "transformation": f"foreign_key {constraint}"}
        )

    def lineage_edge(self, urn: str, upstream: str, transformation: str) -> CloudEvent:
        """A view's edge: from a relation it reads (table level) or a column its value comes from (column level)."""
        data = {"urn": urn, "upstream": upstream, "transformation": _clip(transformation, _MAX_TRANSFORMATION)}
        return self._event(EDGE_ADDED, data)

    def edge_removed(self, urn: str, upstream: str) -> CloudEvent:
        return self._event(EDGE_REMOVED, {"urn": urn, "upstream": upstream})
