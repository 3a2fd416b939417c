"""Render and write the Trino rules file from the control plane: tenants, and each tenant's masked columns.

Each tenant's resolved masks are kept in the control-plane collection ``trino_access`` (one document per tenant),
so the rules file is always a render of the stored state of every tenant: two processes regenerating at once
never undo each other's tenants, and ``metalake access sync --tenant`` can refresh one tenant cheaply.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

from pymongo import MongoClient
from pymongo.database import Database
from pymongo.errors import PyMongoError

from metalake.mongo import typed_collection
from tenants.access import catalog
from tenants.access.columns import load_masked_columns
from tenants.access.rules import (
    MirroredSchema,
    TenantAccess,
    TrinoColumn,
    build_rules,
    build_shared_rules,
    mirrored_schemas,
    write_rules,
)
from tenants.access.settings import AccessRulesSettings
from tenants.naming import CONTROL_DATABASE, names_for
from tenants.registry import TenantRegistry, TenantState
from tenants.schema_migration import SchemaMove, earlier_namers, migrate_schemas
from tenants.trino_schemas import SchemaNamer, schema_namer

log = logging.getLogger(__name__)

ACCESS_COLLECTION = "trino_access"
# Registered tenants in these states have no Trino users; unregistered tenants with a schema are pooled and active.
_DENIED_STATES = frozenset({TenantState.SUSPENDED, TenantState.DELETING})

Masked = dict[str, dict[str, str | None]]


def resolve(tagged: Iterable[TrinoColumn], types: Mapping[str, Mapping[str, str]]) -> Masked:
    """``{table: {column: type or None}}``: a tagged table masks every column Trino knows of it. Pure."""
    out: Masked = {}
    for col in tagged:
        known = types.get(col.table, {})
        if col.column is None:
            for name, data_type in known.items():
                out.setdefault(col.table, {})[name] = data_type
        else:
            out.setdefault(col.table, {})[col.column] = known.get(col.column)
    return out


class MaskedColumnDoc(TypedDict):
    """One masked column (a list entry: table and column names may hold '.', which MongoDB field names must not)."""

    table: str
    column: str
    # Trino's type of the column, ``None`` when Trino does not know the column.
    type: str | None


class AccessDoc(TypedDict):
    """A document of ``trino_access``: one tenant's resolved masks."""

    _id: str  # the tenant id
    masked: list[MaskedColumnDoc]
    updated_at: datetime


def _to_doc(masked: Masked) -> list[MaskedColumnDoc]:
    return [
        {"table": table, "column": column, "type": data_type}
        for table, columns in sorted(masked.items())
        for column, data_type in sorted(columns.items())
    ]


def _from_doc(items: Iterable[MaskedColumnDoc]) -> Masked:
    out: Masked = {}
    for item in items:
        out.setdefault(str(item["table"]), {})[str(item["column"])] = item.get("type")
    return out


def stored_masks(control: Database[dict[str, Any]], tenant: str) -> Masked:
    """One tenant's stored masks (``{}`` when none are stored): what the lake decisions mask for its users."""
    doc = control[ACCESS_COLLECTION].find_one({"_id": tenant}, {"masked": 1})
    return _from_doc(doc.get("masked") or []) if doc is not None else {}


