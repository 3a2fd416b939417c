"""The PostgreSQL catalog crawler: a pull connector over every selected database of one server.

See docs/connectors/postgres.md for what is emitted, in which order, and how offsets make reruns incremental.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from connectors.postgres.catalog import list_databases, snapshot
from connectors.postgres.config import PostgresCatalogConfig
from connectors.postgres.crawl import DatabaseCrawl, deletions
from connectors.postgres.emit import EventFactory
from connectors.postgres.state import crawl_version, group_by_database, stale
from connectors.postgres.tasks import Scope, discover_units, stored_units, task_configs
from control.connectors.plugin import ConnectorConfig, ConnectorContext, SourceConnector, SourceRecord

log = logging.getLogger(__name__)


class PostgresCatalogConnector(SourceConnector[PostgresCatalogConfig]):
    """Crawls databases, schemas, tables, views, columns and foreign keys; on a rerun emits only what changed.

    Contract of :meth:`poll`:

    - Per database, in order: the database, its schemas, its tables and views, then per changed table its columns,
      deletes of dropped columns and its foreign-key lineage edges (with removals of the edges that went away); then
      deletes for the tables and schemas that went away. Databases that left the crawl's scope (dropped, no longer
      connectable, or no longer configured) are deleted last.
    - Every event of one crawl (of one task) has the same ``version`` (the crawl's start, in ms), above every version
      a previous crawl recorded for the partitions it owns, so a rerun's events supersede older ones in the stores.
    - Deletions are decided per database only after that database was read completely: a failure raises
      (:class:`~connectors.postgres.catalog.CatalogError`, without secrets) before anything of it is deleted.
    - Memory holds one table's columns at a time plus one small entry per table; never the whole catalog.

    Tasks (``tasks.max`` > 1): the work is split by database row and by schema (:mod:`connectors.postgres.tasks`);
    a task reads only its units and decides deletions only among the partitions it owns.
    """

    config_model: ClassVar[type[ConnectorConfig]] = PostgresCatalogConfig

    def __init__(self, config: PostgresCatalogConfig, ctx: ConnectorContext) -> None:
        super().__init__(config, ctx)
        self._scope = Scope.of(ctx.task_config)
        self._progress: dict[str, int] = {}

    def progress(self) -> dict[str, int]:
        """Databases done of those in scope, tables read of those listed (a database's tables are counted when its
        crawl reaches it, so the total grows database by database)."""
        return dict(self._progress)

    def task_configs(self, max_tasks: int, offsets: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
        """One task owning everything for ``max_tasks=1`` (no extra reads); else the units found in the source and
        in the stored offsets, dealt round robin."""
        if max_tasks == 1:
            return [{}]
        live = discover_units(self.config, self._databases(), self.ctx.access)
        return task_configs(live | stored_units(offsets), max_tasks)

    def owns(self, partition: Mapping[str, str]) -> bool:
        return self._scope.owns(partition)

    def _databases(self) -> list[str]:
        config = self.config
        return list(
            dict.fromkeys(config.databases if config.databases is not None else list_databases(config, self.ctx.access))
        )

    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Iterator[SourceRecord]:
        config, scope = self.config, self._scope
        offsets = scope.owned(offsets)
        events = EventFactory(self.ctx, config.platform, config.instance, crawl_version(offsets, _now_ms()))
        stored = group_by_database(offsets)
        wanted = scope.databases()
        databases = [d for d in self._databases() if wanted is None or d in wanted]
        self._progress.update(databases_total=len(databases), databases_done=0, tables_read=0, tables_total=0)
        for database in databases:
            started = time.monotonic()
            crawl = DatabaseCrawl(config, events, offsets, scope, progress=self._progress)
            with snapshot(config, database, self.ctx.access) as conn:
                yield from crawl.run(conn, database)
            gone = stale(stored.get(database, []), crawl.seen)
            yield from deletions(events, gone)
            self._progress["databases_done"] += 1
            log.info(
                "postgres.database_crawled",
                extra={
                    "database": database,
                    **crawl.counts,
                    "deleted": len(gone),
                    "elapsed_s": round(time.monotonic() - started, 3),
                },
            )
        for database in sorted(set(stored) - set(databases)):
            log.info("postgres.database_gone", extra={"database": database, "partitions": len(stored[database])})
            yield from deletions(events, stored[database])


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
