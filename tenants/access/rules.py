"""Trino access rules for every tenant, as a pure function, and the atomic writer of the rules file.

Trino's file-based system access control reads one JSON file (``security.config-file``) and reloads it every
``security.refresh-period``. :func:`build_rules` renders it from (service users, tenants, each tenant's masked
columns): the service users keep full access; a tenant's users (:func:`tenants.naming.trino_user`, plain and
``.pii``, and the administrators' ``.admin`` and ``.admin.pii``) may only SELECT from tables in the tenant's schema;
the plain users read PII-tagged columns through a mask. The tenant's ``audit`` and ``_dlq`` (raw payloads)
(:data:`tenants.naming.ADMIN_ONLY_TABLES`) are for the ``.admin`` users only, as the API keeps them to tenant:admin.
Everything the rules do not grant is denied: other schemas and catalogs, the ``system`` catalog's tables (Trino
itself opens that catalog to every user, so tenants can list it, but no table rule lets them read it), procedures,
table functions (only ``system.builtin`` functions may run), other users' queries. Rules match first-to-last, so the
per-table rules carrying masks come before the tenant's schema-wide rule. Before them all, one rule denies the
tenant users every connector metadata table (a name holding ``$``): masks do not reach them, and Delta's
``$transactions`` shows each file's min/max column statistics in clear. See docs/serving.md.

A pooled tenant's schema holds ``SECURITY DEFINER`` views over the shared tables of schema ``_pooled``
(``tenants.lake_catalog``): a view runs with its owner's (the platform user's) rights, so the tenant's users need
SELECT on their own schema only, and no rule ever names ``_pooled``: it, its tables and their ``$history``, ``$files``,
``$partitions`` and ``$properties`` tables stay denied (and unlisted) for every tenant user. A mask is a rule on the
view's column, which Trino applies like one on a table's.

Impersonation (an authenticated user running a query as another Trino user): the ``impersonator`` (the platform
user, ``trino.user``, as which the API runs a tenant's SQL) may act as tenants' users only; nobody else may
impersonate anyone, and nobody may act as a service user other than itself.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from metalake.urn import AssetUrn, InvalidUrn
from tenants.naming import ADMIN_ONLY_TABLES, TRINO_POOLED_SCHEMA, trino_user, validate_tenant_id
from tenants.trino_schemas import SchemaNamer

MaskStyle = Literal["null", "redact", "hash"]
REDACTED = "****"
_ALL_TABLE_PRIVILEGES = ["SELECT", "INSERT", "DELETE", "UPDATE", "OWNERSHIP", "GRANT_SELECT"]
# A connector's hidden table (``<table>$<kind>``): Trino table names never hold '$' otherwise.
_METADATA_TABLE = r".*\$.*"
# Every tenant's Trino user (tenants.naming.trino_user): ``tenant.<id>``, ``tenant.<id>.pii``, ``tenant.<id>.admin``
# and ``tenant.<id>.admin.pii``, ids as validated. Trino matches it against the whole name; it has no '$' anchor,
# because Trino expands '$<n>' in ``new_user`` as a group of ``original_user``.
TENANT_USERS = r"tenant\.[a-z][a-z0-9-]{2,39}(\.admin)?(\.pii)?"
_NON_ADMIN_TENANT_USERS = r"tenant\.[a-z][a-z0-9-]{2,39}(\.pii)?"
# The system session properties a tenant's users may set: the SQL endpoint's own shorter run time, which lifts no
# limit (``query.max-execution-time`` in Trino's config bounds every tenant query, and they may not change it).
TENANT_SESSION_PROPERTIES = ("query_max_run_time",)


@dataclass(frozen=True)
class TrinoColumn:
    """A column of a table in Trino (lowercase, as Trino names them)."""

    schema: str
    table: str
    column: str | None  # None: every column of the table (the table itself is tagged)


@dataclass(frozen=True)
class TenantAccess:
    """One tenant's input to the rules: its id and the masked columns per table, each with its Trino type if known
    (``None`` when the table is not registered yet or the type is unknown: the mask is then NULL, valid for any type).
    """

    tenant: str
    masked: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_tenant_id(self.tenant)


def is_masked_tag(tag: str, patterns: Iterable[str]) -> bool:
    """Whether ``tag`` is one of the PII tags (fnmatch patterns, case-sensitive, e.g. ``GDPR.*``)."""
    return any(fnmatchcase(tag, pattern) for pattern in patterns)


@dataclass(frozen=True)
class MirroredSchema:
    """A schema of another system whose tables the tenant mirrors, under the same names, in its Trino schema: a tag
    on ``urn:metalake:<platform>:<instance>/<database>/<schema>/<table>/<column>`` then masks that column there too.
    A tenant declares them in its registry settings, ``{"trino_sources": [{"platform", "instance", "database",
    "schema"}]}``."""

    platform: str
    instance: str
    database: str
    schema: str

    @property
    def urn_prefix(self) -> str:
        return str(AssetUrn(self.platform, self.instance, (self.database, self.schema))) + "/"


def mirrored_schemas(tenant_settings: Mapping[str, Any]) -> list[MirroredSchema]:
    """The tenant's ``trino_sources``; entries that are not four non-empty strings (or not a valid URN) are ignored."""
    entries = tenant_settings.get("trino_sources")
    out: list[MirroredSchema] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        values = [entry.get(k) for k in ("platform", "instance", "database", "schema")]
        if not all(isinstance(v, str) and v for v in values):
            continue
        source = MirroredSchema(*(str(v) for v in values))
        try:
            source.urn_prefix  # noqa: B018 - validates the platform and instance
        except InvalidUrn:
            continue
        out.append(source)
    return out