def _stamps(docs: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Which tenant's masks were stored when: ``updated_at`` changes with every store that changed them."""
    return sorted((str(doc["_id"]), str(doc.get("updated_at"))) for doc in docs)


class AccessSync:
    """Refreshes tenants' masks from MongoDB and Trino, and rewrites the rules file. One per process."""

    def __init__(self, settings: AccessRulesSettings, mongo: MongoClient[dict[str, Any]]) -> None:
        self._settings = settings
        self._mongo = mongo
        self._control = mongo[CONTROL_DATABASE]
        self._registry = TenantRegistry(self._control)
        self._access = typed_collection(self._control, ACCESS_COLLECTION, AccessDoc)

    def tenants(self) -> list[str]:
        """Tenants whose users get rules: registered ones not suspended or being deleted, and unregistered tenants
        that have a Trino schema (the job creates it the first time it sees the tenant)."""
        registered = {r.id: r for r in self._registry.list()}
        allowed = {tid for tid, r in registered.items() if r.state not in _DENIED_STATES}
        for schema in catalog.schemas(self._settings):
            tenant = self._schemas.tenant(schema)
            if tenant is not None and tenant not in registered:
                allowed.add(tenant)
        return sorted(allowed)

    @property
    def _schemas(self) -> SchemaNamer:
        return schema_namer(self._settings)

    def move_schemas(self) -> list[SchemaMove]:
        """Move tenants' schemas still under an earlier name to their current one (``tenants.schema_migration``)."""
        return migrate_schemas(self._settings, self._registry)

    def _mirrored(self, tenant: str) -> list[MirroredSchema]:
        record = self._registry.get(tenant)
        return mirrored_schemas(record.settings) if record is not None else []

    def refresh(
        self,
        tenant: str,
        *,
        stored: list[MaskedColumnDoc] | None = None,
        mirrored: list[MirroredSchema] | None = None,
    ) -> Masked:
        """Reload one tenant's tagged columns and store its resolved masks (unless ``stored``, the stored document's
        masks, already equals them); return them. ``mirrored`` defaults to the tenant's registry settings."""
        access = self._settings.access
        names = names_for(tenant, self._settings.lake_root)
        schema = self._schemas.schema(tenant)
        tagged = load_masked_columns(
            self._mongo[names.mongo_database],
            schema=schema,
            former=[n.schema(tenant) for n in earlier_namers(self._settings)],
            patterns=access.pii_tags,
            catalog=self._settings.trino.catalog,
            instance=access.trino_instance,
            mirrored=self._mirrored(tenant) if mirrored is None else mirrored,
        )
        types = catalog.column_types(self._settings, schema) if tagged else {}
        masked = resolve(tagged, types)
        doc = _to_doc(masked)
        if doc != stored:
            # The replacement leaves out _id: the upsert takes it from the filter.
            self._access.replace_one({"_id": tenant}, {"masked": doc, "updated_at": datetime.now(UTC)}, upsert=True)
        log.info(
            "access.tenant_refreshed",
            extra={"tenant": tenant, "tables": len(masked), "columns": sum(len(c) for c in masked.values())},
        )
        return masked

    def render(self) -> bool:
        """Rewrite the rules file from the stored masks of every tenant; True if it changed.

        Several access processors may render the same file at once (instances of one consumer group, each
        refreshing its partitions' tenants): a render that read the stored masks before another instance stored a
        tenant's could be written last and leave that tenant stale. So after writing, it reads the stamps again and
        renders anew if a tenant's masks were stored meanwhile: whichever write lands last was read after the last
        store. It stops as soon as nothing was stored during a render.

        In ``opa`` mode the file names no tenant (``build_shared_rules``): it is written as is, without reading
        anything; the masks stored are read by the decisions instead."""
        if self._settings.access.mode == "opa":
            return self._render_shared()
        changed = False
        while True:
            docs = list(self._access.find())
            changed = self._render(docs) or changed
            if _stamps(self._access.find({}, {"updated_at": 1})) == _stamps(docs):
                return changed
            log.info("access.rules_stale", extra={"reason": "masks stored during the render"})

    def _render_shared(self) -> bool:
        settings = self._settings
        rules = build_shared_rules(
            [settings.trino.user, *settings.access.service_users],
            catalog=settings.trino.catalog,
            impersonator=settings.trino.user,
        )
        changed = write_rules(settings.access_rules_file, rules)
        log.info("access.rules_rendered", extra={"tenants": 0, "changed": changed})
        return changed

    def _render(self, docs: Iterable[AccessDoc]) -> bool:
        stored = {doc["_id"]: _from_doc(doc.get("masked") or []) for doc in docs}
        accesses = [TenantAccess(t, stored.get(t, {})) for t in self.tenants()]
        settings = self._settings
        rules = build_rules(
            [settings.trino.user, *settings.access.service_users],
            accesses,
            catalog=settings.trino.catalog,
            schemas=self._schemas,
            mask_style=settings.access.mask_style,
            impersonator=settings.trino.user,
        )
        changed = write_rules(settings.access_rules_file, rules)
        log.info("access.rules_rendered", extra={"tenants": len(accesses), "changed": changed})
        return changed

    def sync(self, tenants: Iterable[str] | None = None) -> list[str]:
        """Refresh the given tenants, then render; returns those refreshed. A failure refreshing a given tenant
        raises (the caller retries: its change must not be lost).

        Without ``tenants``, every tenant with rules is refreshed: one that fails (its database being dropped while
        the tenant is deleted) keeps its stored masks and is left to the next sync.
        """
        if tenants is not None:
            chosen = sorted(set(tenants))
            for tenant in chosen:
                self.refresh(tenant)
            self.render()
            return chosen
        stored = {doc["_id"]: doc.get("masked") for doc in self._access.find()}
        mirrored = {r.id: mirrored_schemas(r.settings) for r in self._registry.list()}
        done = []
        for tenant in self.tenants():
            try:
                self.refresh(
                    tenant,
                    stored=stored.get(tenant),
                    mirrored=mirrored.get(tenant, []),
                )
            except PyMongoError as exc:
                log.warning("access.refresh_failed", extra={"tenant": tenant, "error": type(exc).__name__})
                continue
            done.append(tenant)
        self.render()
        return done
