"""Move tenants' Trino schemas to their current names (``tenants.trino_schemas``): the one-time move of an existing
deployment from schemas named after the tenant id, and the move after the naming key changed.

A schema is moved when it is not a current tenant schema but an earlier naming gives it a tenant: a key configured
as a previous one (``secrets.previous_key_encryption_keys``, the API's KEK when the secrets KEK is set), then the id
alone. ``lake_catalog.move_schema`` renames its tables into the current schema, re-creates metalake's views there and
drops the old schema once empty. Idempotent: run it again (the access processor runs it at startup, and
``metalake access migrate-schemas`` on demand); what it could not move stays in the old schema and is reported.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import trino

from metalake.settings import KernelSettings
from tenants.access import catalog
from tenants.lake_catalog import move_schema
from tenants.naming import names_for
from tenants.registry import TenantRegistry
from tenants.trino_schemas import UNKEYED, SchemaNamer, namer_for, schema_namer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemaMove:
    """One schema to move: the tenant, its schema under an earlier naming, the current one; ``left``: what stayed,
    ``error``: why the move failed (the kind of error; the next run retries)."""

    tenant: str
    old: str
    new: str
    left: tuple[str, ...] = ()
    error: str | None = None


def earlier_namers(settings: KernelSettings) -> list[SchemaNamer]:
    """The namings a schema may still carry: under each other configured key, then the id alone."""
    current = schema_namer(settings)
    keys = [settings.secrets.key_encryption_key, settings.api.key_encryption_key]
    keys += settings.secrets.previous_key_encryption_keys
    namers = [namer_for(k) for k in keys if k is not None]
    return [n for n in dict.fromkeys([*namers, UNKEYED]) if n != current]


def _earlier_tenant(earlier: list[SchemaNamer], schema: str, registered: Collection[str]) -> str | None:
    for namer in earlier:
        tenant = namer.tenant(schema)
        # A schema keyed under a key no longer configured reads as an id ending in its suffix: moved only if such a
        # tenant is registered, never into a tenant the suffix made up.
        if tenant is not None and (namer.keyed or not UNKEYED.looks_keyed(schema) or tenant in registered):
            return tenant
    return None


def plan(settings: KernelSettings, schemas: Iterable[str], registered: Collection[str] = ()) -> list[SchemaMove]:
    """The moves ``schemas`` (Trino's listing) call for; ``registered``: the registered tenant ids. Pure but for the
    key derivation."""
    current, earlier = schema_namer(settings), earlier_namers(settings)
    moves = []
    for schema in sorted(schemas):
        tenant = None if current.tenant(schema) is not None else _earlier_tenant(earlier, schema, registered)
        if tenant is not None:
            moves.append(SchemaMove(tenant, schema, current.schema(tenant)))
    return moves


def migrate_schemas(settings: KernelSettings, registry: TenantRegistry) -> list[SchemaMove]:
    """Move every schema :func:`plan` finds; a registered tenant's tier from the registry, an unregistered one's
    (tests, the demo) from what its schema holds. Returns the moves, with what stayed behind; a schema whose move
    fails is logged, returned with its error and left for the next run."""
    done = []
    records = {r.id: r for r in registry.list()}
    for move in plan(settings, catalog.schemas(settings), records):
        record = records.get(move.tenant)
        if record is not None:
            names = record.names(settings.lake_root)
        else:
            own_assets = catalog.tables(settings, move.old).get("assets") == "BASE TABLE"
            names = names_for(move.tenant, settings.lake_root, dedicated=own_assets)
        try:
            left = tuple(move_schema(settings, names, move.old))
        except (trino.exceptions.Error, LookupError) as exc:
            # One schema that cannot move now (dropped meanwhile, shared tables not registered yet) does not hold the
            # others back; the next run retries it.
            log.warning("trino.schema_move_failed", extra={"tenant": move.tenant, "error": type(exc).__name__})
            done.append(SchemaMove(move.tenant, move.old, move.new, error=type(exc).__name__))
            continue
        log.info("trino.schema_moved", extra={"tenant": move.tenant, "left": len(left)})
        done.append(SchemaMove(move.tenant, move.old, move.new, left))
    return done
