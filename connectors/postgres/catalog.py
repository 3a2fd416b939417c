"""Streaming reads of one PostgreSQL database's catalog (``pg_catalog``), through server-side cursors.

Every read of a database happens in one ``REPEATABLE READ READ ONLY`` transaction (:func:`snapshot`), so the tables
read first and the columns read later come from the same snapshot: a table's fingerprint always matches the columns
that are emitted for it. Large results (tables, columns) are named cursors fetched ``fetch_size`` rows at a time, so
memory does not grow with the size of the catalog.

Comments are read with joins on ``pg_description`` rather than ``obj_description``/``col_description``: same result,
but one hash join instead of a SQL-function call per row (a million calls for a million columns).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import psycopg

from connectors.postgres.config import PostgresCatalogConfig
from control.connectors.plugin import SourceAccess
from control.connectors.reasons import SourceFailure
from metalake.net.ssrf import RefusedAddress

log = logging.getLogger(__name__)


class CatalogError(SourceFailure):
    """The catalog could not be read: an error class and a message of ours (the tenant sees them in the connector's
    status). The driver's text, which can tell a closed port from an open one and quote the peer's reply, goes to
    the operator log only, without the password."""


# One message for a closed port, a filtered one, a name that does not resolve and a port that answers but does not
# speak PostgreSQL: telling them apart would make the crawler a port scanner.
_UNREACHABLE = "cannot connect to a PostgreSQL server at {where} (not reachable, or not PostgreSQL)"
_AUTH_FAILED = "the server refused the configured user and password at {where}"
_NO_PASSWORD = "the server at {where} did not ask for a password; crawls authenticate with a password only"  # noqa: S105 - a message
_DATABASE = "the server at {where} refused to open database {database!r}"
_TLS_FAILED = (
    "the server at {where} did not prove its identity over TLS (config/sslmode verify-full: a certificate from a CA "
    "the worker trusts, for the configured host name; or the server has no TLS: see docs/connectors/postgres.md)"
)
# libpq's words for a server that spoke PostgreSQL but whose TLS could not be verified. Only those: a port that is not
# PostgreSQL fails the TLS negotiation too ("invalid response to SSL negotiation") and must stay "unreachable".
_TLS_MARKERS = (
    "certificate verify failed",
    "root certificate file",
    "does not match host name",
    "server does not support ssl",
    "could not get server's host name from server certificate",
)
# libpq's words (English: what an untranslated server and libpq write) for a failed authentication; anything else
# that fails a connection is "unreachable". A server that answers in another language lands there too, the safe side.
_AUTH_MARKERS = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "pg_hba.conf",
    "authentication method requirement",
    "server requested",
)


def _connect_failure(detail: str) -> str:
    lowered = detail.lower()
    if any(marker in lowered for marker in _AUTH_MARKERS) or ("role " in lowered and "does not exist" in lowered):
        return "authentication-failed"
    if "database " in lowered and "does not exist" in lowered:
        return "database-error"
    if any(marker in lowered for marker in _TLS_MARKERS):
        return "tls-failed"
    return "unreachable"


class DatabaseRow(NamedTuple):
    name: str
    owner: str
    comment: str | None
    encoding: str


class SchemaRow(NamedTuple):
    name: str
    owner: str
    comment: str | None


class TableRow(NamedTuple):
    """A table, view, materialized view, partitioned or foreign table, with a fingerprint of what hangs off it.

    ``columns_digest`` is a SHA-256 (hex) computed by the server over every column's ordinal, name, type, nullability
    and comment, so whether a table changed is known without reading its columns. ``foreign_keys`` lists
    ``(constraint, referenced schema, referenced table)`` sorted by constraint name.
    """

    oid: int
    schema: str
    name: str
    relkind: str
    comment: str | None
    owner: str
    estimated_rows: int
    is_partition: bool
    column_count: int
    columns_digest: str
    foreign_keys: list[tuple[str, str, str]]
    # Views and materialized views: an MD5 of the definition (``pg_get_viewdef``), so a redefined view is a change.
    definition_digest: str | None = None


class ViewRow(NamedTuple):
    """A view's definition with every relation name schema-qualified, and the relations it reads (from
    ``pg_depend``, the catalog's own record) as ``(schema, name, [column names by ordinal])``."""

    oid: int
    definition: str
    sources: list[tuple[str, str, list[str]]]