def column_for_urn(
    urn: str,
    *,
    schema: str,
    catalog: str,
    instance: str,
    mirrored: Iterable[MirroredSchema] = (),
    former: Iterable[str] = (),
) -> TrinoColumn | None:
    """The Trino column (or whole table) an asset URN names inside the tenant's ``schema``
    (``tenants.trino_schemas``), or None. A URN naming one of the ``former`` names of the tenant's schema (tagged
    before the schema moved to its keyed name) names the same column: its mask must survive the move.

    ``urn:metalake:trino:<instance>/<catalog>/<schema>/<table>[/<column>]``: the URN scheme's database is the Trino
    catalog; or a table of a schema the tenant mirrors (:class:`MirroredSchema`). URNs of other platforms, instances,
    catalogs or of another tenant's schema map to nothing: a tenant's tags never change what another tenant's users
    see.
    """
    try:
        parsed = AssetUrn.parse(urn)
    except InvalidUrn:
        return None
    if len(parsed.path) < 3:
        return None
    own = (
        parsed.platform == "trino"
        and parsed.instance == instance
        and parsed.path[0] == catalog
        and parsed.path[1].lower() in {schema, *former}
    )
    if not own and not any(
        (parsed.platform, parsed.instance, parsed.path[0], parsed.path[1])
        == (m.platform, m.instance, m.database, m.schema)
        for m in mirrored
    ):
        return None
    table = parsed.path[2].lower()
    column = parsed.path[3].lower() if len(parsed.path) == 4 else None
    return TrinoColumn(schema, table, column)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def mask_expression(column: str, data_type: str | None, style: MaskStyle) -> str:
    """The SQL the masked column reads as. NULL fits every type; strings get a constant or a hash if asked."""
    is_text = data_type is not None and data_type.lower().startswith("varchar")
    if style == "null" or not is_text:
        return "NULL"
    if style == "hash":
        return f"to_hex(sha256(to_utf8({_ident(column)})))"
    return f"'{REDACTED}'"


def _exact(*names: str) -> str:
    """A regex matching exactly these names (rules match users and objects by full regex)."""
    return "^(" + "|".join(re.escape(n) for n in sorted(set(names))) + ")$"


def build_rules(
    service_users: Iterable[str],
    tenants: Iterable[TenantAccess],
    *,
    catalog: str,
    schemas: SchemaNamer,
    mask_style: MaskStyle = "redact",
    impersonator: str | None = None,
) -> dict[str, Any]:
    """The rules JSON for Trino's file-based system access control. Pure and deterministic (sorted output).
    ``schemas`` names each tenant's schema (the deployment's key: ``tenants.trino_schemas.schema_namer``).

    ``impersonator`` may run queries as any tenant's user (:data:`TENANT_USERS`); no other impersonation is allowed.
    """
    accesses = sorted(tenants, key=lambda t: t.tenant)
    rules = _service_rules(_exact(*service_users), impersonator)
    if accesses:
        # Before every tenant rule: the Delta connector's metadata tables (``t$history``, ``t$transactions``,
        # ``t$partitions``, ``t$properties``...) carry no column masks, and ``$transactions`` holds each file's
        # min/max statistics, i.e. masked values in clear. Their names would otherwise match the schema-wide rule.
        every_tenant_user = _exact(*(u for a in accesses for u in tenant_users(a.tenant)))
        rules["tables"].append({"user": every_tenant_user, "table": _METADATA_TABLE, "privileges": []})
    for access in accesses:
        rules["tables"] += _tenant_table_rules(access, schemas.schema(access.tenant), catalog, mask_style)
    if accesses:
        users = [u for a in accesses for u in tenant_users(a.tenant)]
        rules["catalogs"].append({"user": _exact(*users), "catalog": _exact(catalog), "allow": "read-only"})
        rules["queries"].append({"user": _exact(*users), "allow": ["execute"]})
    return rules


def build_shared_rules(
    service_users: Iterable[str], *, catalog: str, impersonator: str | None = None
) -> dict[str, Any]:
    """The rules file of ``access.mode = "opa"``: what every tenant's user may do, naming no tenant, so it neither
    grows nor changes with the tenants. Which schema a tenant's user reaches, whether its tenant is suspended, and
    its masks are the OPA decisions' (``processors.access.lake_decisions``); Trino needs both to allow. Pure."""
    rules = _service_rules(_exact(*service_users), impersonator)
    where = _exact(catalog)
    rules["tables"] += [
        {"user": TENANT_USERS, "table": _METADATA_TABLE, "privileges": []},
        {"user": _NON_ADMIN_TENANT_USERS, "catalog": where, "table": _exact(*ADMIN_ONLY_TABLES), "privileges": []},
        {"user": TENANT_USERS, "catalog": where, "schema": _exact(TRINO_POOLED_SCHEMA), "privileges": []},
        {"user": TENANT_USERS, "catalog": where, "privileges": ["SELECT"]},
    ]
    rules["catalogs"].append({"user": TENANT_USERS, "catalog": where, "allow": "read-only"})
    rules["queries"].append({"user": TENANT_USERS, "allow": ["execute"]})
    return rules


