"""The tenants' (and the platform's) Delta ``audit`` tables: the one schema, and their reads and appends with
delta-rs (``deltalake``), never Spark. The admin API audits every admin action here; ``metalake lake erase`` appends
its row the same way.

Columns: ``at, actor, action, target_hash, result, counts``. A row never holds an erased value: the target is a
sha256 hash and ``counts`` holds numbers only. A blind append commits in milliseconds and conflicts with no other
writer (Delta retries an append that lost a version race), so an admin action's row is durable before the API
answers. Needs ``deltalake`` (the api and spark extras).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from arro3.core import Array, DataType, Field, Schema, Table
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from pymongo.database import Database

from metalake.lake_uri import LakeRoot, delta_rs_table_uri, delta_rs_uri
from tenants.naming import names_for
from tenants.registry import TenantRegistry

TIMESTAMP = DataType.timestamp("us", tz="UTC")
COLUMNS = ("at", "actor", "action", "target_hash", "result", "counts")
SCHEMA = Schema(
    [
        Field("at", TIMESTAMP, nullable=True),
        Field("actor", DataType.string(), nullable=True),
        Field("action", DataType.string(), nullable=True),
        Field("target_hash", DataType.string(), nullable=True),
        Field("result", DataType.string(), nullable=True),
        Field("counts", DataType.string(), nullable=True),
    ]
)
# Values that end up in the SQL text of a read: only these alphabets get there (delta-rs' SQL takes no parameters).
ACTION_PATTERN = re.compile(r"[a-z][a-z0-9_.-]{0,99}")
HASH_PATTERN = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class AuditRow:
    at: datetime
    actor: str
    action: str
    target_hash: str
    result: str
    counts: Mapping[str, int]


def _micros(at: datetime) -> int:
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1_000_000)


def _table(rows: Sequence[AuditRow]) -> Table:
    at = Array([_micros(r.at) for r in rows], DataType.int64()).cast(TIMESTAMP)

    def strings(values: Sequence[str]) -> Array:
        return Array(list(values), DataType.string())

    return Table.from_pydict(
        {
            "at": at,
            "actor": strings([r.actor for r in rows]),
            "action": strings([r.action for r in rows]),
            "target_hash": strings([r.target_hash for r in rows]),
            "result": strings([r.result for r in rows]),
            "counts": strings([json.dumps(dict(r.counts), sort_keys=True) for r in rows]),
        },
        schema=SCHEMA,
    )


# The same table properties whether the first append or ensure_table creates the table.
_CONFIGURATION = {"delta.enableDeletionVectors": "false"}


# delta-rs' storage_options for the lake's store (``metalake.s3.delta_rs_storage_options``); None on a local lake.
StorageOptions = Mapping[str, str] | None


def _options(storage: StorageOptions) -> dict[str, str] | None:
    return dict(storage) if storage else None


def append(path: LakeRoot, rows: Sequence[AuditRow], storage: StorageOptions = None) -> None:
    """Append rows, creating the table (this schema, no partitions) if it does not exist yet."""
    for row in rows:
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in row.counts.values()):
            raise TypeError("audit counts must be integers")
    write_deltalake(
        delta_rs_table_uri(path),
        _table(rows),
        mode="append",
        configuration=_CONFIGURATION,
        storage_options=_options(storage),
    )


def ensure_table(path: LakeRoot, storage: StorageOptions = None) -> bool:
    """Create the empty table (this schema, no partitions) unless it exists, so Trino can register it before the
    first row; True if it was created. Two creators racing: the loser's commit of version 0 fails, and the table
    exists, which is all either wanted."""
    uri, options = delta_rs_table_uri(path), _options(storage)
    if DeltaTable.is_deltatable(uri, storage_options=options):
        return False
    try:
        DeltaTable.create(uri, SCHEMA, mode="ignore", configuration=_CONFIGURATION, storage_options=options)
    except Exception:
        if not DeltaTable.is_deltatable(uri, storage_options=options):
            raise
        return False
    return True


# The query engine holds timestamps as nanoseconds since 1970 in 64 bits; no audit row lies outside these bounds,
# so a filter beyond them is clamped to them (same answer, no overflow error).
_EARLIEST = datetime(1678, 1, 1, tzinfo=UTC)
_LATEST = datetime(2262, 1, 1, tzinfo=UTC)


def _literal(at: datetime) -> str:
    utc = min(max(at.astimezone(UTC), _EARLIEST), _LATEST)
    return f"TIMESTAMP '{utc:%Y-%m-%dT%H:%M:%S.%f}Z'"


@dataclass(frozen=True)
class AuditQuery:
    """Filters of a read; ``before`` (at, action, target_hash) resumes a page after the last row of the previous."""

    action: str | None = None
    target_hash: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    before: tuple[datetime, str, str] | None = None
    limit: int = 50
    # Rows whose target is any of these too: one target's hashes, plain and keyed (``control.erased``).
    target_hashes: tuple[str, ...] = ()

    def where(self) -> str:
        clauses = []
        if self.action is not None:
            if not ACTION_PATTERN.fullmatch(self.action):
                raise ValueError("action: not an action name")
            # An action filter ending in '.' selects a family (``connector.`` matches connector.create, ...).
            clauses.append(
                f"starts_with(action, '{self.action}')" if self.action.endswith(".") else f"action = '{self.action}'"
            )
        hashes = sorted({*([self.target_hash] if self.target_hash is not None else []), *self.target_hashes})
        if hashes:
            if not all(HASH_PATTERN.fullmatch(h) for h in hashes):
                raise ValueError("target_hash: not a sha256 hex digest")
            clauses.append(f"target_hash IN ({', '.join(repr(h) for h in hashes)})")
        if self.since is not None:
            clauses.append(f"at >= {_literal(self.since)}")
        if self.until is not None:
            clauses.append(f"at < {_literal(self.until)}")
        if self.before is not None:
            at, action, target = self.before
            if not ACTION_PATTERN.fullmatch(action) or not HASH_PATTERN.fullmatch(target):
                raise ValueError("cursor: not a cursor of this listing")
            t = _literal(at)
            tie = f"action > '{action}' OR (action = '{action}' AND target_hash > '{target}')"
            clauses.append(f"(at < {t} OR (at = {t} AND ({tie})))")
        return " AND ".join(clauses) or "TRUE"


def read(path: LakeRoot, query: AuditQuery, storage: StorageOptions = None) -> list[AuditRow]:
    """Newest first (ties by action, then target hash). An absent table reads as empty."""
    uri, options = delta_rs_uri(path), _options(storage)
    if not DeltaTable.is_deltatable(uri, storage_options=options):
        return []
    table = DeltaTable(uri, storage_options=options)
    sql = (
        "SELECT at, actor, action, target_hash, result, counts FROM audit "  # noqa: S608 - validated literals only
        f"WHERE {query.where()} ORDER BY at DESC, action ASC, target_hash ASC LIMIT {int(query.limit)}"
    )
    result = QueryBuilder().register("audit", table).execute(sql).read_all()
    columns = {name: result.column(name).to_pylist() for name in COLUMNS}
    rows = []
    for i in range(result.num_rows):
        at = columns["at"][i]
        rows.append(
            AuditRow(
                at=at if at.tzinfo else at.replace(tzinfo=UTC),
                actor=columns["actor"][i] or "",
                action=columns["action"][i] or "",
                target_hash=columns["target_hash"][i] or "",
                result=columns["result"][i] or "",
                counts=json.loads(columns["counts"][i] or "{}"),
            )
        )
    return rows


# Results of an action (the admin API's and ``metalake lake erase``'s rows use the same words).
ACCEPTED = "accepted"
REFUSED = "refused"


class AuditLog(Protocol):
    def record(self, tenant: str, rows: Sequence[AuditRow]) -> None: ...


def target_hash(target: str) -> str:
    """The sha256 a row stores for its target (a URN, a tenant id, a connector name...): never the target itself."""
    return hashlib.sha256(target.encode()).hexdigest()


def tenant_audit_path(control: Database[Any], lake_root: LakeRoot, tenant: str) -> LakeRoot:
    """The tenant's ``audit`` table, under its own lake root if the registry gives it one."""
    record = TenantRegistry(control).get(tenant)
    names = record.names(lake_root) if record is not None else names_for(tenant, lake_root)
    return names.delta_path("audit")


class TenantAuditLog:
    """Appends rows to tenants' audit tables for a deployable without the admin API's context (the connector
    worker's ingest API audits the PII changes it accepts or refuses). The lake root is read at the first row: a
    worker configured without one fails only when it has something to audit."""

    def __init__(
        self, control: Database[Any], lake_root: Callable[[], LakeRoot], storage: StorageOptions = None
    ) -> None:
        self._control = control
        self._lake_root = lake_root
        self._storage = storage

    def record(self, tenant: str, rows: Sequence[AuditRow]) -> None:
        """Append ``rows`` in one commit; returns once it is durable (raises otherwise)."""
        if rows:
            append(tenant_audit_path(self._control, self._lake_root(), tenant), rows, self._storage)


def audit_row(actor: str, action: str, target: str, result: str, counts: Mapping[str, int] | None = None) -> AuditRow:
    """A row about ``target`` (stored hashed) done now by ``actor``."""
    if not ACTION_PATTERN.fullmatch(action):
        raise ValueError(f"audit action {action!r}: lowercase words separated by '.'")
    return AuditRow(datetime.now(UTC), actor, action, target_hash(target), result, dict(counts or {}))