class ColumnRow(NamedTuple):
    table_oid: int
    ordinal: int
    name: str
    data_type: str
    not_null: bool
    comment: str | None


_DATABASE_SQL = """
SELECT d.datname, pg_get_userbyid(d.datdba), sd.description, pg_encoding_to_char(d.encoding)
FROM pg_database d
LEFT JOIN pg_shdescription sd ON sd.objoid = d.oid AND sd.classoid = 'pg_database'::regclass
WHERE d.datname = current_database()
"""

_DATABASES_SQL = """
SELECT datname FROM pg_database
WHERE NOT datistemplate AND datallowconn AND has_database_privilege(datname, 'CONNECT')
ORDER BY datname
"""

_SCHEMAS_SQL = """
SELECT n.nspname, pg_get_userbyid(n.nspowner), d.description
FROM pg_namespace n
LEFT JOIN pg_description d ON d.objoid = n.oid AND d.classoid = 'pg_namespace'::regclass AND d.objsubid = 0
ORDER BY n.nspname
"""

# Kept in one place: the digest in _TABLES_SQL and the rows of COLUMNS_SQL must describe a column the same way.
_COLUMN_FROM = """
FROM pg_attribute a
LEFT JOIN pg_description cd
  ON cd.objoid = a.attrelid AND cd.classoid = 'pg_class'::regclass AND cd.objsubid = a.attnum
"""
_COLUMN_WHERE = "a.attnum > 0 AND NOT a.attisdropped"

# %L quotes each value (NULL stays NULL), so no name or comment can forge another column's line. The f-strings below
# only splice the constant fragments above; values are always bound parameters.
_TABLES_SQL = f"""
SELECT c.oid, n.nspname, c.relname, c.relkind::text, d.description, pg_get_userbyid(c.relowner),
       c.reltuples::bigint, c.relispartition, cols.n, cols.digest, fks.fks,
       CASE WHEN c.relkind IN ('v', 'm') THEN md5(pg_get_viewdef(c.oid)) END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
CROSS JOIN LATERAL (
  SELECT count(*) AS n,
         encode(sha256(convert_to(coalesce(string_agg(
           format('%%s %%L %%L %%s %%L', a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  cd.description),
           E'\\n' ORDER BY a.attnum), ''), 'UTF8')), 'hex') AS digest
  {_COLUMN_FROM}
  WHERE a.attrelid = c.oid AND {_COLUMN_WHERE}
) cols
CROSS JOIN LATERAL (
  SELECT coalesce(json_agg(json_build_array(con.conname, rn.nspname, rc.relname) ORDER BY con.conname), '[]') AS fks
  FROM pg_constraint con
  JOIN pg_class rc ON rc.oid = con.confrelid
  JOIN pg_namespace rn ON rn.oid = rc.relnamespace
  WHERE con.conrelid = c.oid AND con.contype = 'f'
) fks
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = ANY(%(schemas)s)
ORDER BY n.nspname, c.relname
"""  # noqa: S608

# Same order as _TABLES_SQL (``name`` sorts in the C collation in both), so the two streams merge by position.
# Public because bench/crawler_bench.py times a bare loop over this very query as the floor.
COLUMNS_SQL = f"""
SELECT a.attrelid::bigint, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, cd.description
{_COLUMN_FROM}
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.attrelid = ANY(%(oids)s::oid[]) AND {_COLUMN_WHERE}
ORDER BY n.nspname, c.relname, a.attnum
"""


