"""PII enforced in a customer's own Trino: the engines a tenant registers, and the decisions Trino's OPA access
control plugin asks for (docs/enforcement.md).

An *engine* is one customer Trino. Its registration says which Trino catalog reads which catalogued source (URN
platform + instance + database), which Trino users and groups see PII in clear, the mask style and the tag that
marks a consent column. Trino authenticates with the engine's key, which is part of the policy URIs it is configured
with (its OPA client sends no header of ours: see docs/enforcement.md); the control plane stores the key's SHA-256
only and compares it in constant time.

Decisions read the tenant's live tags (direct ``classifications`` and ``propagated_tags``) of the table asked about,
cached per table for ``enforcement.cache_ttl_s``: Trino asks several times per query, and a tag change is enforced
within that delay.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict

from pydantic import SecretStr
from pymongo.collection import Collection
from pymongo.database import Database

from catalog.projection import CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION
from control.auth.protective import ENGINES_COLLECTION
from metalake.cache import TtlCache
from metalake.mongo import typed_collection
from metalake.urn import AssetUrn, InvalidUrn
from tenants.access.rules import is_masked_tag, mask_expression
from tenants.naming import validate_tenant_id

ENGINES = ENGINES_COLLECTION
ENGINE_KEY_PREFIX = "mle"
MaskStyle = Literal["null", "redact", "hash"]


class EngineDoc(TypedDict):
    _id: str
    tenant: str
    engine_id: str
    name: str
    sha256: str
    created_at: datetime
    catalogs: list[dict[str, str]]
    pii_users: list[str]
    pii_groups: list[str]
    mask_style: str
    consent_tag: str | None
    impersonators: list[str]
    operators: list[str]


@dataclass(frozen=True)
class CatalogSource:
    """A Trino catalog of the engine and the catalogued source it reads: ``urn:metalake:<platform>:<instance>/
    <database>/<schema>/<table>/<column>`` is ``<catalog>.<schema>.<table>.<column>`` in the engine."""

    catalog: str
    platform: str
    instance: str
    database: str

    def table_urn(self, schema: str, table: str) -> str:
        return str(AssetUrn(self.platform, self.instance, (self.database, schema, table)))


@dataclass(frozen=True)
class Engine:
    tenant: str
    engine_id: str
    name: str
    created_at: datetime
    catalogs: tuple[CatalogSource, ...]
    pii_users: frozenset[str] = frozenset()
    pii_groups: frozenset[str] = frozenset()
    mask_style: MaskStyle = "redact"
    consent_tag: str | None = None
    # Who may impersonate, and who may see and kill others' queries (api.services.opa_decisions).
    impersonators: frozenset[str] = frozenset()
    operators: frozenset[str] = frozenset()

    def source_for(self, catalog: str) -> CatalogSource | None:
        return next((c for c in self.catalogs if c.catalog == catalog), None)

    def sees_pii(self, user: str, groups: Iterable[str]) -> bool:
        """Whether this Trino identity reads PII in clear: named in ``pii_users``, or in one of ``pii_groups``."""
        return user in self.pii_users or not self.pii_groups.isdisjoint(groups)


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _engine(doc: Mapping[str, Any]) -> Engine:
    style = str(doc.get("mask_style", "redact"))
    return Engine(
        tenant=str(doc["tenant"]),
        engine_id=str(doc["engine_id"]),
        name=str(doc.get("name", "")),
        created_at=doc["created_at"],
        catalogs=tuple(CatalogSource(**c) for c in doc.get("catalogs", [])),
        pii_users=frozenset(doc.get("pii_users", [])),
        pii_groups=frozenset(doc.get("pii_groups", [])),
        mask_style=style if style in ("null", "redact", "hash") else "redact",  # type: ignore[arg-type]
        consent_tag=doc.get("consent_tag"),
        impersonators=frozenset(doc.get("impersonators", [])),
        operators=frozenset(doc.get("operators", [])),
    )


def parse_engine_key(key: str) -> tuple[str, str] | None:
    """``(engine_id, secret)`` of a key shaped ``mle_<engine id>_<secret>``, or ``None``."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != ENGINE_KEY_PREFIX or not re.fullmatch(r"[0-9a-f]{16}", parts[1]) or not parts[2]:
        return None
    return parts[1], parts[2]


