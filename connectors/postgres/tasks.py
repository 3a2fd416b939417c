"""How the crawler splits its work into tasks, and which partitions a task owns. Pure except :func:`discover_units`.

The unit of work is a database's own row ``(database,)`` or one schema ``(database, schema)`` with its tables and
views. A task owns a set of units and, through them, every partition under them: the database partition, the schema
partition and its tables' partitions. Units are dealt round robin over their sorted list, so the split is
deterministic, disjoint, complete and balanced (task sizes differ by at most one unit). The list is the union of the
units found in the source now and the units of the stored offsets, so a schema or database that disappeared still
has an owner, and only that owner emits its deletions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connectors.postgres.catalog import read_schemas, snapshot
from connectors.postgres.config import PostgresCatalogConfig
from control.connectors.plugin import InvalidPartitionKey, SourceAccess, parse_partition_key

Unit = tuple[str, ...]


class InvalidTaskConfig(ValueError):
    """A task configuration this crawler did not produce."""


def unit_of(partition: Mapping[str, str]) -> Unit | None:
    """The unit a partition belongs to; ``None`` for a partition that is not the crawler's."""
    database = partition.get("database")
    if database is None:
        return None
    schema = partition.get("schema")
    return (database,) if schema is None else (database, schema)


def split(units: Iterable[Unit], max_tasks: int) -> list[list[Unit]]:
    """Up to ``max_tasks`` groups of units, dealt round robin over the sorted units (at least one group)."""
    ordered = sorted(set(units))
    count = max(1, min(max_tasks, len(ordered)))
    return [ordered[i::count] for i in range(count)]


def stored_units(offsets: Iterable[str]) -> set[Unit]:
    """The units of stored partition keys (keys that are not the crawler's are left out)."""
    units: set[Unit] = set()
    for key in offsets:
        try:
            unit = unit_of(parse_partition_key(key))
        except InvalidPartitionKey:
            continue
        if unit is not None:
            units.add(unit)
    return units


def discover_units(config: PostgresCatalogConfig, databases: Iterable[str], access: SourceAccess) -> set[Unit]:
    """The units in the source now: each database and its selected schemas (one short read per database)."""
    units: set[Unit] = set()
    for database in databases:
        units.add((database,))
        with snapshot(config, database, access) as conn:
            units.update((database, row.name) for row in read_schemas(conn) if config.schema_selected(row.name))
    return units


def task_configs(units: Iterable[Unit], max_tasks: int) -> list[dict[str, Any]]:
    return [{"units": [list(unit) for unit in group]} for group in split(units, max_tasks)]


@dataclass(frozen=True)
class Scope:
    """What one task owns: a set of units, or everything (``units=None``: the connector run as a single task)."""

    units: frozenset[Unit] | None = None

    @classmethod
    def of(cls, task_config: Mapping[str, Any]) -> Scope:
        raw = task_config.get("units")
        if raw is None:
            return cls()
        if not isinstance(raw, list):
            raise InvalidTaskConfig("units: expected a list")
        units: set[Unit] = set()
        for unit in raw:
            ok = isinstance(unit, list) and 1 <= len(unit) <= 2 and all(isinstance(p, str) for p in unit)
            if not ok:
                raise InvalidTaskConfig("units: each unit is [database] or [database, schema]")
            units.add(tuple(unit))
        return cls(frozenset(units))

    def owns(self, partition: Mapping[str, str]) -> bool:
        if self.units is None:
            return True
        unit = unit_of(partition)
        return unit is not None and unit in self.units

    def databases(self) -> set[str] | None:
        """The databases this task has work in (``None``: all)."""
        return None if self.units is None else {unit[0] for unit in self.units}

    def owned(self, offsets: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
        """The offsets of the partitions this task owns (the runtime hands in only those; this makes sure)."""
        if self.units is None:
            return dict(offsets)
        out: dict[str, Mapping[str, Any]] = {}
        for key, offset in offsets.items():
            try:
                partition = parse_partition_key(key)
            except InvalidPartitionKey:
                continue
            if self.owns(partition):
                out[key] = offset
        return out