# The relations a view reads: what its rewrite rule depends on, but the view itself (the rule's own dependency).
_VIEWS_SQL = """
SELECT v.oid::bigint, pg_get_viewdef(v.oid), deps.sources
FROM pg_class v
CROSS JOIN LATERAL (
  SELECT coalesce(json_agg(json_build_array(rn.nspname, rc.relname, cols.names) ORDER BY rn.nspname, rc.relname),
                  '[]') AS sources
  FROM (
    SELECT DISTINCT d.refobjid
    FROM pg_rewrite r
    JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass
    WHERE r.ev_class = v.oid AND d.refobjid <> v.oid
  ) dep
  JOIN pg_class rc ON rc.oid = dep.refobjid AND rc.relkind IN ('r', 'p', 'v', 'm', 'f')
  JOIN pg_namespace rn ON rn.oid = rc.relnamespace
  CROSS JOIN LATERAL (
    SELECT coalesce(json_agg(a.attname::text ORDER BY a.attnum), '[]') AS names
    FROM pg_attribute a WHERE a.attrelid = rc.oid AND a.attnum > 0 AND NOT a.attisdropped
  ) cols
) deps
WHERE v.oid = ANY(%(oids)s::oid[]) AND v.relkind IN ('v', 'm')
ORDER BY v.oid
"""


def _connect(config: PostgresCatalogConfig, database: str, access: SourceAccess) -> psycopg.Connection[Any]:
    """A connection to ``database``: the host resolved once through the SSRF guard and the connection made to the
    address it checked, authenticated by password (unless the operator allows passwordless sources)."""
    where = f"{config.host}:{config.port}"
    fields = {"database": database, "host": config.host, "port": config.port}
    try:
        address = access.guard.resolve(config.host, config.port)
    except RefusedAddress as exc:
        log.warning("postgres.address_refused", extra={**fields, "reason": str(exc)})
        raise CatalogError(
            "address-refused", f"the host {config.host!r} resolves to an address connectors may not reach"
        ) from None
    except (OSError, UnicodeError) as exc:
        log.warning("postgres.unreachable", extra={**fields, "error": f"{type(exc).__name__}: {exc}"})
        raise CatalogError("unreachable", _UNREACHABLE.format(where=where)) from None
    require_password = not access.allow_passwordless
    try:
        kwargs = config.connect_kwargs(database, address, require_password=require_password, ca_file=access.tls_ca_file)
        conn = psycopg.connect(**kwargs)
    except psycopg.Error as exc:
        # The driver's message may quote the connection string: redacted, and ``from None`` keeps it out of chains.
        detail = config.redact(str(exc).strip())
        error_class = _connect_failure(detail)
        log.warning(
            "postgres.connect_failed",
            extra={**fields, "address": address, "error_class": error_class, "detail": detail},
        )
        message = {
            "authentication-failed": _AUTH_FAILED,
            "database-error": _DATABASE,
            "tls-failed": _TLS_FAILED,
        }.get(error_class, _UNREACHABLE)
        raise CatalogError(error_class, message.format(where=where, database=database)) from None
    if require_password and not conn.pgconn.used_password:
        # require_auth already refuses this (libpq 16+); checked again so an older libpq cannot let it through.
        conn.close()
        log.warning("postgres.passwordless_refused", extra={**fields, "address": address})
        raise CatalogError("authentication-failed", _NO_PASSWORD.format(where=where))
    return conn


def list_databases(config: PostgresCatalogConfig, access: SourceAccess) -> list[str]:
    """Non-template databases the configured user may connect to, read from ``maintenance_database``."""
    with _connect(config, config.maintenance_database, access) as conn:
        return [name for (name,) in _guarded(lambda: conn.execute(_DATABASES_SQL).fetchall(), config)]


@contextmanager
def snapshot(config: PostgresCatalogConfig, database: str, access: SourceAccess) -> Iterator[psycopg.Connection[Any]]:
    """A connection to ``database`` inside one read-only repeatable-read transaction; closed on exit.

    A driver error inside (a query refused, cancelled, or the connection lost) leaves as a :class:`CatalogError`.
    """
    conn = _connect(config, database, access)
    try:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.transaction():
            yield conn
    except psycopg.Error as exc:
        raise _query_failure(exc, config, database) from None
    finally:
        conn.close()


def _query_failure(exc: psycopg.Error, config: PostgresCatalogConfig, database: str) -> CatalogError:
    """A driver error after the connection was made, as a tenant sees it; the server's text goes to the log."""
    error_class = "timeout" if isinstance(exc, psycopg.errors.QueryCanceled) else "database-error"
    log.warning(
        "postgres.query_failed",
        extra={
            "database": database,
            "host": config.host,
            "port": config.port,
            "error_class": error_class,
            "sqlstate": exc.sqlstate,
            "detail": config.redact(str(exc).strip()),
        },
    )
    where = f"{config.host}:{config.port}"
    if error_class == "timeout":
        return CatalogError("timeout", f"a catalog query on database {database!r} at {where} was cancelled")
    return CatalogError("database-error", f"a catalog query on database {database!r} at {where} failed")