class EngineStore:
    """The engines of every tenant, in the control plane's ``engines`` collection. Thread-safe."""

    def __init__(self, database: Database[Any]) -> None:
        self._engines: Collection[EngineDoc] = typed_collection(database, ENGINES, EngineDoc)

    def create(  # noqa: PLR0913
        self,
        tenant: str,
        *,
        name: str,
        catalogs: Sequence[CatalogSource],
        pii_users: Iterable[str] = (),
        pii_groups: Iterable[str] = (),
        mask_style: MaskStyle = "redact",
        consent_tag: str | None = None,
        impersonators: Iterable[str] = (),
        operators: Iterable[str] = (),
    ) -> tuple[Engine, SecretStr]:
        """A new engine of ``tenant`` and its key: only the key's SHA-256 is stored, so show the key once."""
        validate_tenant_id(tenant)
        engine_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        doc: EngineDoc = {
            "_id": f"engine/{engine_id}",
            "tenant": tenant,
            "engine_id": engine_id,
            "name": name,
            "sha256": _sha256(secret),
            "created_at": datetime.now(UTC),
            "catalogs": [c.__dict__ for c in catalogs],
            "pii_users": sorted(set(pii_users)),
            "pii_groups": sorted(set(pii_groups)),
            "mask_style": mask_style,
            "consent_tag": consent_tag,
            "impersonators": sorted(set(impersonators)),
            "operators": sorted(set(operators)),
        }
        self._engines.insert_one(doc)
        return _engine(doc), SecretStr(f"{ENGINE_KEY_PREFIX}_{engine_id}_{secret}")

    def count(self, tenant: str) -> int:
        return self._engines.count_documents({"tenant": tenant})

    def list(self, tenant: str) -> list[Engine]:
        docs = self._engines.find({"tenant": tenant})
        return sorted((_engine(d) for d in docs), key=lambda e: (e.created_at, e.engine_id))

    def delete(self, tenant: str, engine_id: str) -> bool:
        """Remove one of the tenant's engines (its key then fails within ``enforcement.cache_ttl_s``)."""
        return self._engines.delete_one({"_id": f"engine/{engine_id}", "tenant": tenant}).deleted_count == 1

    def check_key(self, key: str) -> Engine | None:
        """The engine a key belongs to, or ``None``; the secret is compared in constant time."""
        parsed = parse_engine_key(key)
        if parsed is None:
            return None
        engine_id, secret = parsed
        doc = self._engines.find_one({"_id": f"engine/{engine_id}"})
        if doc is None or not hmac.compare_digest(_sha256(secret), str(doc.get("sha256", ""))):
            return None
        return _engine(doc)


@dataclass(frozen=True)
class TableTags:
    """The live tags (direct and propagated) of one table and of its columns (names lower-cased, as Trino reports
    them)."""

    table: frozenset[str] = frozenset()
    columns: Mapping[str, frozenset[str]] = field(default_factory=dict)


def load_table_tags(db: Database[Any], table_urn: str) -> TableTags:
    """One query per tag collection: the table's URN and every URN under it. Names are matched case-insensitively
    (Trino lower-cases them; the source may not)."""
    pattern = "^" + re.escape(table_urn) + "(/|$)"
    query = {"deleted": {"$ne": True}, "urn": {"$regex": pattern, "$options": "i"}}
    table: set[str] = set()
    columns: dict[str, set[str]] = {}
    depth = len(AssetUrn.parse(table_urn).path)
    for name in (CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION):
        for doc in db[name].find(query, {"_id": 0, "urn": 1, "tag": 1}):
            tag, urn = doc.get("tag"), doc.get("urn")
            if not isinstance(tag, str) or not isinstance(urn, str):
                continue
            try:
                path = AssetUrn.parse(urn).path
            except InvalidUrn:
                continue
            if len(path) == depth:
                table.add(tag)
            elif len(path) == depth + 1:
                columns.setdefault(path[-1].lower(), set()).add(tag)
    return TableTags(frozenset(table), {k: frozenset(v) for k, v in columns.items()})


class TagCache:
    """Table tags per ``(tenant, table URN)`` for ``ttl_s`` seconds, at most ``max_entries`` (``metalake.cache``: a
    full cache starts over). A miss loads outside the lock (two concurrent misses of one table may both load)."""

    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._cache: TtlCache[tuple[str, str], TableTags] = TtlCache(ttl_s, max_entries=max_entries, clock=clock)

    def get(self, tenant: str, table_urn: str, load: Callable[[], TableTags]) -> TableTags:
        return self._cache.get((tenant, table_urn), load)

    def get_many(
        self, tenant: str, urns: Sequence[str], load: Callable[[Sequence[str]], Mapping[str, TableTags]]
    ) -> dict[str, TableTags]:
        """The tags of each table; the tables missing or expired are loaded together, in one call of ``load``."""

        def load_keys(keys: list[tuple[str, str]]) -> dict[tuple[str, str], TableTags]:
            loaded = load([urn for _, urn in keys])
            return {(tenant, urn): loaded[urn] for _, urn in keys}

        found = self._cache.get_many([(tenant, urn) for urn in urns], load_keys)
        return {urn: tags for (_, urn), tags in found.items()}