def _service_rules(services: str, impersonator: str | None) -> dict[str, Any]:
    """What both renderings share: the service users' full access, functions, procedures, system information,
    impersonation and session properties; the tenant users' rules are appended to ``catalogs``, ``tables`` and
    ``queries``."""
    rules: dict[str, Any] = {
        "catalogs": [{"user": services, "allow": "all"}],
        "schemas": [{"user": services, "owner": True}],
        "tables": [{"user": services, "privileges": _ALL_TABLE_PRIVILEGES}],
        "functions": [
            {"user": services, "privileges": ["EXECUTE", "GRANT_EXECUTE", "OWNERSHIP"]},
            # Built-in scalar and aggregate functions only: catalog table functions (e.g. Delta's table_changes,
            # which reads the change feed) are not granted to tenants.
            {"catalog": "system", "schema": "builtin", "privileges": ["EXECUTE"]},
        ],
        "procedures": [{"user": services, "privileges": ["EXECUTE"]}],
        "system_information": [{"user": services, "allow": ["read", "write"]}],
        # Service users see and kill every query; the users of the tenants listed (active ones: a suspended or
        # deleting tenant has none) run queries and see their own; anyone else runs nothing, not even `SELECT 1`.
        "queries": [{"user": services, "allow": ["execute", "kill", "view"]}],
        # First match wins; the last rule is Trino's default made explicit (no rule: no impersonation).
        "impersonation": [{"original_user": ".*", "new_user": ".*", "allow": False}],
        **_session_property_rules(services),
    }
    if impersonator:
        allowed = {"original_user": _exact(impersonator), "new_user": TENANT_USERS, "allow": True}
        rules["impersonation"].insert(0, allowed)
    return rules


def _session_property_rules(services: str) -> dict[str, Any]:
    """Without these sections Trino lets every user set every session property: a tenant's own tool could lift its
    query limits (query_max_execution_time, the memory limits, resource_overcommit). Tenants' users may set only what
    the SQL endpoint sets for them (a shorter run time); Trino's config caps the execution time."""
    return {
        "system_session_properties": [
            {"user": services, "allow": True},
            {"user": TENANT_USERS, "property": _exact(*TENANT_SESSION_PROPERTIES), "allow": True},
            {"allow": False},
        ],
        "catalog_session_properties": [{"user": services, "allow": True}, {"allow": False}],
    }


def tenant_users(tenant: str) -> list[str]:
    """Every Trino user of the tenant: plain, PII, and the administrators' two."""
    return [trino_user(tenant, pii=p, admin=a) for a in (False, True) for p in (False, True)]


def _tenant_table_rules(
    access: TenantAccess, tenant_schema: str, catalog: str, mask_style: MaskStyle
) -> list[dict[str, Any]]:
    """One tenant's table rules, in Trino's first-match order: the admin-only tables denied to its ordinary users,
    then the PII users' schema, the plain users' masked tables, the plain users' schema."""
    schema, where = _exact(tenant_schema), _exact(catalog)
    plain, pii = trino_user(access.tenant), trino_user(access.tenant, pii=True)
    admin, admin_pii = trino_user(access.tenant, admin=True), trino_user(access.tenant, pii=True, admin=True)
    out: list[dict[str, Any]] = [
        # No privilege at all: the tables are then also left out of SHOW TABLES and information_schema for them.
        {
            "user": _exact(plain, pii),
            "catalog": where,
            "schema": schema,
            "table": _exact(*ADMIN_ONLY_TABLES),
            "privileges": [],
        },
        {"user": _exact(pii, admin_pii), "catalog": where, "schema": schema, "privileges": ["SELECT"]},
    ]
    for table in sorted(access.masked):
        columns = access.masked[table]
        out.append(
            {
                "user": _exact(plain, admin),
                "catalog": where,
                "schema": schema,
                "table": _exact(table),
                "privileges": ["SELECT"],
                "columns": [
                    {"name": name, "mask": mask_expression(name, columns[name], mask_style)} for name in sorted(columns)
                ],
            }
        )
    out.append({"user": _exact(plain, admin), "catalog": where, "schema": schema, "privileges": ["SELECT"]})
    return out


def write_rules(path: Path, rules: Mapping[str, Any]) -> bool:
    """Write the rules atomically (temp file in the same folder, then rename): Trino never reads half a file.

    Returns False without touching the file when it already holds exactly these rules.
    """
    text = json.dumps(rules, indent=1, sort_keys=True) + "\n"
    if path.is_file() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".rules-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True