def _guarded(read: Callable[[], list[Any]], config: PostgresCatalogConfig) -> list[Any]:
    try:
        return read()
    except psycopg.Error as exc:
        raise _query_failure(exc, config, config.maintenance_database) from None


def read_database(conn: psycopg.Connection[Any]) -> DatabaseRow:
    row = conn.execute(_DATABASE_SQL).fetchone()
    if row is None:  # current_database() always exists while we are connected to it
        raise CatalogError("database-error", "the current database is missing from pg_database")
    return DatabaseRow(*row)


def read_schemas(conn: psycopg.Connection[Any]) -> list[SchemaRow]:
    """Every schema, sorted by name (a database holds few enough to list at once)."""
    return [SchemaRow(*row) for row in conn.execute(_SCHEMAS_SQL).fetchall()]


def _stream(conn: psycopg.Connection[Any], name: str, sql: str, params: dict[str, Any], size: int) -> Iterator[Any]:
    with conn.cursor(name=name) as cur:
        cur.itersize = size
        cur.execute(sql, params)
        yield from cur


def stream_tables(conn: psycopg.Connection[Any], schemas: list[str], fetch_size: int) -> Iterator[TableRow]:
    """Tables and views of ``schemas``, ordered by schema and name."""
    for row in _stream(conn, "metalake_tables", _TABLES_SQL, {"schemas": schemas}, fetch_size):
        oid, schema, name, relkind, comment, owner, rows, is_partition, n_columns, digest, fks, definition = row
        foreign_keys = [(c, s, t) for c, s, t in fks]
        yield TableRow(
            oid, schema, name, relkind, comment, owner, rows, is_partition, n_columns, digest, foreign_keys, definition
        )


def read_views(conn: psycopg.Connection[Any], view_oids: list[int]) -> dict[int, ViewRow]:
    """The definitions of the given views, every relation in them qualified with its schema.

    ``pg_get_viewdef`` leaves a relation unqualified when the session's ``search_path`` finds it; with an empty path
    (only ``pg_catalog`` is searched) it qualifies every other one, so no resolution rule has to be guessed. The path
    is set for these reads only and restored (``set_config(..., true)`` lasts until the transaction ends at most):
    ``format_type`` in the table and column reads depends on it. Call it between those streams, not during one.
    """
    if not view_oids:
        return {}
    row = conn.execute("SELECT current_setting('search_path')").fetchone()
    saved = str(row[0]) if row is not None else ""
    conn.execute("SELECT set_config('search_path', '', true)")
    try:
        rows = conn.execute(_VIEWS_SQL, {"oids": view_oids}).fetchall()
    finally:
        conn.execute("SELECT set_config('search_path', %(path)s, true)", {"path": saved})
    return {oid: ViewRow(oid, text, [(s, t, list(c)) for s, t, c in sources]) for oid, text, sources in rows}


# The relation kinds _TABLES_SQL lists (tests/unit/connectors/postgres checks they stay the same).
TABLE_RELKINDS = "('r', 'p', 'v', 'm', 'f')"
_COUNT_TABLES_SQL = f"""
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN {TABLE_RELKINDS} AND n.nspname = ANY(%(schemas)s)
"""  # noqa: S608 - a constant, no input


def count_tables(conn: psycopg.Connection[Any], schemas: list[str]) -> int:
    """How many tables and views :func:`stream_tables` will list for ``schemas`` (in the same snapshot): the total
    a crawl's progress counts towards."""
    row = conn.execute(_COUNT_TABLES_SQL, {"schemas": schemas}).fetchone()
    return int(row[0]) if row else 0


def stream_columns(conn: psycopg.Connection[Any], table_oids: list[int], fetch_size: int) -> Iterator[ColumnRow]:
    """Columns of the given tables, ordered like :func:`stream_tables` (schema, table), then by ordinal."""
    for row in _stream(conn, "metalake_columns", COLUMNS_SQL, {"oids": table_oids}, fetch_size):
        yield ColumnRow(*row)