class _Refused(Exception):
    """A key the engine store does not know: not a value to cache among the valid ones."""


class EngineCache:
    """Checked engine keys for ``ttl_s`` seconds (by the key's SHA-256, never the key): a revoked engine is refused
    within that delay. Valid and refused keys are kept in two caches, each at most ``max_entries``: a flood of made-up
    keys only ever empties the refused keys' cache, never the one of real engines."""

    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._valid: TtlCache[str, Engine] = TtlCache(ttl_s, max_entries=max_entries, clock=clock)
        self._refused: TtlCache[str, bool] = TtlCache(ttl_s, max_entries=max_entries, clock=clock)

    def known(self, key: str) -> bool:
        """Whether ``key`` is a valid key checked within the TTL (its caller skips the throttle of unknown keys)."""
        return self._valid.fresh(_sha256(key))

    def get(self, key: str, check: Callable[[str], Engine | None]) -> Engine | None:
        digest = _sha256(key)
        if self._refused.fresh(digest):
            return None

        def checked() -> Engine:
            engine = check(key)
            if engine is None:
                raise _Refused
            return engine

        try:
            return self._valid.get(digest, checked)
        except _Refused:
            self._refused.get(digest, lambda: True)
            return None


@dataclass(frozen=True)
class ColumnRef:
    catalog: str
    schema: str
    table: str
    column: str
    type: str | None


def is_pii(tags: Iterable[str], patterns: Sequence[str]) -> bool:
    return any(is_masked_tag(t, patterns) for t in tags)


def column_masks(
    engine: Engine,
    columns: Sequence[ColumnRef],
    tags_of: Callable[[CatalogSource, str, str], TableTags],
    *,
    user: str,
    groups: Iterable[str],
    patterns: Sequence[str],
) -> list[tuple[int, str]]:
    """``(index, mask expression)`` of the columns this identity reads masked: a PII tag (direct or propagated) on
    the column or its table, in a catalog the engine maps, for a user without the PII grant. Pure but for
    ``tags_of``."""
    if engine.sees_pii(user, groups):
        return []
    out: list[tuple[int, str]] = []
    # One lookup per table, however many of its columns are asked about.
    per_table: dict[tuple[str, str, str], TableTags] = {}
    for index, column in enumerate(columns):
        source = engine.source_for(column.catalog)
        if source is None:
            continue
        table_key = (column.catalog, column.schema, column.table)
        tags = per_table.get(table_key)
        if tags is None:
            tags = per_table[table_key] = tags_of(source, column.schema, column.table)
        if is_pii(tags.table, patterns) or is_pii(tags.columns.get(column.column.lower(), ()), patterns):
            out.append((index, fitted_mask(column, engine.mask_style)))
    return out


_VARCHAR = re.compile(r"varchar(\((\d{1,10})\))?")


def fitted_mask(column: ColumnRef, style: MaskStyle) -> str:
    """The column's mask (``tenants.access.rules.mask_expression``, as in the ``lake`` catalog) in the column's own
    type: Trino refuses a mask it cannot coerce to the column's type, and a bounded ``varchar(n)`` takes neither the
    redaction literal (``varchar(4)``) when n < 4 nor a hash (unbounded ``varchar``) without a cast."""
    expression = mask_expression(column.column, column.type, style)
    if expression == "NULL":
        return expression  # NULL fits every type
    bounded = _VARCHAR.fullmatch((column.type or "").strip().lower())
    if bounded is None or bounded.group(2) is None:
        return expression
    return f"CAST({expression} AS varchar({int(bounded.group(2))}))"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def row_filters(
    engine: Engine,
    catalog: str,
    tags: TableTags | None,
    *,
    user: str,
    groups: Iterable[str],
    present: frozenset[str] | None = None,
) -> list[str]:
    """The row filter rule: for a user without the PII grant, a table with a column tagged ``consent_tag`` (direct
    or propagated) shows only the rows whose consent is true (NULL, false or unparseable: hidden). ``present``: the
    table's columns as Trino listed them, if known; a consent-tagged column missing from them is never referenced
    (Trino would fail the query), and a table whose consent columns are all missing shows no row. Pure."""
    if tags is None or engine.consent_tag is None or engine.source_for(catalog) is None:
        return []
    if engine.sees_pii(user, groups):
        return []
    consent = sorted(name for name, names in tags.columns.items() if engine.consent_tag in names)
    if present is not None:
        kept = [name for name in consent if name in present]
        if consent and not kept:
            return ["false"]  # consent is asked for, and no column of the table says who gave it
        consent = kept
    return [f"coalesce(try_cast({_ident(name)} AS boolean), false)" for name in consent]
